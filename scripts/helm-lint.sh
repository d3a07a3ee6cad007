#!/usr/bin/env bash
# Lints and renders the Helm chart helm/msgexchange, then checks what it
# renders:
#   - `helm lint --strict` with the default values and with each ci/*-values.yaml;
#   - `helm template` of the same (fails on a template error or on rendered
#     YAML that does not parse);
#   - every Deployment has liveness and readiness probes and the hardened
#     securityContext (runAsNonRoot, read-only root filesystem, drop ALL,
#     seccomp RuntimeDefault); the migration Job has the securityContext;
#   - the single-active pods (all-in-one, ingest, processor) run one replica
#     with the Recreate strategy, and each mode renders the Deployments it should;
#   - the rendered msgx configuration is accepted by the real binary: for
#     every Deployment and the Job, `msgx -target=<its target> -verify-config`
#     with placeholder secrets (strict YAML: a key msgx does not know fails);
#   - every key of values.yaml has a `# --` comment and a row in README.md.
#
# helm is built from source through the Go module proxy at a pinned version
# into <repo>/bin/tools/helm on first use (a few minutes on a cold machine),
# and reused afterwards.
#
# Usage: scripts/helm-lint.sh
set -euo pipefail

HELM_VERSION=v3.22.0

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS="$ROOT/bin/tools"
CHART="$ROOT/helm/msgexchange"
HELM="$TOOLS/helm"
GO=${GO:-go}

log() { printf 'helm-lint: %s\n' "$*" >&2; }
failures=0
fail() {
	printf 'helm-lint: FAIL: %s\n' "$*" >&2
	failures=$((failures + 1))
}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# install_helm builds helm into $TOOLS unless the binary there was built from
# $HELM_VERSION (read from the module version recorded in the binary).
install_helm() {
	if [ -x "$HELM" ]; then
		have=$("$GO" version -m "$HELM" 2>/dev/null | awk '$1 == "mod" && $2 == "helm.sh/helm/v3" { print $3 }')
		if [ "$have" = "$HELM_VERSION" ]; then
			return
		fi
	fi
	log "building helm $HELM_VERSION into bin/tools (first run only; takes a few minutes)"
	mkdir -p "$TOOLS"
	GOBIN="$TOOLS" GOWORK=off GOFLAGS=-buildvcs=false "$GO" install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

# check_values_docs fails for every key of values.yaml without a `# --`
# comment right above it, and for every key path missing from README.md.
check_values_docs() {
	local values="$CHART/values.yaml" readme="$CHART/README.md"
	awk '
		/^[[:space:]]*# --/ { doc = 1; next }
		/^[[:space:]]*#/ { next }
		/^[[:space:]]*$/ { doc = 0; next }
		/^[[:space:]]*-/ { doc = 0; next }
		/^[[:space:]]*[A-Za-z_][A-Za-z0-9_.-]*:/ {
			if (!doc) printf "values.yaml:%d: key without a \"# --\" comment: %s\n", NR, $0
			doc = 0
		}
	' "$values" >"$WORK/undocumented"
	while IFS= read -r line; do fail "$line"; done <"$WORK/undocumented"

	# Dotted path of every key, from its indentation (two spaces a level).
	awk '
		/^[[:space:]]*(#|-|$)/ { next }
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
	while IFS= read -r key; do
		grep -qF "| \`$key\` |" "$readme" || fail "README.md has no row for the value $key"
	done <"$WORK/keys"
}

# split_docs FILE DIR writes each YAML document of FILE to DIR/doc-N.yaml.
split_docs() {
	mkdir -p "$2"
	awk -v dir="$2" 'BEGIN { n = 0 } /^---/ { n++; next } { print > (dir "/doc-" n ".yaml") }' "$1"
}

doc_kind() { awk '/^kind:/ { print $2; exit }' "$1"; }
doc_name() { awk '/^metadata:/ { m = 1; next } m && /^  name:/ { print $2; exit }' "$1"; }

# config_of DIR NAME prints data.config.yaml of the ConfigMap NAME in DIR.
config_of() {
	local f
	for f in "$1"/doc-*.yaml; do
		if [ "$(doc_kind "$f")" = ConfigMap ] && [ "$(doc_name "$f")" = "$2" ]; then
			awk '/^  config.yaml: \|/ { on = 1; next } on && /^    / { print substr($0, 5); next } on && /^$/ { print; next } on { exit }' "$f"
			return
		fi
	done
	return 1
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
		awk '/^ *livenessProbe:/ { l = 1 } l && /path: \/healthz/ { ok = 1 } END { exit !ok }' "$f" ||
			fail "$kind $name: livenessProbe does not GET /healthz"
		awk '/^ *readinessProbe:/ { r = 1 } r && /path: \/readyz/ { ok = 1 } END { exit !ok }' "$f" ||
			fail "$kind $name: readinessProbe does not GET /readyz"
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
	if ! config_of "$dir" "$cm" >"$cfg"; then
		fail "$kind $name: ConfigMap $cm is not rendered"
		return
	fi
	if ! out=$(env \
		MSGX_POSTGRES_URL='postgres://msgx@postgres:5432/msgx?sslmode=require' \
		MSGX_MYSQL_DSN='msgx:secret@tcp(mysql:3306)/mailbox' \
		MSGX_REDIS_URL='redis://redis:6379/0' \
		MSGX_CONTROL_AUTH_TOKEN='ci-token' \
		"$WORK/msgx" -config.file="$cfg" -config.expand-env -target="$target" -verify-config 2>&1); then
		fail "$kind $name: msgx rejects its configuration (target $target): $out"
	fi
}

# check_render NAME FILE DIR checks one rendering; NAME is the values file's
# stem (default, allinone, distributed).
check_render() {
	local label=$1 dir=$3 f kind name mode deployments=0
	split_docs "$2" "$dir"
	mode=AllInOne
	if grep -q '^ *- -target=processor$' "$2"; then mode=Distributed; fi
	for f in "$dir"/doc-*.yaml; do
		kind=$(doc_kind "$f")
		name=$(doc_name "$f")
		case "$kind" in
		Deployment)
			deployments=$((deployments + 1))
			check_pod "$f" "$kind" "$name"
			verify_config "$f" "$kind" "$name" "$dir"
			case "$name" in
			*-all | *-ingest | *-processor)
				grep -q '^  replicas: 1$' "$f" || fail "$label: $name is single-active but does not run exactly one replica"
				grep -q '^    type: Recreate$' "$f" || fail "$label: $name is single-active but its strategy is not Recreate"
				;;
			esac
			;;
		Job)
			check_pod "$f" "$kind" "$name"
			verify_config "$f" "$kind" "$name" "$dir"
			grep -q 'helm.sh/hook: pre-install,pre-upgrade' "$f" || fail "$label: Job $name is not a pre-install/pre-upgrade hook"
			;;
		esac
	done
	case "$mode" in
	AllInOne) [ "$deployments" -eq 1 ] || fail "$label: AllInOne renders $deployments Deployments, want 1" ;;
	Distributed) [ "$deployments" -eq 5 ] || fail "$label: Distributed renders $deployments Deployments, want 5" ;;
	esac
	grep -q '^kind: ServiceMonitor$' "$2" || fail "$label: no ServiceMonitor rendered"
	grep -q '^kind: Job$' "$2" || fail "$label: no migration Job rendered"
	log "$label: $mode, $deployments Deployment(s) checked"
}

install_helm
log "$("$HELM" version --short 2>/dev/null || echo "helm $HELM_VERSION")"

log "building msgx to verify the rendered configuration"
(cd "$ROOT" && "$GO" build -o "$WORK/msgx" ./services/cmd/msgx)

check_values_docs

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
	if ! "$HELM" lint --strict "${args[@]}" "$CHART" >"$WORK/lint-$label.log" 2>&1; then
		cat "$WORK/lint-$label.log" >&2
		fail "$label: helm lint"
		continue
	fi
	if ! "$HELM" template msgx "$CHART" --namespace msgx "${args[@]}" >"$WORK/render-$label.yaml" 2>"$WORK/template-$label.log"; then
		cat "$WORK/template-$label.log" >&2
		fail "$label: helm template"
		continue
	fi
	check_render "$label" "$WORK/render-$label.yaml" "$WORK/docs-$label"
done

# A deploymentMode other than the two must be refused.
if "$HELM" template msgx "$CHART" --set deploymentMode=Sharded >/dev/null 2>&1; then
	fail "deploymentMode=Sharded renders; want an error"
fi

if [ "$failures" -gt 0 ]; then
	log "$failures problem(s)"
	exit 1
fi
log "ok: ${#renders[@]} value sets linted, rendered and checked"
