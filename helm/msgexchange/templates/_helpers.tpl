{{/*
Shared helpers. Every target's templates/<target>/*.yaml calls
"msgexchange.deployment", "msgexchange.service", "msgexchange.pdb" or
"msgexchange.hpa" with (dict "ctx" $ "target" "<name>"), so that the pods of
every target are built the same way.
*/}}

{{/* Chart name. */}}
{{- define "msgexchange.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: <release>-<chart>, or the release name when it already contains the chart name. */}}
{{- define "msgexchange.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of a target's resources: <fullname>-<target>. */}}
{{- define "msgexchange.targetName" -}}
{{- printf "%s-%s" (include "msgexchange.fullname" .ctx | trunc 52 | trimSuffix "-") .target }}
{{- end }}

{{/* Chart label value. */}}
{{- define "msgexchange.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every resource. */}}
{{- define "msgexchange.labels" -}}
helm.sh/chart: {{ include "msgexchange.chart" . }}
{{ include "msgexchange.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: msgexchange
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of the release. */}}
{{- define "msgexchange.selectorLabels" -}}
app.kubernetes.io/name: {{ include "msgexchange.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of a target's resources; takes (dict "ctx" $ "target" name). */}}
{{- define "msgexchange.targetLabels" -}}
{{ include "msgexchange.labels" .ctx }}
app.kubernetes.io/component: {{ .target }}
{{- end }}

{{/* Selector labels of a target's pods; takes (dict "ctx" $ "target" name). */}}
{{- define "msgexchange.targetSelectorLabels" -}}
{{ include "msgexchange.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .target }}
{{- end }}

{{/* ServiceAccount name. */}}
{{- define "msgexchange.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "msgexchange.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Image reference: repository@digest, or repository:tag (tag defaults to appVersion). */}}
{{- define "msgexchange.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The values of a target; "all" is the all-in-one pod (values key allInOne).
Takes (dict "ctx" $ "target" name), returns YAML (use with fromYaml).
*/}}
{{- define "msgexchange.targetValues" -}}
{{- if eq .target "all" }}
{{- toYaml .ctx.Values.allInOne }}
{{- else }}
{{- toYaml (index .ctx.Values .target) }}
{{- end }}
{{- end }}

{{/*
Fails on values the schema cannot express: a deploymentMode other than the
two (kept for `helm template --skip-schema-validation`), and a Secret that is
both existing and created.
*/}}
{{- define "msgexchange.validate" -}}
{{- if not (has .Values.deploymentMode (list "AllInOne" "Distributed")) }}
{{- fail (printf "deploymentMode %q: want AllInOne or Distributed" .Values.deploymentMode) }}
{{- end }}
{{- range $name, $s := omit .Values.secret "create" }}
{{- if and $s.existingSecret $.Values.secret.create }}
{{- fail (printf "secret.%s.existingSecret: set existingSecret or secret.create, not both" $name) }}
{{- end }}
{{- end }}
{{- $cp := .Values.controlPlane }}
{{- if and $cp.auth.existingSecret $cp.auth.generate }}
{{- fail "controlPlane.auth: set existingSecret or generate, not both" }}
{{- end }}
{{- if and $cp.auth.operators (not $cp.auth.generate) }}
{{- fail "controlPlane.auth.operators: tokens are generated only with controlPlane.auth.generate; add the operators' lines to the existing Secret's tokens instead" }}
{{- end }}
{{- $principals := splitList " " (include "msgexchange.servicePrincipals" .) }}
{{- $seen := dict }}
{{- range $cp.auth.operators }}
{{- if has .name $principals }}
{{- fail (printf "controlPlane.auth.operators: %q is a service's principal; give the operator another name" .name) }}
{{- end }}
{{- if hasKey $seen .name }}
{{- fail (printf "controlPlane.auth.operators: %q is listed twice" .name) }}
{{- end }}
{{- $_ := set $seen .name true }}
{{- end }}
{{- $compat := .Values.ingest.compat }}
{{- if and $compat.enabled (not $compat.tokenSecret.name) }}
{{- fail "ingest.compat.tokenSecret.name: required with ingest.compat.enabled: production mode refuses a compat entry without bearer tokens (R-K1)" }}
{{- end }}
{{- if and $compat.enabled (not $compat.allowedNetworks) }}
{{- fail "ingest.compat.allowedNetworks: required with ingest.compat.enabled: production mode refuses a compat entry open to every address (R-K1)" }}
{{- end }}
{{- if and $cp.tls.clientSecretName (not $cp.tls.enabled) }}
{{- fail "controlPlane.tls.clientSecretName: mutual TLS needs controlPlane.tls.enabled" }}
{{- end }}
{{- end }}

{{/*
The lease-holding services' principals of the current mode, space
separated: each has its own credential (R-H9), a principal:service:token
line of the control plane's token file and, alone, the service's
lease.token-file.
*/}}
{{- define "msgexchange.servicePrincipals" -}}
{{- if eq .Values.deploymentMode "AllInOne" }}all-in-one{{ else }}ingest processor dispatcher{{ end }}
{{- end }}

{{/* The lease names a service principal may hold (R-K7), as its token-file line lists them: ingest its scanner, the processor its lease, the dispatcher one per target, all-in-one every lease. Takes the principal. */}}
{{- define "msgexchange.serviceLeases" -}}
{{- get (dict "ingest" "ingest-scanner" "processor" "processor" "dispatcher" "dispatcher/*" "all-in-one" "*") . }}
{{- end }}

{{/* The principal of a target's lease client; empty for a target that holds no lease. Takes (dict "ctx" $ "target" name). */}}
{{- define "msgexchange.servicePrincipal" -}}
{{- if eq .target "all" }}all-in-one{{ else if has .target (list "ingest" "processor" "dispatcher") }}{{ .target }}{{ end }}
{{- end }}

{{/* Name of the Secret with the control-plane tokens: the existing one, or the one the chart generates (controlPlane.auth.generate); both default to <fullname>-control-auth. */}}
{{- define "msgexchange.controlAuthSecretName" -}}
{{- .Values.controlPlane.auth.existingSecret | default (printf "%s-control-auth" (include "msgexchange.fullname" .)) }}
{{- end }}

{{/* Name of the Secret with the control plane's certificate: the one given, or <fullname>-control-tls (issued by cert-manager where its API exists, otherwise an existing Secret). */}}
{{- define "msgexchange.controlTLSSecretName" -}}
{{- .Values.controlPlane.tls.secretName | default (printf "%s-control-tls" (include "msgexchange.fullname" .)) }}
{{- end }}

{{/* True (non-empty) when the chart renders a cert-manager Certificate for the control plane. */}}
{{- define "msgexchange.controlCertificate" -}}
{{- $tls := .Values.controlPlane.tls }}
{{- if and $tls.enabled (not $tls.secretName) $tls.certManager.enabled (.Capabilities.APIVersions.Has "cert-manager.io/v1") }}true{{ end }}
{{- end }}

{{/* The name the lease clients verify in the control plane's certificate. */}}
{{- define "msgexchange.controlServerName" -}}
{{- $target := ternary "all" "control" (eq .Values.deploymentMode "AllInOne") }}
{{- .Values.controlPlane.tls.serverName | default (printf "%s.%s.svc" (include "msgexchange.targetName" (dict "ctx" . "target" $target)) .Release.Namespace) }}
{{- end }}

{{/* True (non-empty) when the target's pods serve the compat entry. Takes (dict "ctx" $ "target" name). */}}
{{- define "msgexchange.servesCompat" -}}
{{- if and .ctx.Values.ingest.compat.enabled (has .target (list "all" "ingest")) }}true{{ end }}
{{- end }}

{{/* Where a pod's credentials are projected: the control plane's token file and TLS files, a service's token and its TLS files, the compat entry's tokens. */}}
{{- define "msgexchange.credentialsDir" -}}
/etc/msgx/credentials
{{- end }}

{{/*
The projected sources of a pod's credentials volume, each item only in the
pods that need it: the control plane (control, all) gets the token file of
every credential and its server certificate; a lease-holding service only
its own token and the CA (and client certificate) it verifies the control
plane with; a compat-serving pod the compat tokens. Empty for pods that
need none (projector, migrate). Takes (dict "ctx" $ "target" name).
*/}}
{{- define "msgexchange.credentialSources" -}}
{{- $ctx := .ctx }}
{{- $tls := $ctx.Values.controlPlane.tls }}
{{- $auth := include "msgexchange.controlAuthSecretName" $ctx }}
{{- $principal := include "msgexchange.servicePrincipal" . }}
{{- if has .target (list "all" "control") }}
- secret:
    name: {{ $auth }}
    items:
      - key: tokens
        path: control-tokens
{{- if $tls.enabled }}
- secret:
    name: {{ include "msgexchange.controlTLSSecretName" $ctx }}
    items:
      - key: tls.crt
        path: control-tls.crt
      - key: tls.key
        path: control-tls.key
{{- if $tls.clientSecretName }}
- secret:
    name: {{ $tls.clientSecretName }}
    items:
      - key: ca.crt
        path: control-client-ca.crt
{{- end }}
{{- end }}
{{- end }}
{{- if $principal }}
- secret:
    name: {{ $auth }}
    items:
      - key: service-{{ $principal }}
        path: lease-token
{{- if $tls.enabled }}
- secret:
    name: {{ include "msgexchange.controlTLSSecretName" $ctx }}
    items:
      - key: ca.crt
        path: lease-ca.crt
{{- if $tls.clientSecretName }}
- secret:
    name: {{ $tls.clientSecretName }}
    items:
      - key: tls.crt
        path: lease-tls.crt
      - key: tls.key
        path: lease-tls.key
{{- end }}
{{- end }}
{{- end }}
{{- if and (include "msgexchange.servesCompat" .) $ctx.Values.ingest.compat.tokenSecret.name }}
- secret:
    name: {{ $ctx.Values.ingest.compat.tokenSecret.name }}
    items:
      - key: {{ $ctx.Values.ingest.compat.tokenSecret.key }}
        path: compat-tokens
{{- end }}
{{- end }}

{{/* The key of a target's Secret under `secret` (all: allInOne). Takes the target. */}}
{{- define "msgexchange.secretKey" -}}
{{- if eq . "all" }}allInOne{{ else }}{{ . }}{{ end }}
{{- end }}

{{/*
Name of a target's Secret, mounted under /etc/msgx/secrets in that target's
pods alone (R-K7): secret.<target>.existingSecret, or
<fullname>-<target>-secrets (created with secret.create, otherwise expected
to exist). Takes (dict "ctx" $ "target" name).
*/}}
{{- define "msgexchange.secretName" -}}
{{- $s := index .ctx.Values.secret (include "msgexchange.secretKey" .target) }}
{{- $s.existingSecret | default (printf "%s-secrets" (include "msgexchange.targetName" .)) }}
{{- end }}

{{/*
The targets a pod runs, for its -target flag: the all-in-one pod every
service but migrate (the migration Job migrates, as the schema's owner; no
service account may), any other pod its own. Takes the target.
*/}}
{{- define "msgexchange.runTargets" -}}
{{- if eq . "all" }}control,processor,dispatcher,projector,ingest{{ else }}{{ . }}{{ end }}
{{- end }}

{{/*
The configuration sections of the dependencies a target uses, as msgx
-list-targets names them: a pod's configuration keeps only these, so it
refers to no key of a Secret it does not mount (R-K7). Takes the target.
*/}}
{{- define "msgexchange.targetDeps" -}}
{{- get (dict
  "all" "postgres mysql redis kafka"
  "migrate" "postgres"
  "control" "postgres"
  "processor" "postgres kafka"
  "dispatcher" "postgres mysql kafka"
  "projector" "postgres redis kafka"
  "ingest" "mysql kafka") . }}
{{- end }}

{{/*
GOMEMLIMIT for a memory limit (a Kubernetes quantity such as 512Mi, 1Gi,
1G or 536870912): goMemLimit.percent of it, in whole MiB. Empty when the
quantity is empty; fails on one it cannot read.
*/}}
{{- define "msgexchange.goMemLimit" -}}
{{- $q := toString .quantity | trim }}
{{- if $q }}
{{- $m := regexFindAll "^([0-9]+(?:\\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|K|M|G|T)?$" $q 1 }}
{{- if not $m }}
{{- fail (printf "memory limit %q: want a number with an optional Ki, Mi, Gi, Ti, k, M, G or T suffix" $q) }}
{{- end }}
{{- $num := regexReplaceAll "^([0-9.]+).*$" $q "${1}" | float64 }}
{{- $suffix := regexReplaceAll "^[0-9.]+" $q "" }}
{{- $mult := dict "" 1.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "k" 1000.0 "K" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 }}
{{- $bytes := mulf $num (get $mult $suffix) }}
{{- $limit := divf (mulf $bytes (float64 .percent)) 100.0 }}
{{- printf "%dMiB" (int64 (floor (divf $limit 1048576.0))) }}
{{- end }}
{{- end }}

{{/* True (non-empty) when the target's resources are rendered in the current mode. */}}
{{- define "msgexchange.enabled" -}}
{{- include "msgexchange.validate" .ctx }}
{{- if eq .target "all" }}
{{- if eq .ctx.Values.deploymentMode "AllInOne" }}true{{ end }}
{{- else }}
{{- if eq .ctx.Values.deploymentMode "Distributed" }}true{{ end }}
{{- end }}
{{- end }}

{{/*
A target's msgx configuration file. The chart owns http_addr,
control.grpc_addr and ingest.compat.addr (they must match the container
ports) and target (set by flag per pod), and points control.token_file,
lease.token_file and the control plane's TLS files at the projected
credentials unless config sets them. The sections of dependencies the
target does not use (postgres, mysql, redis, kafka) are left out: each pod
mounts only its own Secret, and a ${file:...} of a key it lacks would
refuse to start. Takes (dict "ctx" $ "target" name).
*/}}
{{- define "msgexchange.config" -}}
{{- $deps := splitList " " (include "msgexchange.targetDeps" .target) }}
{{- with .ctx }}
{{- $cfg := deepCopy (.Values.config | default dict) }}
{{- range list "postgres" "mysql" "redis" "kafka" }}
{{- if not (has . $deps) }}
{{- $_ := unset $cfg . }}
{{- end }}
{{- end }}
{{- $_ := unset $cfg "target" }}
{{- $_ := set $cfg "http_addr" (printf "0.0.0.0:%d" (int .Values.ports.http)) }}
{{- $control := deepCopy (get $cfg "control" | default dict) }}
{{- $_ := set $control "grpc_addr" (printf "0.0.0.0:%d" (int .Values.ports.grpc)) }}
{{- $_ := set $cfg "control" $control }}
{{- /* Single-active services (ingest, processor, dispatcher) hold leases
       through the control plane's LeaseService (R-B8): in-pod in AllInOne,
       the control Service in Distributed. */}}
{{- $lease := deepCopy (get $cfg "lease" | default dict) }}
{{- if not (hasKey $lease "control_addr") }}
{{- if eq .Values.deploymentMode "Distributed" }}
{{- $_ := set $lease "control_addr" (printf "%s:%d" (include "msgexchange.targetName" (dict "ctx" . "target" "control")) (int .Values.ports.grpc)) }}
{{- else }}
{{- $_ := set $lease "control_addr" (printf "127.0.0.1:%d" (int .Values.ports.grpc)) }}
{{- end }}
{{- end }}
{{- /* Separate credentials (R-H9): the control plane reads every
       principal:role:token line, each lease client its own token; files
       projected by "msgexchange.credentialSources", re-read when the
       Secret changes. */}}
{{- $dir := include "msgexchange.credentialsDir" . }}
{{- $tls := .Values.controlPlane.tls }}
{{- if not (hasKey $control "token_file") }}
{{- $_ := set $control "token_file" (printf "%s/control-tokens" $dir) }}
{{- end }}
{{- if and $tls.enabled (not (hasKey $control "tls")) }}
{{- $serverTLS := dict "cert_file" (printf "%s/control-tls.crt" $dir) "key_file" (printf "%s/control-tls.key" $dir) }}
{{- if $tls.clientSecretName }}
{{- $_ := set $serverTLS "client_ca_file" (printf "%s/control-client-ca.crt" $dir) }}
{{- end }}
{{- $_ := set $control "tls" $serverTLS }}
{{- end }}
{{- if not (hasKey $lease "token_file") }}
{{- $_ := set $lease "token_file" (printf "%s/lease-token" $dir) }}
{{- end }}
{{- if and $tls.enabled (not (hasKey $lease "tls")) }}
{{- $clientTLS := dict "ca_file" (printf "%s/lease-ca.crt" $dir) "server_name" (include "msgexchange.controlServerName" .) }}
{{- if $tls.clientSecretName }}
{{- $_ := set $clientTLS "cert_file" (printf "%s/lease-tls.crt" $dir) }}
{{- $_ := set $clientTLS "key_file" (printf "%s/lease-tls.key" $dir) }}
{{- end }}
{{- $_ := set $lease "tls" $clientTLS }}
{{- end }}
{{- $_ := set $cfg "lease" $lease }}
{{- /* The compat entry (R-H10) on its own listener, port compat, only
       when ingest.compat.enabled. */}}
{{- $compatValues := .Values.ingest.compat }}
{{- $ingest := deepCopy (get $cfg "ingest" | default dict) }}
{{- $compat := deepCopy (get $ingest "compat" | default dict) }}
{{- $_ := unset $compat "addr" }}
{{- if $compatValues.enabled }}
{{- $_ := set $compat "addr" (printf "0.0.0.0:%d" (int .Values.ports.compat)) }}
{{- with $compatValues.allowedNetworks }}
{{- $_ := set $compat "allowed_networks" (join "," .) }}
{{- end }}
{{- with $compatValues.trustedProxies }}
{{- $_ := set $compat "trusted_proxies" (join "," .) }}
{{- end }}
{{- if $compatValues.tokenSecret.name }}
{{- $_ := set $compat "token_file" (printf "%s/compat-tokens" $dir) }}
{{- end }}
{{- end }}
{{- if $compat }}
{{- $_ := set $ingest "compat" $compat }}
{{- else }}
{{- $_ := unset $ingest "compat" }}
{{- end }}
{{- $_ := set $cfg "ingest" $ingest }}
{{- toYaml $cfg }}
{{- end }}
{{- end }}

{{/* envFrom of every msgx container. */}}
{{- define "msgexchange.envFrom" -}}
{{- with .Values.extraEnvFrom }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
env of a msgx container; takes (dict "ctx" $ "values" targetValues):
the global extraEnv, the target's extraEnv, then GOMEMLIMIT from the memory
limit unless one of them sets it.
*/}}
{{- define "msgexchange.env" -}}
{{- $ctx := .ctx }}
{{- $env := concat ($ctx.Values.extraEnv | default list) (.values.extraEnv | default list) }}
{{- $names := list }}
{{- range $env }}{{ $names = append $names .name }}{{ end }}
{{- if and $ctx.Values.goMemLimit.enabled (not (has "GOMEMLIMIT" $names)) }}
{{- $limit := "" }}
{{- with .values.resources }}{{ with .limits }}{{ $limit = .memory | default "" }}{{ end }}{{ end }}
{{- with (include "msgexchange.goMemLimit" (dict "quantity" $limit "percent" $ctx.Values.goMemLimit.percent)) }}
{{- $env = append $env (dict "name" "GOMEMLIMIT" "value" .) }}
{{- end }}
{{- end }}
{{- if not (has "OTEL_RESOURCE_ATTRIBUTES" $names) }}
{{- /* The pod's identity from the downward API, as OpenTelemetry's
  Kubernetes resource attributes: the SDK reads OTEL_RESOURCE_ATTRIBUTES,
  and Kubernetes expands $(VAR) from the variables defined before it (R-N2). */}}
{{- range $var, $field := dict "K8S_POD_NAME" "metadata.name" "K8S_POD_UID" "metadata.uid" "K8S_NAMESPACE_NAME" "metadata.namespace" "K8S_NODE_NAME" "spec.nodeName" }}
{{- $env = append $env (dict "name" $var "valueFrom" (dict "fieldRef" (dict "fieldPath" $field))) }}
{{- end }}
{{- $env = append $env (dict "name" "OTEL_RESOURCE_ATTRIBUTES" "value" (printf "k8s.pod.name=$(K8S_POD_NAME),k8s.pod.uid=$(K8S_POD_UID),k8s.namespace.name=$(K8S_NAMESPACE_NAME),k8s.node.name=$(K8S_NODE_NAME),k8s.container.name=%s" .container)) }}
{{- end }}
{{- with $env }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
The args of a msgx container; takes (dict "ctx" $ "target" name "extraArgs" list).
With admin.enabled a Deployment's container serves the admin port (pprof,
the log level; R-N2) on the pod's loopback, the only address production
mode accepts for it; the migration Job never does.
*/}}
{{- define "msgexchange.args" -}}
- -target={{ include "msgexchange.runTargets" .target }}
- -config.file=/etc/msgx/config.yaml
- -config.expand-env
{{- if and .ctx.Values.admin.enabled (ne .target "migrate") }}
- -admin.addr=127.0.0.1:{{ int .ctx.Values.admin.port }}
{{- end }}
{{- range .ctx.Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- range .extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/*
The msgx container; takes (dict "ctx" $ "target" name "values" targetValues
"name" containerName "probes" bool).
*/}}
{{- define "msgexchange.container" -}}
{{- $ctx := .ctx -}}
- name: {{ .name }}
  image: {{ include "msgexchange.image" $ctx }}
  imagePullPolicy: {{ $ctx.Values.image.pullPolicy }}
  {{- with $ctx.Values.image.command }}
  command:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  args:
    {{- include "msgexchange.args" (dict "ctx" $ctx "target" .target "extraArgs" .values.extraArgs) | nindent 4 }}
  {{- with (include "msgexchange.envFrom" $ctx | trim) }}
  envFrom:
    {{- . | nindent 4 }}
  {{- end }}
  {{- with (include "msgexchange.env" (dict "ctx" $ctx "values" .values "container" .name) | trim) }}
  env:
    {{- . | nindent 4 }}
  {{- end }}
  {{- if .probes }}
  ports:
    - name: http
      containerPort: {{ $ctx.Values.ports.http }}
      protocol: TCP
    {{- if or (eq .target "all") (eq .target "control") }}
    - name: grpc
      containerPort: {{ $ctx.Values.ports.grpc }}
      protocol: TCP
    {{- end }}
    {{- if include "msgexchange.servesCompat" . }}
    - name: compat
      containerPort: {{ $ctx.Values.ports.compat }}
      protocol: TCP
    {{- end }}
  {{- with $ctx.Values.startupProbe }}
  startupProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  livenessProbe:
    {{- toYaml $ctx.Values.livenessProbe | nindent 4 }}
  readinessProbe:
    {{- toYaml $ctx.Values.readinessProbe | nindent 4 }}
  {{- end }}
  {{- with .values.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $ctx.Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: config
      mountPath: /etc/msgx
      readOnly: true
    - name: tmp
      mountPath: /tmp
    - name: secrets
      mountPath: /etc/msgx/secrets
      readOnly: true
    {{- if include "msgexchange.credentialSources" . | trim }}
    - name: credentials
      mountPath: {{ include "msgexchange.credentialsDir" $ctx }}
      readOnly: true
    {{- end }}
    {{- with $ctx.Values.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/*
The pod spec shared by the Deployments and the migration Job; takes
(dict "ctx" $ "target" name "values" targetValues "configMap" name "probes" bool
"serviceAccountName" optionalOverride).
*/}}
{{- define "msgexchange.podSpec" -}}
{{- $ctx := .ctx -}}
serviceAccountName: {{ .serviceAccountName | default (include "msgexchange.serviceAccountName" $ctx) }}
automountServiceAccountToken: {{ $ctx.Values.serviceAccount.automountServiceAccountToken }}
{{- with $ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $ctx.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
securityContext:
  {{- toYaml $ctx.Values.podSecurityContext | nindent 2 }}
terminationGracePeriodSeconds: {{ $ctx.Values.terminationGracePeriodSeconds }}
{{- with (.values.nodeSelector | default $ctx.Values.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.values.tolerations | default $ctx.Values.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.values.affinity | default $ctx.Values.affinity) }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .probes }}
{{- with (.values.topologySpreadConstraints | default $ctx.Values.topologySpreadConstraints) }}
{{- $selector := dict "matchLabels" (fromYaml (include "msgexchange.targetSelectorLabels" (dict "ctx" $ctx "target" $.target))) }}
{{- $constraints := list }}
{{- range . }}
{{- $constraints = append $constraints (merge (deepCopy .) (dict "labelSelector" $selector "matchLabelKeys" (list "pod-template-hash"))) }}
{{- end }}
topologySpreadConstraints:
  {{- toYaml $constraints | nindent 2 }}
{{- end }}
{{- end }}
containers:
  {{- include "msgexchange.container" (dict "ctx" $ctx "target" .target "values" .values "name" "msgx" "probes" .probes) | nindent 2 }}
volumes:
  - name: config
    configMap:
      name: {{ .configMap }}
  - name: tmp
    emptyDir: {}
  - name: secrets
    secret:
      secretName: {{ include "msgexchange.secretName" (dict "ctx" $ctx "target" .target) }}
      defaultMode: 0440
  {{- with (include "msgexchange.credentialSources" (dict "ctx" $ctx "target" .target) | trim) }}
  - name: credentials
    projected:
      defaultMode: 0440
      sources:
        {{- . | nindent 8 }}
  {{- end }}
  {{- with $ctx.Values.extraVolumes }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/*
A target's Deployment; takes (dict "ctx" $ "target" name). Every target
runs `replicas` pods (two by default): the single-active roles (ingest's
scanner, the processor, each dispatcher target) hold leases, so the extra
pods are standbys that take over, never a second active instance, and a
RollingUpdate is safe for every target.
*/}}
{{- define "msgexchange.deployment" -}}
{{- $ctx := .ctx }}
{{- $v := fromYaml (include "msgexchange.targetValues" .) }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "msgexchange.targetName" . }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "msgexchange.targetLabels" . | nindent 4 }}
spec:
  {{- if not (and $v.hpa $v.hpa.enabled) }}
  replicas: {{ $v.replicas }}
  {{- end }}
  {{- with $v.strategy }}
  strategy:
    {{- if eq .type "Recreate" }}
    type: Recreate
    {{- else }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "msgexchange.targetSelectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "msgexchange.targetSelectorLabels" . | nindent 8 }}
        {{- with $ctx.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        checksum/config: {{ include "msgexchange.config" . | sha256sum }}
        {{- if $ctx.Values.secret.create }}
        checksum/secret: {{ toYaml (index $ctx.Values.secret (include "msgexchange.secretKey" .target)).stringData | sha256sum }}
        {{- end }}
        {{- with $ctx.Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      {{- include "msgexchange.podSpec" (dict "ctx" $ctx "target" .target "values" $v "configMap" (printf "%s-config" (include "msgexchange.targetName" .)) "probes" true) | nindent 6 }}
{{- end }}

{{/* A target's Service; takes (dict "ctx" $ "target" name). */}}
{{- define "msgexchange.service" -}}
{{- $ctx := .ctx }}
{{- $v := fromYaml (include "msgexchange.targetValues" .) }}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "msgexchange.targetName" . }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "msgexchange.targetLabels" . | nindent 4 }}
  {{- with $v.service.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $v.service.type }}
  selector:
    {{- include "msgexchange.targetSelectorLabels" . | nindent 4 }}
  ports:
    - name: http
      port: {{ $ctx.Values.ports.http }}
      targetPort: http
      protocol: TCP
    {{- if or (eq .target "all") (eq .target "control") }}
    - name: grpc
      port: {{ $ctx.Values.ports.grpc }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
    {{- end }}
{{- end }}

{{/* A target's PodDisruptionBudget; takes (dict "ctx" $ "target" name). */}}
{{- define "msgexchange.pdb" -}}
{{- $ctx := .ctx }}
{{- $v := fromYaml (include "msgexchange.targetValues" .) }}
{{- if $v.pdb.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "msgexchange.targetName" . }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "msgexchange.targetLabels" . | nindent 4 }}
spec:
  {{- if not (kindIs "invalid" $v.pdb.minAvailable) }}
  {{- if ne (toString $v.pdb.minAvailable) "" }}
  minAvailable: {{ $v.pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $v.pdb.maxUnavailable }}
  {{- end }}
  {{- else }}
  maxUnavailable: {{ $v.pdb.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "msgexchange.targetSelectorLabels" . | nindent 6 }}
{{- end }}
{{- end }}

{{/* A HorizontalPodAutoscaler (projector, control); takes (dict "ctx" $ "target" name). */}}
{{- define "msgexchange.hpa" -}}
{{- $ctx := .ctx }}
{{- $v := fromYaml (include "msgexchange.targetValues" .) }}
{{- if $v.hpa.enabled }}
{{- $cpu := toString ($v.hpa.targetCPUUtilizationPercentage | default "") }}
{{- $mem := toString ($v.hpa.targetMemoryUtilizationPercentage | default "") }}
{{- if and (eq $cpu "") (eq $mem "") }}
{{- fail (printf "%s.hpa: set targetCPUUtilizationPercentage or targetMemoryUtilizationPercentage" .target) }}
{{- end }}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "msgexchange.targetName" . }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "msgexchange.targetLabels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "msgexchange.targetName" . }}
  minReplicas: {{ $v.hpa.minReplicas }}
  maxReplicas: {{ $v.hpa.maxReplicas }}
  metrics:
    {{- if ne $cpu "" }}
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $cpu }}
    {{- end }}
    {{- if ne $mem "" }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ $mem }}
    {{- end }}
{{- end }}
{{- end }}

{{/* True (non-empty) when the cluster serves the Prometheus Operator's ServiceMonitor. */}}
{{- define "msgexchange.hasServiceMonitor" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor" }}true{{ end }}
{{- end }}

{{/* True (non-empty) when the cluster serves the Prometheus Operator's PrometheusRule. */}}
{{- define "msgexchange.hasPrometheusRule" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1/PrometheusRule" }}true{{ end }}
{{- end }}

{{/* The Deployments of the current mode. */}}
{{- define "msgexchange.targets" -}}
{{- if eq .Values.deploymentMode "AllInOne" }}all{{ else }}ingest processor projector dispatcher control{{ end }}
{{- end }}
