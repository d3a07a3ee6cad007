package charttest

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
)

// podSecretKeys are the keys of each pod's own Secret, by target (the
// component label; all is the all-in-one pod, migrate the migration Job):
// the credentials of the dependencies its targets use (msgx -list-targets)
// as the default configuration reads them (R-K7).
var podSecretKeys = map[string][]string{
	"all":        {"MSGX_POSTGRES_URL", "MSGX_MYSQL_DSN", "MSGX_REDIS_URL", "MSGX_KAFKA_USERNAME", "MSGX_KAFKA_PASSWORD"},
	"ingest":     {"MSGX_MYSQL_DSN", "MSGX_KAFKA_USERNAME", "MSGX_KAFKA_PASSWORD"},
	"processor":  {"MSGX_POSTGRES_URL", "MSGX_KAFKA_USERNAME", "MSGX_KAFKA_PASSWORD"},
	"projector":  {"MSGX_POSTGRES_URL", "MSGX_REDIS_URL", "MSGX_KAFKA_USERNAME", "MSGX_KAFKA_PASSWORD"},
	"dispatcher": {"MSGX_POSTGRES_URL", "MSGX_MYSQL_DSN", "MSGX_KAFKA_USERNAME", "MSGX_KAFKA_PASSWORD"},
	"control":    {"MSGX_POSTGRES_URL"},
	"migrate":    {"MSGX_POSTGRES_URL"},
}

// podAccount is the account each pod uses in every system, as
// deploy/grants names them; the migration Job runs as the schema's owner,
// which the site names (msgx_owner in the examples).
var podAccount = map[string]string{
	"all": "msgx_all_in_one", "ingest": "msgx_ingest", "processor": "msgx_processor", "projector": "msgx_projector",
	"dispatcher": "msgx_dispatcher", "control": "msgx_control", "migrate": "msgx_owner",
}

// secretValuesKey is a target's entry under the chart's `secret` values.
func secretValuesKey(target string) string {
	if target == "all" {
		return "allInOne"
	}
	return target
}

// placeholderSecret is a Secret key's value for account, in a form
// production mode accepts.
func placeholderSecret(key, account string) string {
	switch key {
	case "MSGX_POSTGRES_URL":
		return "postgres://" + account + ":pw@postgres.db:5432/msgx?sslmode=verify-full"
	case "MSGX_MYSQL_DSN":
		return account + ":pw@tcp(mailbox.db:3306)/mailbox"
	case "MSGX_REDIS_URL":
		return "rediss://" + account + ":pw@redis.db:6380/0"
	case "MSGX_KAFKA_USERNAME":
		return account
	case "MSGX_KAFKA_PASSWORD":
		return "kafka-pw"
	}
	panic("no placeholder for " + key)
}

// secretRefs are the Secrets a pod refers to, each with where: its volumes
// (a Secret, or a Secret source of a projected volume) and every
// container's env and envFrom.
func secretRefs(spec corev1.PodSpec) map[string][]string {
	refs := map[string][]string{}
	add := func(name, where string) { refs[name] = append(refs[name], where) }
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			add(v.Secret.SecretName, "volume "+v.Name)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					add(src.Secret.Name, "projected volume "+v.Name)
				}
			}
		}
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				add(e.ValueFrom.SecretKeyRef.Name, "env "+e.Name)
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				add(e.SecretRef.Name, "envFrom")
			}
		}
	}
	return refs
}

// podSecretName is the Secret a rendering's values give target: its
// existingSecret, or <fullname>-<target>-secrets.
func podSecretName(t *testing.T, vals chartutil.Values, target string) string {
	t.Helper()
	if name := pathString(vals, "secret."+secretValuesKey(target)+".existingSecret"); name != "" {
		return name
	}
	return "msgx-msgexchange-" + target + "-secrets"
}

// checkPodSecrets: every pod mounts its own Secret at /etc/msgx/secrets,
// and no pod refers, by volume, env or envFrom, to the Secret of any other
// pod of the rendering (R-K7); no two pods share one. A created Secret
// holds exactly its own entry's stringData.
func checkPodSecrets(t *testing.T, m *manifests) {
	t.Helper()
	var pods []corev1.PodTemplateSpec
	for _, d := range m.deployments {
		pods = append(pods, d.Spec.Template)
	}
	for _, j := range m.jobs {
		pods = append(pods, j.Spec.Template)
	}
	require.NotEmpty(t, pods, m.name)
	own := map[string]string{} // component → its Secret
	for _, pod := range pods {
		component := pod.Labels["app.kubernetes.io/component"]
		own[component] = podSecretName(t, m.values, component)
	}
	owner := map[string]string{}
	for component, name := range own {
		require.Empty(t, owner[name], "%s: %s and %s share the Secret %s", m.name, owner[name], component, name)
		owner[name] = component
	}
	for _, pod := range pods {
		component := pod.Labels["app.kubernetes.io/component"]
		refs := secretRefs(pod.Spec)
		var mounted string
		for _, v := range pod.Spec.Volumes {
			if v.Name == "secrets" && v.Secret != nil {
				mounted = v.Secret.SecretName
			}
		}
		require.Equal(t, own[component], mounted, "%s: %s mounts %q at /etc/msgx/secrets, not its own Secret", m.name, component, mounted)
		require.Contains(t, pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "secrets", MountPath: "/etc/msgx/secrets", ReadOnly: true}, "%s: %s", m.name, component)
		for name, where := range refs {
			if other := owner[name]; other != "" && other != component {
				t.Errorf("%s: %s refers to %s's Secret %s (%s)", m.name, component, other, name, strings.Join(where, ", "))
			}
		}
	}
	for _, s := range m.secrets {
		component, ok := owner[s.Name]
		if !ok {
			continue // the control plane's generated tokens: checkCredentials
		}
		want, err := m.values.Table("secret." + secretValuesKey(component) + ".stringData")
		require.NoError(t, err)
		got := chartutil.Values{}
		for k, v := range s.StringData {
			got[k] = v
		}
		require.Equal(t, want, got, "%s: the created Secret %s holds %s's entry only", m.name, s.Name, component)
	}
}

// TestChart_R_K7_EachPodMountsOnlyItsOwnSecret renders every shipped
// values file, both modes with the defaults, and Secrets the chart
// creates, and requires each Deployment and the migration Job to mount
// their own Secret and to refer to no other pod's: the projector cannot
// read the dispatcher's MySQL account, nor ingest the processor's
// PostgreSQL role. Each created Secret holds its own entry only, and a
// pod's configuration reads only its own Secret's keys.
func TestChart_R_K7_EachPodMountsOnlyItsOwnSecret(t *testing.T) {
	t.Parallel()
	chrt := loadChart(t)
	sets := map[string]map[string]any{"distributed-defaults": {"deploymentMode": "Distributed"}}
	for name, file := range valueSets(t) {
		sets[name] = valuesOf(t, file)
	}
	for _, mode := range []string{"AllInOne", "Distributed"} {
		entries := map[string]any{}
		for target, keys := range podSecretKeys {
			data := map[string]any{}
			for _, k := range keys {
				data[k] = placeholderSecret(k, podAccount[target])
			}
			entries[secretValuesKey(target)] = map[string]any{"stringData": data}
		}
		entries["create"] = true
		sets["created-"+mode] = map[string]any{"deploymentMode": mode, "secret": entries}
	}
	for name, vals := range sets {
		m := render(t, chrt, name, vals, monitoringAPIs)
		checkPodSecrets(t, m)
		if strings.HasPrefix(name, "created-") {
			require.Len(t, m.secrets, len(m.deployments)+len(m.jobs), "%s: one Secret per pod", name)
		}
		for _, cm := range m.configMaps {
			if _, ok := cm.Data["config.yaml"]; !ok {
				continue // dashboards
			}
			component := cm.Labels["app.kubernetes.io/component"]
			keys, ok := podSecretKeys[component]
			require.True(t, ok, "%s: ConfigMap %s of no known pod", name, cm.Name)
			for _, ref := range regexp.MustCompile(`/etc/msgx/secrets/([A-Za-z0-9_.-]+)`).FindAllStringSubmatch(cm.Data["config.yaml"], -1) {
				require.Contains(t, keys, ref[1], "%s: %s's configuration reads a key its Secret does not hold", name, component)
			}
		}
	}
}

// readmeSecrets are the `kubectl create secret generic` commands of the
// chart's README: each Secret's keys and values.
func readmeSecrets(t *testing.T) map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "helm", "msgexchange", "README.md"))
	require.NoError(t, err)
	out := map[string]map[string]string{}
	cmd := regexp.MustCompile(`(?m)create secret generic (\S+)((?: \\\n\s+--from-literal=\S+)+)`)
	lit := regexp.MustCompile(`--from-literal=([A-Z_]+)=('[^']*'|\S+)`)
	for _, c := range cmd.FindAllStringSubmatch(string(b), -1) {
		kv := map[string]string{}
		for _, l := range lit.FindAllStringSubmatch(c[2], -1) {
			kv[l[1]] = strings.Trim(l[2], "'")
		}
		out[c[1]] = kv
	}
	return out
}

// accountIn is the account a Secret value names: a URL's user, a DSN's
// user, or the value itself (a SASL user).
func accountIn(t *testing.T, key, value string) string {
	t.Helper()
	switch key {
	case "MSGX_POSTGRES_URL", "MSGX_REDIS_URL":
		u, err := url.Parse(value)
		require.NoError(t, err, key)
		return u.User.Username()
	case "MSGX_MYSQL_DSN":
		user, _, ok := strings.Cut(value, ":")
		require.True(t, ok, "%s %q has no user", key, value)
		return user
	case "MSGX_KAFKA_USERNAME":
		return value
	}
	t.Fatalf("%s holds no account", key)
	return ""
}

// TestChart_R_K7_READMESecretsUseTheGrantsAccounts: the README's commands
// create one Secret per pod of each mode, under the names the chart
// mounts, with exactly the keys the pod's configuration reads, and every
// account in them is that service's own: the PostgreSQL role and MySQL
// account deploy/grants defines for it (the all-in-one pod's the union
// account both files name; the migration Job the schema's owner, never a
// runtime role), and the same name for Redis and Kafka.
func TestChart_R_K7_READMESecretsUseTheGrantsAccounts(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "grants", name))
		require.NoError(t, err)
		return string(b)
	}
	pgGrants, myGrants := read("postgres.sql"), read("mysql.sql")
	documented := readmeSecrets(t)
	var got []string
	for name := range documented {
		got = append(got, name)
	}
	var want []string
	for target := range podSecretKeys {
		want = append(want, "msgx-msgexchange-"+target+"-secrets")
	}
	sort.Strings(got)
	sort.Strings(want)
	require.Equal(t, want, got, "README.md creates one Secret per pod, named as the chart mounts it")
	for target, keys := range podSecretKeys {
		kv := documented["msgx-msgexchange-"+target+"-secrets"]
		var have []string
		for k := range kv {
			have = append(have, k)
		}
		require.ElementsMatch(t, keys, have, "%s: the README's Secret holds the keys its configuration reads", target)
		for key, value := range kv {
			if key == "MSGX_KAFKA_PASSWORD" {
				continue
			}
			account := accountIn(t, key, value)
			require.Equal(t, podAccount[target], account, "%s: %s names another account", target, key)
			runtimeRole := regexp.MustCompile(`GRANT [^;]*\b` + regexp.QuoteMeta(account) + `\b`)
			switch {
			case key == "MSGX_POSTGRES_URL" && target == "migrate":
				require.NotRegexp(t, runtimeRole, pgGrants, "the migration Job runs as the owner, not a runtime role")
			case key == "MSGX_POSTGRES_URL" && target == "all":
				require.Regexp(t, `CREATE ROLE msgx_all_in_one LOGIN [^;]*\n--\s+IN ROLE msgx_processor, msgx_dispatcher, msgx_projector, msgx_control;`, pgGrants,
					"postgres.sql makes the all-in-one role a member of the four")
			case key == "MSGX_POSTGRES_URL":
				require.Regexp(t, runtimeRole, pgGrants, "%s: postgres.sql grants nothing to %s", target, account)
			case key == "MSGX_MYSQL_DSN":
				require.Contains(t, myGrants, fmt.Sprintf("TO '%s'@'%%';", account), "%s: mysql.sql grants nothing to %s", target, account)
			}
		}
	}
}
