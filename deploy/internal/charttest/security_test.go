package charttest

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/fake"
)

// credentialsDir is where the chart projects each pod's control-plane
// credentials.
const credentialsDir = "/etc/msgx/credentials"

// servicePrincipal is the lease client's principal of each component that
// holds leases.
var servicePrincipal = map[string]string{"all": "all-in-one", "ingest": "ingest", "processor": "processor", "dispatcher": "dispatcher"}

// projection is one projected file: the Secret and key it comes from.
type projection struct{ secret, key string }

// projectedCredentials are the files of a pod's credentials volume, by
// path, and whether the container mounts it where msgx looks.
func projectedCredentials(t *testing.T, spec corev1.PodSpec) (map[string]projection, bool) {
	t.Helper()
	out := map[string]projection{}
	for _, v := range spec.Volumes {
		if v.Name != "credentials" {
			continue
		}
		require.NotNil(t, v.Projected, "the credentials volume is a projected volume")
		for _, src := range v.Projected.Sources {
			require.NotNil(t, src.Secret, "credentials come from Secrets only")
			for _, it := range src.Secret.Items {
				_, dup := out[it.Path]
				require.False(t, dup, "%s projected twice", it.Path)
				out[it.Path] = projection{secret: src.Secret.Name, key: it.Key}
			}
		}
	}
	mounted := slices.ContainsFunc(spec.Containers[0].VolumeMounts, func(vm corev1.VolumeMount) bool {
		return vm.Name == "credentials" && vm.MountPath == credentialsDir && vm.ReadOnly && vm.SubPath == ""
	})
	return out, mounted
}

// msgxConfig is the msgx configuration of the all-in-one pod or, in
// Distributed mode, of ingest's pods: each has the kafka, lease, control
// and compat sections the tests read (each pod's configuration keeps only
// the dependencies its targets use).
func msgxConfig(t *testing.T, m *manifests) chartutil.Values {
	t.Helper()
	for _, name := range []string{"msgx-msgexchange-all-config", "msgx-msgexchange-ingest-config"} {
		for _, cm := range m.configMaps {
			if cm.Name == name {
				cfg, err := chartutil.ReadValues([]byte(cm.Data["config.yaml"]))
				require.NoError(t, err)
				return cfg
			}
		}
	}
	t.Fatalf("%s: no all-in-one or ingest ConfigMap", m.name)
	return nil
}

func pathString(v chartutil.Values, path string) string {
	got, err := v.PathValue(path)
	if err != nil {
		return ""
	}
	s, _ := got.(string)
	return s
}

func valueString(t *testing.T, v chartutil.Values, path string) string {
	t.Helper()
	got, err := v.PathValue(path)
	require.NoError(t, err, path)
	s, ok := got.(string)
	require.True(t, ok, "%s is %T", path, got)
	return s
}

// checkCredentials: every pod gets exactly the control-plane credentials
// its targets need (R-H9) — the control plane the token file of every
// credential and its server certificate, each lease holder its own
// service token alone and the CA (and client certificate) it verifies the
// control plane with, the compat-serving pods their bearer tokens, the
// projector and the migration Job nothing — each projected where the
// rendered configuration says; and the generated Secret holds every key
// the pods project from it.
func checkCredentials(t *testing.T, m *manifests) {
	t.Helper()
	cfg := msgxConfig(t, m)
	authSecret := valueString(t, m.values, "controlPlane.auth.existingSecret")
	if authSecret == "" {
		authSecret = "msgx-msgexchange-control-auth"
	}
	gen, _ := m.values.PathValue("controlPlane.auth.generate")
	generated := gen == true
	tlsOn, _ := m.values.PathValue("controlPlane.tls.enabled")
	tlsSecret := valueString(t, m.values, "controlPlane.tls.secretName")
	if tlsSecret == "" {
		tlsSecret = "msgx-msgexchange-control-tls"
	}
	clientSecret := valueString(t, m.values, "controlPlane.tls.clientSecretName")
	compatOn, _ := m.values.PathValue("ingest.compat.enabled")
	compatTokens := valueString(t, m.values, "ingest.compat.tokenSecret.name")
	file := func(name string) string { return credentialsDir + "/" + name }

	var templates []corev1.PodTemplateSpec
	for _, d := range m.deployments {
		templates = append(templates, d.Spec.Template)
	}
	for _, j := range m.jobs {
		templates = append(templates, j.Spec.Template)
	}
	fromAuth := map[string]bool{}
	for _, tpl := range templates {
		component := tpl.Labels["app.kubernetes.io/component"]
		want := map[string]projection{}
		if component == "all" || component == "control" {
			want["control-tokens"] = projection{authSecret, "tokens"}
			require.Equal(t, file("control-tokens"), pathString(cfg, "control.token_file"), "%s: control.token_file", m.name)
			if tlsOn == true {
				want["control-tls.crt"] = projection{tlsSecret, "tls.crt"}
				want["control-tls.key"] = projection{tlsSecret, "tls.key"}
				require.Equal(t, file("control-tls.crt"), pathString(cfg, "control.tls.cert_file"), m.name)
				require.Equal(t, file("control-tls.key"), pathString(cfg, "control.tls.key_file"), m.name)
				if clientSecret != "" {
					want["control-client-ca.crt"] = projection{clientSecret, "ca.crt"}
					require.Equal(t, file("control-client-ca.crt"), pathString(cfg, "control.tls.client_ca_file"), m.name)
				} else {
					require.Empty(t, pathString(cfg, "control.tls.client_ca_file"), m.name)
				}
			} else {
				require.Empty(t, pathString(cfg, "control.tls.cert_file"), "%s: TLS files without controlPlane.tls", m.name)
			}
		}
		if p := servicePrincipal[component]; p != "" {
			want["lease-token"] = projection{authSecret, "service-" + p}
			require.Equal(t, file("lease-token"), pathString(cfg, "lease.token_file"), "%s: lease.token_file", m.name)
			if tlsOn == true {
				want["lease-ca.crt"] = projection{tlsSecret, "ca.crt"}
				require.Equal(t, file("lease-ca.crt"), pathString(cfg, "lease.tls.ca_file"), m.name)
				require.NotEmpty(t, pathString(cfg, "lease.tls.server_name"), "%s: the services verify the control plane's name", m.name)
				if clientSecret != "" {
					want["lease-tls.crt"] = projection{clientSecret, "tls.crt"}
					want["lease-tls.key"] = projection{clientSecret, "tls.key"}
					require.Equal(t, file("lease-tls.crt"), pathString(cfg, "lease.tls.cert_file"), m.name)
					require.Equal(t, file("lease-tls.key"), pathString(cfg, "lease.tls.key_file"), m.name)
				}
			} else {
				require.Empty(t, pathString(cfg, "lease.tls.ca_file"), m.name)
			}
		}
		if compatOn == true && compatTokens != "" && (component == "all" || component == "ingest") {
			want["compat-tokens"] = projection{compatTokens, valueString(t, m.values, "ingest.compat.tokenSecret.key")}
			require.Equal(t, file("compat-tokens"), pathString(cfg, "ingest.compat.token_file"), m.name)
		}
		got, mounted := projectedCredentials(t, tpl.Spec)
		require.Equal(t, want, got, "%s: %s: projected credentials", m.name, component)
		require.Equal(t, len(want) > 0, mounted, "%s: %s: credentials mounted at %s", m.name, component, credentialsDir)
		for _, p := range got {
			if p.secret == authSecret {
				fromAuth[p.key] = true
			}
		}
	}
	if !generated {
		return
	}
	var auth *corev1.Secret
	for _, s := range m.secrets {
		if s.Name == authSecret {
			auth = s
		}
	}
	require.NotNil(t, auth, "%s: the control-plane credentials are generated but no Secret %s is rendered", m.name, authSecret)
	for key := range fromAuth {
		require.Contains(t, auth.Data, key, "%s: pods project %s, which the generated Secret lacks", m.name, key)
	}
}

// fileRef is the only form a secret takes in the msgx configuration: a
// reference to a file of the mounted Secret.
var fileRef = regexp.MustCompile(`^\$\{file:/etc/msgx/secrets/[A-Za-z0-9_.-]+\}$`)

// secretKeys are the configuration keys whose value is a credential or
// carries one (a URL or DSN with a password).
var secretKeys = map[string]bool{"auth_token": true, "token": true, "password": true, "url": true, "dsn": true}

var (
	// userinfoPassword is a URL with a password: scheme://user:password@.
	userinfoPassword = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:[^/@\s]+@`)
	// dsnPassword is a go-sql-driver DSN with a password: user:password@tcp(.
	dsnPassword = regexp.MustCompile(`(^|\s)[^\s:@/]+:[^\s@]+@(tcp|unix)\(`)
	// tokenLike is a long run of token characters with letters and digits,
	// as `openssl rand -hex|-base64` or randAlphaNum produce.
	tokenLike = regexp.MustCompile(`^[A-Za-z0-9_+/=-]{24,}$`)
	letter    = regexp.MustCompile(`[A-Za-z]`)
	digit     = regexp.MustCompile(`[0-9]`)
	// tokenKey is a values key that names a credential.
	tokenKey = regexp.MustCompile(`(?i)(^|_)(auth_?token|token|password|passwd)$`)
)

// looksLikeToken reports a string that reads as a credential.
func looksLikeToken(s string) bool {
	return tokenLike.MatchString(s) && letter.MatchString(s) && digit.MatchString(s)
}

// walk calls fn for every leaf of a YAML tree with its dotted path and key.
func walk(path string, v any, fn func(path, key string, leaf any)) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			walk(strings.TrimPrefix(path+"."+k, "."), c, fn)
		}
	case chartutil.Values:
		walk(path, map[string]any(x), fn)
	case []any:
		for i, c := range x {
			walk(fmt.Sprintf("%s[%d]", path, i), c, fn)
		}
	default:
		key := path[strings.LastIndex(path, ".")+1:]
		fn(path, key, v)
	}
}

// configMapProblems lists the secrets a rendering's ConfigMaps give away:
// a credential key of the msgx configuration with a value other than a
// ${file:...} reference, a URL or DSN with a password, and any value of a
// rendered Secret (a generated token, say) appearing in a ConfigMap.
func configMapProblems(t *testing.T, m *manifests) []string {
	t.Helper()
	var secretValues []string
	for _, s := range m.secrets {
		add := func(key, v string) {
			if key == "tokens" {
				for _, line := range strings.Split(v, "\n") {
					if f := strings.SplitN(line, ":", 3); len(f) == 3 && !strings.HasPrefix(line, "#") {
						secretValues = append(secretValues, f[2])
					}
				}
				return
			}
			if len(v) >= 8 {
				secretValues = append(secretValues, v)
			}
		}
		for k, v := range s.Data {
			add(k, string(v))
		}
		for k, v := range s.StringData {
			add(k, v)
		}
	}
	var problems []string
	for _, cm := range m.configMaps {
		for key, data := range cm.Data {
			for _, sv := range secretValues {
				if strings.Contains(data, sv) {
					problems = append(problems, fmt.Sprintf("ConfigMap %s %s holds a value of a Secret", cm.Name, key))
				}
			}
			if userinfoPassword.MatchString(data) || dsnPassword.MatchString(data) {
				problems = append(problems, fmt.Sprintf("ConfigMap %s %s holds a URL or DSN with a password", cm.Name, key))
			}
			if key != "config.yaml" {
				continue
			}
			cfg, err := chartutil.ReadValues([]byte(data))
			require.NoError(t, err)
			walk("", cfg, func(path, k string, leaf any) {
				if !secretKeys[k] {
					return
				}
				if s, ok := leaf.(string); !ok || (s != "" && !fileRef.MatchString(s)) {
					problems = append(problems, fmt.Sprintf("ConfigMap %s: %s is a value, not a ${file:/etc/msgx/secrets/KEY} reference", cm.Name, path))
				}
			})
		}
	}
	return problems
}

func checkNoSecretInConfigMaps(t *testing.T, m *manifests) {
	t.Helper()
	require.Empty(t, configMapProblems(t, m), m.name)
}

// valuesProblems lists the secrets a values tree holds: a
// secret.<pod>.stringData with entries, a credential key with a value other than a ${file:...}
// reference, a URL or DSN with a password, and any string that reads as a
// token.
func valuesProblems(vals map[string]any) []string {
	var problems []string
	if sd, ok := vals["secret"].(map[string]any); ok {
		for name, entry := range sd {
			if e, ok := entry.(map[string]any); ok {
				if data, ok := e["stringData"].(map[string]any); ok && len(data) > 0 {
					problems = append(problems, "secret."+name+".stringData has entries: a shipped values file never holds secret data")
				}
			}
		}
	}
	walk("", vals, func(path, key string, leaf any) {
		s, ok := leaf.(string)
		if !ok || s == "" {
			return
		}
		switch {
		case tokenKey.MatchString(key) && !fileRef.MatchString(s):
			problems = append(problems, path+" holds a credential")
		case userinfoPassword.MatchString(s) || dsnPassword.MatchString(s):
			problems = append(problems, path+" holds a URL or DSN with a password")
		case looksLikeToken(s):
			problems = append(problems, path+" reads as a token")
		}
	})
	sort.Strings(problems)
	return problems
}

// TestChart_R_H9_NoTokenInAConfigMapOrAShippedValuesFile: no shipped values
// file (values.yaml and ci/*-values.yaml) holds a token, a password or
// secret data, and no rendering puts one in a ConfigMap: the msgx
// configuration refers to mounted files only, and no value of a rendered
// Secret — the generated tokens, a created Secret's data — appears in any
// ConfigMap. The detectors are shown to catch what they look for.
func TestChart_R_H9_NoTokenInAConfigMapOrAShippedValuesFile(t *testing.T) {
	t.Parallel()
	files := []string{filepath.Join(repoRoot(t), "helm", "msgexchange", "values.yaml")}
	for _, f := range valueSets(t) {
		if f != "" {
			files = append(files, f)
		}
	}
	for _, f := range files {
		require.Empty(t, valuesProblems(valuesOf(t, f)), filepath.Base(f))
	}

	// What the single-node values used to hold is caught, item by item.
	old, err := chartutil.ReadValues([]byte(`
secret:
  create: true
  allInOne:
    stringData:
      MSGX_POSTGRES_URL: postgres://msgx:trial@postgres:5432/msgx?sslmode=disable
      MSGX_MYSQL_DSN: msgx:trial@tcp(mysql:3306)/mailbox
      MSGX_CONTROL_AUTH_TOKEN: trial-token-0123456789abcdef0123456789
config:
  control:
    auth_token: 3f9c0a1b2c3d4e5f60718293a4b5c6d7
`))
	require.NoError(t, err)
	require.Equal(t, []string{
		"config.control.auth_token holds a credential",
		"secret.allInOne.stringData has entries: a shipped values file never holds secret data",
		"secret.allInOne.stringData.MSGX_CONTROL_AUTH_TOKEN holds a credential",
		"secret.allInOne.stringData.MSGX_MYSQL_DSN holds a URL or DSN with a password",
		"secret.allInOne.stringData.MSGX_POSTGRES_URL holds a URL or DSN with a password",
	}, valuesProblems(old.AsMap()))

	chrt := loadChart(t)
	// A Secret created from values (kept secret elsewhere, as with
	// helm-secrets) is mounted, never copied into the configuration.
	created := render(t, chrt, "created-secret", map[string]any{"secret": map[string]any{"create": true, "allInOne": map[string]any{"stringData": map[string]any{
		"MSGX_POSTGRES_URL": "postgres://msgx:test-password@postgres:5432/msgx",
		"MSGX_MYSQL_DSN":    "msgx:test-password@tcp(mysql:3306)/mailbox",
		"MSGX_REDIS_URL":    "redis://redis:6379/0",
	}}}}, monitoringAPIs)
	checkNoSecretInConfigMaps(t, created)
	checkCredentials(t, created)
	checkPods(t, created)

	// A token written into config is caught in the ConfigMap.
	leaky := render(t, chrt, "leaky", map[string]any{"config": map[string]any{
		"control":  map[string]any{"auth_token": "0123456789abcdef0123456789abcdef"},
		"postgres": map[string]any{"url": "postgres://msgx:pw@db/msgx"},
	}}, nil)
	require.ElementsMatch(t, []string{
		"ConfigMap msgx-msgexchange-all-config: control.auth_token is a value, not a ${file:/etc/msgx/secrets/KEY} reference",
		"ConfigMap msgx-msgexchange-all-config: postgres.url is a value, not a ${file:/etc/msgx/secrets/KEY} reference",
		"ConfigMap msgx-msgexchange-all-config config.yaml holds a URL or DSN with a password",
		"ConfigMap msgx-msgexchange-migrate: control.auth_token is a value, not a ${file:/etc/msgx/secrets/KEY} reference",
		"ConfigMap msgx-msgexchange-migrate: postgres.url is a value, not a ${file:/etc/msgx/secrets/KEY} reference",
		"ConfigMap msgx-msgexchange-migrate config.yaml holds a URL or DSN with a password",
	}, configMapProblems(t, leaky))
}

// TestChart_R_H9_EachPodGetsOnlyItsCredentials: distributed, with mutual
// TLS and two operators, the operators' tokens and the server's private key
// reach the control plane's pods only, each lease holder gets its own
// service token (not another service's) and the client certificate, and
// the projector and the migration Job get no credential at all.
func TestChart_R_H9_EachPodGetsOnlyItsCredentials(t *testing.T) {
	t.Parallel()
	m := render(t, loadChart(t), "distributed-mtls", map[string]any{
		"deploymentMode": "Distributed",
		"secret":         map[string]any{"processor": map[string]any{"existingSecret": "msgx-processor"}},
		"controlPlane": map[string]any{
			"auth": map[string]any{"generate": true, "operators": []any{map[string]any{"name": "alice", "role": "operate"}, map[string]any{"name": "oncall", "role": "read"}}},
			"tls":  map[string]any{"enabled": true, "secretName": "control-tls", "clientSecretName": "service-tls"},
		},
	}, nil)
	checkCredentials(t, m)
	checkNoSecretInConfigMaps(t, m)
	seen := map[string]map[string]projection{}
	for _, d := range m.deployments {
		got, _ := projectedCredentials(t, d.Spec.Template.Spec)
		seen[d.Spec.Template.Labels["app.kubernetes.io/component"]] = got
	}
	for _, j := range m.jobs {
		got, mounted := projectedCredentials(t, j.Spec.Template.Spec)
		require.Empty(t, got, "the migration Job needs no control-plane credential")
		require.False(t, mounted)
	}
	require.Equal(t, map[string]projection{
		"control-tokens":        {"msgx-msgexchange-control-auth", "tokens"},
		"control-tls.crt":       {"control-tls", "tls.crt"},
		"control-tls.key":       {"control-tls", "tls.key"},
		"control-client-ca.crt": {"service-tls", "ca.crt"},
	}, seen["control"])
	for _, svc := range []string{"ingest", "processor", "dispatcher"} {
		require.Equal(t, map[string]projection{
			"lease-token":   {"msgx-msgexchange-control-auth", "service-" + svc},
			"lease-ca.crt":  {"control-tls", "ca.crt"},
			"lease-tls.crt": {"service-tls", "tls.crt"},
			"lease-tls.key": {"service-tls", "tls.key"},
		}, seen[svc], svc)
	}
	require.Empty(t, seen["projector"])
	cfg := msgxConfig(t, m)
	require.Equal(t, "msgx-msgexchange-control.msgx.svc", valueString(t, cfg, "lease.tls.server_name"))
	require.Equal(t, "msgx-msgexchange-control:9095", valueString(t, cfg, "lease.control_addr"))
	_, err := cfg.PathValue("control.auth_token")
	require.Error(t, err, "the chart configures no all-roles token")
	_, err = cfg.PathValue("lease.auth_token")
	require.Error(t, err, "nor a lease token as a value")
}

// fakeCluster is a cluster holding objects, for the templates' lookup, as
// `helm upgrade` sees the installed release.
type fakeCluster struct{ objects []runtime.Object }

func (c fakeCluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false, err
	}
	gvr := gv.WithResource(strings.ToLower(kind) + "s")
	return fake.NewSimpleDynamicClient(runtime.NewScheme(), c.objects...).Resource(gvr), true, nil
}

// installed is a rendered Secret as the cluster stores it.
func installed(s *corev1.Secret) *unstructured.Unstructured {
	data := map[string]any{}
	for k, v := range s.Data {
		data[k] = base64.StdEncoding.EncodeToString(v)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": s.Name, "namespace": s.Namespace},
		"data":     data,
	}}
}

func controlAuth(t *testing.T, m *manifests) map[string]string {
	t.Helper()
	for _, s := range m.secrets {
		if s.Name == "msgx-msgexchange-control-auth" {
			out := map[string]string{}
			for k, v := range s.Data {
				out[k] = string(v)
			}
			return out
		}
	}
	t.Fatalf("%s: no generated control-plane Secret", m.name)
	return nil
}

var generatedToken = regexp.MustCompile(`^[A-Za-z0-9]{48}$`)

// TestChart_R_H9_GeneratedTokensAreRandomAndKeptAcrossUpgrades: without an
// existing Secret the chart generates one random 48-character token per
// service principal of the mode and per operator, and the token file of
// their lines; a fresh install gets other tokens, an upgrade (the
// installed Secret visible to lookup) keeps every token, and a new operator
// gets a token of their own while the others stay.
func TestChart_R_H9_GeneratedTokensAreRandomAndKeptAcrossUpgrades(t *testing.T) {
	t.Parallel()
	chrt := loadChart(t)
	for _, mode := range []struct {
		name       string
		principals []string
	}{{"AllInOne", []string{"all-in-one"}}, {"Distributed", []string{"ingest", "processor", "dispatcher"}}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			operators := []any{map[string]any{"name": "alice", "role": "operate"}}
			vals := func(ops []any) map[string]any {
				return map[string]any{"deploymentMode": mode.name, "controlPlane": map[string]any{"auth": map[string]any{"generate": true, "operators": ops}}}
			}
			first := render(t, chrt, "install", vals(operators), nil)
			tokens := controlAuth(t, first)
			var wantKeys, wantLines []string
			for _, p := range mode.principals {
				wantKeys = append(wantKeys, "service-"+p)
				leases := map[string]string{"ingest": "ingest-scanner", "processor": "processor", "dispatcher": "dispatcher/*", "all-in-one": "*"}[p]
				wantLines = append(wantLines, p+":service="+leases+":"+tokens["service-"+p])
			}
			wantKeys = append(wantKeys, "operator-alice", "tokens")
			wantLines = append(wantLines, "alice:operate:"+tokens["operator-alice"])
			require.ElementsMatch(t, wantKeys, keysOf(tokens))
			distinct := map[string]bool{}
			for k, v := range tokens {
				if k == "tokens" {
					continue
				}
				require.Regexp(t, generatedToken, v, k)
				require.False(t, distinct[v], "%s repeats another credential's token", k)
				distinct[v] = true
			}
			var lines []string
			for _, line := range strings.Split(strings.TrimSpace(tokens["tokens"]), "\n") {
				if !strings.HasPrefix(line, "#") {
					lines = append(lines, line)
				}
			}
			require.ElementsMatch(t, wantLines, lines)

			again := controlAuth(t, render(t, chrt, "another-install", vals(operators), nil))
			for _, k := range wantKeys[:len(wantKeys)-1] {
				require.NotEqual(t, tokens[k], again[k], "%s: a fresh install has fresh tokens", k)
			}

			var secret *corev1.Secret
			for _, s := range first.secrets {
				if s.Name == "msgx-msgexchange-control-auth" {
					secret = s
				}
			}
			cluster := fakeCluster{objects: []runtime.Object{installed(secret)}}
			upgraded := controlAuth(t, renderIn(t, chrt, "upgrade", vals(operators), nil, cluster))
			require.Equal(t, tokens, upgraded, "an upgrade keeps every token")

			withBob := controlAuth(t, renderIn(t, chrt, "upgrade-new-operator", vals(append(operators, map[string]any{"name": "bob", "role": "read"})), nil, cluster))
			for _, k := range wantKeys[:len(wantKeys)-1] {
				require.Equal(t, tokens[k], withBob[k], k)
			}
			require.Regexp(t, generatedToken, withBob["operator-bob"])
			require.NotContains(t, distinct, withBob["operator-bob"])
			require.Contains(t, withBob["tokens"], "\nbob:read:"+withBob["operator-bob"]+"\n")
			require.Contains(t, withBob["tokens"], "\nalice:operate:"+tokens["operator-alice"]+"\n")
		})
	}
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestChart_R_H10_CompatEntryOwnPortServiceAndNetworkPolicy: off by
// default (no listener, port or Service); enabled, the pods serving it
// (ingest, or all-in-one) get the container port `compat`, msgx listens
// there with the allowed networks, trusted proxies and token file of the
// values, a Service of its own (ClusterIP unless set) exposes that port
// alone and is not scraped, and the NetworkPolicy opens it to
// networkPolicy.compat.from only, apart from port http.
func TestChart_R_H10_CompatEntryOwnPortServiceAndNetworkPolicy(t *testing.T) {
	t.Parallel()
	chrt := loadChart(t)
	for _, mode := range []string{"AllInOne", "Distributed"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			off := render(t, chrt, "off", map[string]any{"deploymentMode": mode, "networkPolicy": map[string]any{"enabled": true}}, monitoringAPIs)
			for _, d := range off.deployments {
				require.False(t, hasPort([]corev1.PodTemplateSpec{d.Spec.Template}, "compat"), d.Name)
			}
			for _, s := range off.services {
				require.False(t, serviceHasPort(s, "compat"), s.Name)
			}
			_, err := msgxConfig(t, off).PathValue("ingest.compat.addr")
			require.Error(t, err, "no compat listener when it is off")

			senders := []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.20.0.0/16"}}}
			scrapers := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}}
			on := render(t, chrt, "on", map[string]any{
				"deploymentMode": mode,
				"ingest": map[string]any{"compat": map[string]any{
					"enabled":         true,
					"allowedNetworks": []any{"10.20.0.0/16", "192.168.7.10"},
					"trustedProxies":  []any{"10.0.0.0/24"},
					"tokenSecret":     map[string]any{"name": "senders"},
				}},
				"networkPolicy": map[string]any{"enabled": true, "compat": map[string]any{"from": senders}, "metrics": map[string]any{"from": scrapers}},
			}, monitoringAPIs)
			checkSelectors(t, on)
			checkCredentials(t, on)
			serving := false
			servingComponent := map[string]string{"AllInOne": "all", "Distributed": "ingest"}[mode]
			for _, d := range on.deployments {
				component := d.Spec.Template.Labels["app.kubernetes.io/component"]
				has := hasPort([]corev1.PodTemplateSpec{d.Spec.Template}, "compat")
				require.Equal(t, component == servingComponent, has, "%s: port compat", d.Name)
				if has {
					serving = true
					for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
						if p.Name == "compat" {
							require.Equal(t, int32(8081), p.ContainerPort)
						}
					}
				}
			}
			require.True(t, serving)
			cfg := msgxConfig(t, on)
			require.Equal(t, "0.0.0.0:8081", valueString(t, cfg, "ingest.compat.addr"))
			require.Equal(t, "10.20.0.0/16,192.168.7.10", valueString(t, cfg, "ingest.compat.allowed_networks"))
			require.Equal(t, "10.0.0.0/24", valueString(t, cfg, "ingest.compat.trusted_proxies"))
			require.Equal(t, credentialsDir+"/compat-tokens", valueString(t, cfg, "ingest.compat.token_file"))

			var compat *corev1.Service
			for _, s := range on.services {
				if serviceHasPort(s, "compat") {
					require.Nil(t, compat, "one compat Service")
					compat = s
				}
			}
			require.NotNil(t, compat)
			require.Equal(t, "msgx-msgexchange-"+servingComponent+"-compat", compat.Name)
			require.Equal(t, corev1.ServiceTypeClusterIP, compat.Spec.Type)
			require.Len(t, compat.Spec.Ports, 1, "the compat Service exposes the compat port alone")
			require.Equal(t, servingComponent, compat.Spec.Selector["app.kubernetes.io/component"])
			require.Len(t, on.monitors, 1)
			sel, err := metav1.LabelSelectorAsSelector(&on.monitors[0].Spec.Selector)
			require.NoError(t, err)
			require.False(t, sel.Matches(labels.Set(compat.Labels)), "the compat Service is not scraped")

			var rules int
			for _, np := range on.netpols {
				if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"] != servingComponent {
					continue
				}
				for _, rule := range np.Spec.Ingress {
					for _, p := range rule.Ports {
						switch p.Port.String() {
						case "compat":
							rules++
							require.Len(t, rule.From, 1)
							require.NotNil(t, rule.From[0].IPBlock)
							require.Equal(t, "10.20.0.0/16", rule.From[0].IPBlock.CIDR)
						case "http":
							for _, peer := range rule.From {
								require.Nil(t, peer.IPBlock, "the senders are not admitted to port http")
							}
						}
					}
				}
			}
			require.Equal(t, 1, rules, "one NetworkPolicy rule for port compat")

			lb := render(t, chrt, "lb", map[string]any{"deploymentMode": mode, "ingest": map[string]any{"compat": map[string]any{
				"enabled": true, "allowedNetworks": []any{"10.20.0.0/16"}, "tokenSecret": map[string]any{"name": "senders"},
				"service": map[string]any{"type": "LoadBalancer", "externalTrafficPolicy": "Local", "loadBalancerSourceRanges": []any{"10.20.0.0/16"}},
			}}}, nil)
			for _, s := range lb.services {
				if serviceHasPort(s, "compat") {
					require.Equal(t, corev1.ServiceTypeLoadBalancer, s.Spec.Type)
					require.Equal(t, corev1.ServiceExternalTrafficPolicyLocal, s.Spec.ExternalTrafficPolicy)
					require.Equal(t, []string{"10.20.0.0/16"}, s.Spec.LoadBalancerSourceRanges)
				} else {
					require.Equal(t, corev1.ServiceTypeClusterIP, s.Spec.Type, "%s: only the compat Service faces the senders", s.Name)
				}
			}
		})
	}
}

// TestChart_R_H9_ValuesThatCannotWorkAreRefused: credentials and TLS
// settings that would leave a pod without its files, or an operator
// without a usable principal, fail the install with the reason.
func TestChart_R_H9_ValuesThatCannotWorkAreRefused(t *testing.T) {
	t.Parallel()
	chrt := loadChart(t)
	cp := func(v map[string]any) map[string]any { return map[string]any{"controlPlane": v} }
	op := func(name, role string) map[string]any {
		return cp(map[string]any{"auth": map[string]any{"generate": true, "operators": []any{map[string]any{"name": name, "role": role}}}})
	}
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"UnknownRole", op("alice", "admin"), "role"},
		{"ServiceRoleForAnOperator", op("alice", "service"), "role"},
		{"PrincipalWithSpace", op("al ice", "read"), "name"},
		{"OperatorNamedLikeAService", map[string]any{"deploymentMode": "Distributed", "controlPlane": op("processor", "read")["controlPlane"]}, `"processor" is a service's principal`},
		{"OperatorTwice", cp(map[string]any{"auth": map[string]any{"generate": true, "operators": []any{map[string]any{"name": "a", "role": "read"}, map[string]any{"name": "a", "role": "operate"}}}}), `"a" is listed twice`},
		{"OperatorsWithoutGenerate", cp(map[string]any{"auth": map[string]any{"existingSecret": "mine", "operators": []any{map[string]any{"name": "a", "role": "read"}}}}), "tokens are generated only with controlPlane.auth.generate"},
		{"GenerateWithExistingSecret", cp(map[string]any{"auth": map[string]any{"existingSecret": "mine", "generate": true}}), "set existingSecret or generate, not both"},
		{"ClientCertificateWithoutTLS", cp(map[string]any{"tls": map[string]any{"enabled": false, "clientSecretName": "svc"}}), "mutual TLS needs controlPlane.tls.enabled"},
		{"CompatWithoutTokens", map[string]any{"ingest": map[string]any{"compat": map[string]any{"enabled": true, "allowedNetworks": []any{"10.0.0.0/8"}}}}, "ingest.compat.tokenSecret.name: required"},
		{"CompatWithoutNetworks", map[string]any{"ingest": map[string]any{"compat": map[string]any{"enabled": true, "tokenSecret": map[string]any{"name": "t"}}}}, "ingest.compat.allowedNetworks: required"},
		{"CompatServiceType", map[string]any{"ingest": map[string]any{"compat": map[string]any{"service": map[string]any{"type": "Ingress"}}}}, "type"},
		{"CompatNetworksAsOneString", map[string]any{"ingest": map[string]any{"compat": map[string]any{"allowedNetworks": "10.0.0.0/8,10.1.0.0/16"}}}, "allowedNetworks"},
		{"ControlPlaneTypo", cp(map[string]any{"tsl": map[string]any{}}), "tsl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := renderValues(t, chrt, tc.values, nil)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
