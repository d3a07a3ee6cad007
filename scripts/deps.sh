#!/usr/bin/env bash
# Makes sure PostgreSQL, MariaDB and Redis are installed and running on
# loopback, installing them with apt-get where missing (Debian, as root).
# Used by `make run`, `make test` and CI; safe to run any number of times.
set -euo pipefail

log() { echo "deps: $*" >&2; }

apt_updated=0
apt_install() {
	if [ "$apt_updated" = 0 ]; then
		log "apt-get update"
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq >/dev/null
		apt_updated=1
	fi
	log "installing $*"
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "$@" >/dev/null
}

wait_for() { # name, command...
	local name=$1; shift
	for _ in $(seq 1 60); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.5
	done
	log "$name did not come up"; return 1
}

# PostgreSQL: trust on loopback is expected (the machine's default set-up).
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
	apt_install postgresql
fi
if ! pg_isready -h 127.0.0.1 -p 5432 >/dev/null 2>&1; then
	log "starting PostgreSQL"
	pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
	wait_for PostgreSQL pg_isready -h 127.0.0.1 -p 5432
fi
if ! psql -h 127.0.0.1 -U postgres -d postgres -Atc 'select 1' >/dev/null 2>&1; then
	# A freshly installed cluster only trusts the postgres OS user on the socket.
	log "allowing local trust connections for the development cluster"
	hba=$(su postgres -c "psql -Atc 'show hba_file'")
	sed -i -E 's/^(host\s+all\s+all\s+127\.0\.0\.1\/32\s+)\S+/\1trust/; s/^(host\s+all\s+all\s+::1\/128\s+)\S+/\1trust/; s/^(local\s+all\s+all\s+)\S+/\1trust/' "$hba"
	su postgres -c "psql -Atc 'select pg_reload_conf()'" >/dev/null
	wait_for "PostgreSQL trust" psql -h 127.0.0.1 -U postgres -d postgres -Atc 'select 1'
fi
psql -h 127.0.0.1 -U postgres -d postgres -Atc "select 1 from pg_database where datname='test'" | grep -q 1 ||
	psql -h 127.0.0.1 -U postgres -d postgres -qc 'create database test'

# MariaDB: root without a password on loopback.
if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
	apt_install mariadb-server
fi
if ! mysqladmin -h 127.0.0.1 -u root ping >/dev/null 2>&1; then
	log "starting MariaDB"
	mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
	start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql || true
	wait_for MariaDB mysqladmin -h 127.0.0.1 -u root ping
fi
if ! mysql -h 127.0.0.1 -u root -e 'select 1' >/dev/null 2>&1; then
	log "allowing root without password on loopback for development"
	mysql -u root -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD(''); FLUSH PRIVILEGES;" || true
fi
mysql -h 127.0.0.1 -u root -e 'CREATE DATABASE IF NOT EXISTS test'

# Redis: nothing kept on disk.
if ! command -v redis-server >/dev/null 2>&1; then
	apt_install redis-server
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
	log "starting Redis"
	mkdir -p /var/lib/redis /var/log/redis
	redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
	wait_for Redis redis-cli -h 127.0.0.1 -p 6379 ping
fi
log "PostgreSQL, MariaDB and Redis are running"
