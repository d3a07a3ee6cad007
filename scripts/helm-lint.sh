#!/usr/bin/env bash
# Lints and renders the Helm chart helm/msgexchange, then checks what it
# renders:
#   - `helm lint --strict` with the default values and with each ci/*-values.yaml
#     (values.schema.json refuses unknown keys and wrong types);
#   - `helm template` of the same, on a cluster that serves the Prometheus
#     Operator's APIs (fails on a template error or on rendered YAML that does
#     not parse), and the default values once more on one that does not: no
#     ServiceMonitor or PrometheusRule may be rendered there;
#   - every Deployment has liveness and readiness probes and the hardened
#     securityContext (runAsNonRoot, read-only root filesystem, drop ALL,
#     seccomp RuntimeDefault); the migration Job has the securityContext;
#   - with the default values every single-active pod (all-in-one; ingest,
#     processor and dispatcher when distributed) runs two replicas (active and
#     standby) with a RollingUpdate, and each mode renders the Deployments it should;
#   - the rendered msgx configuration is accepted by the real binary in
#     production mode: for every Deployment and the Job,
#     `msgx -target=<its target> -verify-config` with placeholder secrets,
#     token files and certificates (strict YAML: a key msgx does not know
#     fails; so do a missing control.token-file or lease.token-file and the
#     all-roles control.auth-token);
#   - every key of values.yaml has a `# --` comment and a row in README.md.
# The Go test deploy/helmchart decodes every rendered manifest strictly into
# the Kubernetes API types and checks selectors, spread and GOMEMLIMIT.
#
# helm is built from source through the Go module proxy at a pinned version
# into <repo>/bin/tools/helm on first use (a few minutes on a cold machine),
# and reused afterwards.
#
# Usage: scripts/helm-lint.sh
#   MSGX=bin/msgx scripts/helm-lint.sh   verifies with a prebuilt msgx instead
#                                        of building one from the tree
set -euo pipefail

HELM_VERSION=v3.22.0
# The Kubernetes version the chart is linted and rendered for (its
# Capabilities and API deprecation checks); the chart needs >= 1.25.
KUBE_VERSION=1.31.0

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS="$ROOT/bin/tools"
CHART="$ROOT/helm/msgexchange"
HELM="$TOOLS/helm"
GO=${GO:-go}
if ! command -v "$GO" >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	GO=/usr/local/go/bin/go
fi

log() { printf 'helm-lint: %s\n' "$*" >&2; }
failures=0
fail() {
	printf 'helm-lint: FAIL: %s\n' "$*" >&2
	failures=$((failures + 1))
}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# install_helm builds helm into $TOOLS unless the binary there reports
# $HELM_VERSION. The linker flags are those of helm's own release build: the
# version, and the Kubernetes version of its client-go (v0.37 = 1.37) as the
# default for Capabilities, which otherwise falls back to 1.20.
install_helm() {
	if [ -x "$HELM" ] && [ "$("$HELM" version --template '{{.Version}}' 2>/dev/null)" = "$HELM_VERSION" ]; then
		return
	fi
	log "building helm $HELM_VERSION into bin/tools (first run only; minutes on a cold machine)"
	mkdir -p "$TOOLS"
	local ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
	local pkg
	for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
		ldflags="$ldflags -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=37"
	done
	GOBIN="$TOOLS" GOWORK=off GOFLAGS=-buildvcs=false \
		"$GO" install -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

# check_values_docs fails for every key of values.yaml without a `# --`
# comment right above it, and for every key path missing from README.md.
check_values_docs() {
	local values="$CHART/values.yaml" readme="$CHART/README.md"
	# Keys inside list items (e.g. the default topologySpreadConstraints) are
	# data, not values of their own.
	awk '
		/^[[:space:]]*# --/ { doc = 1; next }
		/^[[:space:]]*#/ { next }
		/^[[:space:]]*$/ { doc = 0; next }
		{ match($0, /^ */); ind = RLENGTH }
		inlist && ind > listind { next }
		{ inlist = 0 }
		/^[[:space:]]*-/ { doc = 0; inlist = 1; listind = ind; next }
		/^[[:space:]]*[A-Za-z_][A-Za-z0-9_.-]*:/ {
			if (!doc) printf "values.yaml:%d: key without a \"# --\" comment: %s\n", NR, $0
			doc = 0
		}
	' "$values" >"$WORK/undocumented"
	while IFS= read -r line; do fail "$line"; done <"$WORK/undocumented"

	# Dotted path of every key, from its indentation (two spaces a level).
	awk '
		/^[[:space:]]*(#|$)/ { next }
		{ match($0, /^ */); ind = RLENGTH }
		inlist && ind > listind { next }
		{ inlist = 0 }
		/^[[:space:]]*-/ { inlist = 1; listind = ind; next }
		/^[[:space:]]*[A-Za-z_][A-Za-z0-9_.-]*:/ {
			match($0, /^ */); depth = RLENGTH / 2
			key = $0; sub(/^ */, "", key); sub(/:.*/, "", key)
			path[depth] = key
			out = path[0]
			for (i = 1; i <= depth; i++) out = out "." path[i]
			print out
		}
	' "$values" >"$WORK/keys"
	if [ ! -f "$readme" ]; then
		fail "helm/msgexchange/README.md is missing"
		return
	fi
	awk '
		NR == FNR {
			if (match($0, /^\| `[^`]+` \|/)) have[substr($0, 4, RLENGTH - 6)] = 1
			next
		}
		!($0 in have) { print "README.md has no row for the value " $0 }
	' "$readme" "$WORK/keys" >"$WORK/undocumented"
	while IFS= read -r line; do fail "$line"; done <"$WORK/undocumented"
}

# split_docs FILE DIR writes each YAML document of FILE to DIR/doc-N.yaml and
# lists "path kind name" of every document in DIR/index.
split_docs() {
	mkdir -p "$2"
	awk -v dir="$2" '
		function flush() { if (file != "") print file, kind, name > (dir "/index") }
		BEGIN { n = 0 }
		/^---/ { flush(); n++; file = kind = name = ""; meta = 0; next }
		{
			if (file == "") file = dir "/doc-" n ".yaml"
			print > file
		}
		/^kind:/ { kind = $2 }
		/^metadata:/ { meta = 1; next }
		meta && /^  name:/ && name == "" { name = $2 }
		/^[^ ]/ { meta = 0 }
		END { flush() }
	' "$1"
}

# config_of DIR NAME prints data.config.yaml of the ConfigMap NAME in DIR.
config_of() {
	local f
	f=$(awk -v want="$2" '$2 == "ConfigMap" && $3 == want { print $1; exit }' "$1/index")
	[ -n "$f" ] || return 1
	awk '/^  config.yaml: \|/ { on = 1; next } on && /^    / { print substr($0, 5); next } on && /^$/ { print; next } on { exit }' "$f"
}

# probe_path FILE PROBE prints the httpGet path of the first PROBE in FILE.
probe_path() {
	awk -v probe="$2" '
		$1 == probe ":" { on = 1; match($0, /^ */); indent = RLENGTH; next }
		on { match($0, /^ */); if (RLENGTH <= indent) exit }
		on && $1 == "path:" { print $2; exit }
	' "$1"
}

# check_pod FILE KIND NAME checks the pod template of a Deployment or Job.
check_pod() {
	local f=$1 kind=$2 name=$3 want
	for want in 'runAsNonRoot: true' 'readOnlyRootFilesystem: true' 'allowPrivilegeEscalation: false' '- ALL' 'type: RuntimeDefault'; do
		grep -qF -- "$want" "$f" || fail "$kind $name: securityContext lacks '$want'"
	done
	grep -q '^ *securityContext:' "$f" || fail "$kind $name: no securityContext"
	if [ "$kind" = Deployment ]; then
		grep -q '^ *livenessProbe:' "$f" || fail "$kind $name: no livenessProbe"
		grep -q '^ *readinessProbe:' "$f" || fail "$kind $name: no readinessProbe"
		[ "$(probe_path "$f" livenessProbe)" = /healthz ] || fail "$kind $name: livenessProbe does not GET /healthz"
		[ "$(probe_path "$f" readinessProbe)" = /readyz ] || fail "$kind $name: readinessProbe does not GET /readyz"
		grep -q '^ *resources:' "$f" || fail "$kind $name: no resources"
	fi
}

# verify_config FILE KIND NAME DIR runs msgx -verify-config on the pod's config and target.
verify_config() {
	local f=$1 kind=$2 name=$3 dir=$4 target cm cfg
	target=$(sed -n 's/^ *- -target=\([a-z,]*\)$/\1/p' "$f" | head -n1)
	cm=$(awk '/^ *configMap:/ { c = 1; next } c && /^ *name:/ { print $2; exit }' "$f")
	if [ -z "$target" ] || [ -z "$cm" ]; then
		fail "$kind $name: no -target flag or no config volume"
		return
	fi
	cfg="$WORK/$(basename "$dir")-$name.yaml"
	if ! config_of "$dir" "$cm" >"$cfg.rendered"; then
		fail "$kind $name: ConfigMap $cm is not rendered"
		return
	fi
	# The pods read their secrets from the Secret mounted at /etc/msgx/secrets
	# and their control-plane credentials from /etc/msgx/credentials; here
	# placeholder files stand in for them.
	sed -e "s|/etc/msgx/secrets/|$WORK/secrets/|g" -e "s|/etc/msgx/credentials/|$WORK/credentials/|g" "$cfg.rendered" >"$cfg"
	if ! out=$("$WORK/msgx" -config.file="$cfg" -config.expand-env -target="$target" -verify-config 2>&1); then
		fail "$kind $name: msgx rejects its configuration (target $target): $out"
	fi
}

# check_no_secret_in_config LABEL DIR NAME fails when the msgx
# configuration of the ConfigMap NAME gives a token, password, URL or DSN
# as a value instead of a ${file:...} reference to a mounted Secret, or
# carries control.auth-token, the all-roles development token.
check_no_secret_in_config() {
	local cfg
	cfg=$(config_of "$2" "$3") || return 0
	if grep -qE '^ *auth_token:' <<<"$cfg"; then
		fail "$1: ConfigMap $3 sets an auth_token; credentials come from control.token_file and lease.token_file"
	fi
	local line key
	while IFS= read -r line; do
		key=${line%%:*}
		fail "$1: ConfigMap $3 holds a secret value instead of a \${file:...} reference: ${key##* }"
	done < <(grep -E '^ *(auth_token|token|password|url|dsn):' <<<"$cfg" | grep -vE ":[[:space:]]*(''|\"\"|\\$\\{file:/etc/msgx/secrets/[A-Za-z0-9_.-]+\\})[[:space:]]*$" || true)
}

# check_render NAME FILE DIR checks one rendering; NAME is the values file's
# stem (default, allinone, distributed).
check_render() {
	local label=$1 dir=$3 f kind name mode deployments=0
	split_docs "$2" "$dir"
	mode=AllInOne
	if grep -q '^ *- -target=processor$' "$2"; then mode=Distributed; fi
	while read -r f kind name; do
		case "$kind" in
		Deployment)
			deployments=$((deployments + 1))
			check_pod "$f" "$kind" "$name"
			verify_config "$f" "$kind" "$name" "$dir"
			case "$label:$name" in
			default:*-all | distributed:*-ingest | distributed:*-processor | distributed:*-dispatcher)
				grep -q '^  replicas: 2$' "$f" || fail "$label: $name is single-active but has no standby (want 2 replicas)"
				grep -q '^    type: RollingUpdate$' "$f" || fail "$label: $name does not roll (want RollingUpdate)"
				;;
			esac
			;;
		ConfigMap)
			check_no_secret_in_config "$label" "$dir" "$name"
			;;
		Job)
			check_pod "$f" "$kind" "$name"
			verify_config "$f" "$kind" "$name" "$dir"
			grep -q 'helm.sh/hook: pre-install,pre-upgrade' "$f" || fail "$label: Job $name is not a pre-install/pre-upgrade hook"
			;;
		esac
	done <"$dir/index"
	case "$mode" in
	AllInOne) [ "$deployments" -eq 1 ] || fail "$label: AllInOne renders $deployments Deployments, want 1" ;;
	Distributed) [ "$deployments" -eq 5 ] || fail "$label: Distributed renders $deployments Deployments, want 5" ;;
	esac
	if [ "$label" = default ]; then
		grep -q '^kind: ServiceMonitor$' "$2" || fail "$label: no ServiceMonitor rendered (it is on by default)"
		grep -q '^kind: PrometheusRule$' "$2" || fail "$label: no PrometheusRule rendered (it is on by default)"
		grep -q '^kind: Job$' "$2" || fail "$label: no migration Job rendered (it is on by default)"
	fi
	log "$label: $mode, $deployments Deployment(s) checked"
}

install_helm
log "$("$HELM" version --short 2>/dev/null || echo "helm $HELM_VERSION")"

if [ -n "${MSGX:-}" ]; then
	log "verifying the rendered configuration with $MSGX"
	cp "$MSGX" "$WORK/msgx"
else
	log "building msgx to verify the rendered configuration"
	if ! (cd "$ROOT" && "$GO" build -buildvcs=false -o "$WORK/msgx" ./services/cmd/msgx); then
		log "msgx does not build, so the rendered configuration cannot be verified"
		exit 1
	fi
fi

check_values_docs

mkdir -p "$WORK/secrets"
# Placeholder secrets of the forms production mode accepts (R-K1): verified
# TLS to PostgreSQL, rediss://, and the Kafka SASL user and password. Every
# key any pod's Secret holds is here; that each pod's configuration reads
# only its own Secret's keys is checked by the Go test
# (TestChart_R_K1_R_K7_EveryRenderingPassesProductionVerifyConfig).
printf '%s\n' 'postgres://msgx@postgres:5432/msgx?sslmode=verify-full' >"$WORK/secrets/MSGX_POSTGRES_URL"
printf '%s\n' 'msgx:secret@tcp(mysql:3306)/mailbox' >"$WORK/secrets/MSGX_MYSQL_DSN"
printf '%s\n' 'rediss://redis:6380/0' >"$WORK/secrets/MSGX_REDIS_URL"
printf '%s\n' 'msgx' >"$WORK/secrets/MSGX_KAFKA_USERNAME"
printf '%s\n' 'kafka-secret' >"$WORK/secrets/MSGX_KAFKA_PASSWORD"
# Placeholder control-plane credentials as the chart projects them: the
# control plane's token file (a line per service principal and an
# operator), a service's own token, the compat entry's tokens, and a
# throwaway CA with a server and a client certificate for (mutual) TLS.
mkdir -p "$WORK/credentials"
placeholder_token() { printf 'helm-lint-%s-%s' "$1" "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"; }
service_token=$(placeholder_token service)
{
	# Each service line bound to its leases, as production mode requires (R-K7).
	for line in all-in-one='*' ingest=ingest-scanner processor=processor dispatcher='dispatcher/*'; do
		printf '%s:service=%s:%s\n' "${line%%=*}" "${line#*=}" "$service_token-${line%%=*}"
	done
	printf 'oncall:read:%s\n' "$(placeholder_token operator)"
} >"$WORK/credentials/control-tokens"
printf '%s\n' "$service_token-ingest" >"$WORK/credentials/lease-token"
placeholder_token compat >"$WORK/credentials/compat-tokens"
make_certificates() {
	local d=$WORK/pki ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
	mkdir -p "$d"
	openssl req -x509 "${ec[@]}" -keyout "$d/ca.key" -out "$d/ca.crt" -days 1 -subj /CN=helm-lint-ca 2>/dev/null &&
		openssl req "${ec[@]}" -keyout "$d/server.key" -out "$d/server.csr" -subj /CN=control 2>/dev/null &&
		openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -out "$d/server.crt" -days 1 2>/dev/null &&
		openssl req "${ec[@]}" -keyout "$d/client.key" -out "$d/client.csr" -subj /CN=service 2>/dev/null &&
		openssl x509 -req -in "$d/client.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -out "$d/client.crt" -days 1 2>/dev/null
}
if ! make_certificates; then
	log "openssl cannot make the placeholder certificates, so TLS settings cannot be verified"
	exit 1
fi
cp "$WORK/pki/server.crt" "$WORK/credentials/control-tls.crt"
cp "$WORK/pki/server.key" "$WORK/credentials/control-tls.key"
cp "$WORK/pki/ca.crt" "$WORK/credentials/control-client-ca.crt"
cp "$WORK/pki/ca.crt" "$WORK/credentials/lease-ca.crt"
cp "$WORK/pki/client.crt" "$WORK/credentials/lease-tls.crt"
cp "$WORK/pki/client.key" "$WORK/credentials/lease-tls.key"
# The Prometheus Operator's APIs, as a cluster that has its CRDs serves them.
MONITORING_APIS=(--api-versions monitoring.coreos.com/v1/ServiceMonitor --api-versions monitoring.coreos.com/v1/PrometheusRule)

export HELM_CACHE_HOME="$WORK/helm-cache" HELM_CONFIG_HOME="$WORK/helm-config" HELM_DATA_HOME="$WORK/helm-data"

renders=("default:")
for v in "$CHART"/ci/*-values.yaml; do
	renders+=("$(basename "$v" -values.yaml):$v")
done
for r in "${renders[@]}"; do
	label=${r%%:*}
	values=${r#*:}
	args=()
	if [ -n "$values" ]; then args=(-f "$values"); fi
	if ! "$HELM" lint --strict --kube-version "$KUBE_VERSION" "${args[@]}" "$CHART" >"$WORK/lint-$label.log" 2>&1; then
		cat "$WORK/lint-$label.log" >&2
		fail "$label: helm lint"
		continue
	fi
	if ! "$HELM" template msgx "$CHART" --namespace msgx --kube-version "$KUBE_VERSION" "${MONITORING_APIS[@]}" "${args[@]}" >"$WORK/render-$label.yaml" 2>"$WORK/template-$label.log"; then
		cat "$WORK/template-$label.log" >&2
		fail "$label: helm template"
		continue
	fi
	check_render "$label" "$WORK/render-$label.yaml" "$WORK/docs-$label"
done

# Without the Prometheus Operator's APIs the install must not need them.
if "$HELM" template msgx "$CHART" --namespace msgx --kube-version "$KUBE_VERSION" >"$WORK/render-no-operator.yaml" 2>"$WORK/template-no-operator.log"; then
	if grep -qE '^kind: (ServiceMonitor|PrometheusRule)$' "$WORK/render-no-operator.yaml"; then
		fail "no-operator: a ServiceMonitor or PrometheusRule is rendered on a cluster without their API"
	fi
else
	cat "$WORK/template-no-operator.log" >&2
	fail "no-operator: helm template"
fi

# values.schema.json refuses a misspelt key and a wrong type.
for bad in processor.replica=2 processr.replicas=2 processor.replicas=two; do
	if "$HELM" template msgx "$CHART" --kube-version "$KUBE_VERSION" --set "$bad" >/dev/null 2>&1; then
		fail "--set $bad renders; want a schema error"
	fi
done

# A deploymentMode other than the two must be refused.
if "$HELM" template msgx "$CHART" --kube-version "$KUBE_VERSION" --set deploymentMode=Sharded >/dev/null 2>&1; then
	fail "deploymentMode=Sharded renders; want an error"
fi

if [ "$failures" -gt 0 ]; then
	log "$failures problem(s)"
	exit 1
fi
log "ok: ${#renders[@]} value sets linted, rendered and checked"
