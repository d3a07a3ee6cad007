package charttest

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"msgexchange/deploy/internal/ociimage"
)

// kubeVersion is the cluster version the chart is rendered for, as in
// scripts/helm-lint.sh.
const kubeVersion = "v1.31.0"

// monitoringAPIs are what a cluster with the Prometheus Operator serves.
var monitoringAPIs = []string{"monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule"}

// singleActive are the Deployments whose roles hold leases.
var singleActive = []string{"msgx-msgexchange-all", "msgx-msgexchange-ingest", "msgx-msgexchange-processor", "msgx-msgexchange-dispatcher"}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.work"))
	return root
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	chrt, err := loader.Load(filepath.Join(repoRoot(t), "helm", "msgexchange"))
	require.NoError(t, err)
	return chrt
}

// decoder decodes strictly: a field the API type does not have, or one given
// twice, is an error; so is a kind the scheme does not know.
func decoder(t *testing.T) runtime.Decoder {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme,
		networkingv1.AddToScheme, autoscalingv2.AddToScheme, monitoringv1.AddToScheme,
	} {
		require.NoError(t, add(scheme))
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}

// valuesOf reads a values file ("" is the chart's defaults only).
func valuesOf(t *testing.T, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(file)
	require.NoError(t, err)
	return v.AsMap()
}

// renderValues renders the chart like `helm template msgx --namespace msgx`
// (schema validation included) and returns the coalesced values too.
func renderValues(t *testing.T, chrt *chart.Chart, vals map[string]any, apis []string) (map[string]string, chartutil.Values, error) {
	t.Helper()
	return renderValuesIn(t, chrt, vals, apis, nil)
}

// renderValuesIn is renderValues on a cluster whose objects the templates'
// lookup reads from cluster, like `helm upgrade` (nil: none, like `helm
// template`).
func renderValuesIn(t *testing.T, chrt *chart.Chart, vals map[string]any, apis []string, cluster engine.ClientProvider) (map[string]string, chartutil.Values, error) {
	t.Helper()
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	require.NoError(t, err)
	caps.KubeVersion = *kv
	caps.APIVersions = append(append(chartutil.VersionSet{}, caps.APIVersions...), apis...)
	require.True(t, chartutil.IsCompatibleRange(chrt.Metadata.KubeVersion, caps.KubeVersion.String()), "the chart's kubeVersion %s excludes %s", chrt.Metadata.KubeVersion, kubeVersion)
	rv, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{Name: "msgx", Namespace: "msgx", IsInstall: true, Revision: 1}, caps)
	if err != nil {
		return nil, nil, err
	}
	var out map[string]string
	if cluster == nil {
		out, err = engine.Render(chrt, rv)
	} else {
		out, err = engine.RenderWithClientProvider(chrt, rv, cluster)
	}
	if err != nil {
		return nil, nil, err
	}
	coalesced, err := rv.Table("Values")
	require.NoError(t, err)
	return out, coalesced, nil
}

// manifests are one rendering's objects, by kind.
type manifests struct {
	name        string
	values      chartutil.Values
	all         []runtime.Object
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	pdbs        []*policyv1.PodDisruptionBudget
	hpas        []*autoscalingv2.HorizontalPodAutoscaler
	jobs        []*batchv1.Job
	configMaps  []*corev1.ConfigMap
	secrets     []*corev1.Secret
	netpols     []*networkingv1.NetworkPolicy
	monitors    []*monitoringv1.ServiceMonitor
	rules       []*monitoringv1.PrometheusRule
}

// render renders and decodes every manifest strictly.
func render(t *testing.T, chrt *chart.Chart, name string, vals map[string]any, apis []string) *manifests {
	t.Helper()
	return renderIn(t, chrt, name, vals, apis, nil)
}

// renderIn is render on a cluster (see renderValuesIn).
func renderIn(t *testing.T, chrt *chart.Chart, name string, vals map[string]any, apis []string, cluster engine.ClientProvider) *manifests {
	t.Helper()
	out, coalesced, err := renderValuesIn(t, chrt, vals, apis, cluster)
	require.NoError(t, err, "%s: rendering", name)
	m := &manifests{name: name, values: coalesced}
	dec := decoder(t)
	files := make([]string, 0, len(out))
	for f := range out {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		if strings.HasSuffix(f, "NOTES.txt") {
			continue
		}
		docs := releaseutil.SplitManifests(out[f])
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			doc := docs[k]
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			if strings.HasPrefix(strings.TrimSpace(stripComments(doc)), "apiVersion: cert-manager.io/") {
				// cert-manager's types are not in this module; the
				// Issuer and Certificate are checked by
				// TestChart_R_K1_DefaultsAreClosed.
				continue
			}
			obj, gvk, err := dec.Decode([]byte(doc), nil, nil)
			require.NoError(t, err, "%s: %s does not decode strictly:\n%s", name, f, doc)
			meta, err := metaOf(obj)
			require.NoError(t, err)
			require.NotEmpty(t, meta.GetNamespace(), "%s: %s %s has no namespace", name, gvk.Kind, meta.GetName())
			m.all = append(m.all, obj)
			switch o := obj.(type) {
			case *appsv1.Deployment:
				m.deployments = append(m.deployments, o)
			case *corev1.Service:
				m.services = append(m.services, o)
			case *policyv1.PodDisruptionBudget:
				m.pdbs = append(m.pdbs, o)
			case *autoscalingv2.HorizontalPodAutoscaler:
				m.hpas = append(m.hpas, o)
			case *batchv1.Job:
				m.jobs = append(m.jobs, o)
			case *corev1.ConfigMap:
				m.configMaps = append(m.configMaps, o)
			case *corev1.Secret:
				m.secrets = append(m.secrets, o)
			case *networkingv1.NetworkPolicy:
				m.netpols = append(m.netpols, o)
			case *monitoringv1.ServiceMonitor:
				m.monitors = append(m.monitors, o)
			case *monitoringv1.PrometheusRule:
				m.rules = append(m.rules, o)
			case *corev1.ServiceAccount:
			default:
				t.Fatalf("%s: %s renders an unexpected kind %s", name, f, gvk)
			}
		}
	}
	return m
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	acc, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	return acc, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// valueSets are the shipped values files: the defaults and ci/*-values.yaml.
func valueSets(t *testing.T) map[string]string {
	t.Helper()
	sets := map[string]string{"default": ""}
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "helm", "msgexchange", "ci", "*-values.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		sets[strings.TrimSuffix(filepath.Base(f), "-values.yaml")] = f
	}
	return sets
}

// TestChart_R_I2_EveryValuesFileDecodesStrictlyAndSelectorsMatch renders the
// chart with every shipped values file on a cluster with the Prometheus
// Operator, decodes every manifest strictly into the API types, and checks
// the references between the objects.
func TestChart_R_I2_EveryValuesFileDecodesStrictlyAndSelectorsMatch(t *testing.T) {
	t.Parallel()
	chrt := loadChart(t)
	for name, file := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := render(t, chrt, name, valuesOf(t, file), monitoringAPIs)
			require.NotEmpty(t, m.deployments)
			checkSelectors(t, m)
			checkPods(t, m)
			checkRules(t, m)
			checkCredentials(t, m)
			checkNoSecretInConfigMaps(t, m)
		})
	}
}

// podsOf are the pod templates the selector picks among the Deployments and
// Jobs of the rendering.
func podsOf(t *testing.T, m *manifests, sel *metav1.LabelSelector) []corev1.PodTemplateSpec {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	require.NoError(t, err)
	var out []corev1.PodTemplateSpec
	for _, d := range m.deployments {
		if s.Matches(labels.Set(d.Spec.Template.Labels)) {
			out = append(out, d.Spec.Template)
		}
	}
	for _, j := range m.jobs {
		if s.Matches(labels.Set(j.Spec.Template.Labels)) {
			out = append(out, j.Spec.Template)
		}
	}
	return out
}

func hasPort(pods []corev1.PodTemplateSpec, name string) bool {
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == name {
					return true
				}
			}
		}
	}
	return false
}

func checkSelectors(t *testing.T, m *manifests) {
	t.Helper()
	deployments := map[string]*appsv1.Deployment{}
	for _, d := range m.deployments {
		deployments[d.Name] = d
		pods := podsOf(t, m, d.Spec.Selector)
		require.Len(t, pods, 1, "%s: Deployment %s selects %d pod templates, want its own only", m.name, d.Name, len(pods))
		require.Equal(t, d.Spec.Template.Labels, pods[0].Labels, "%s: Deployment %s selects another Deployment's pods", m.name, d.Name)
		for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
			require.NotNil(t, c.LabelSelector, "%s: %s: spread constraint without labelSelector", m.name, d.Name)
			s, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
			require.NoError(t, err)
			require.True(t, s.Matches(labels.Set(d.Spec.Template.Labels)), "%s: %s: spread constraint does not count its own pods", m.name, d.Name)
			require.Contains(t, c.MatchLabelKeys, "pod-template-hash", "%s: %s: a rollout's pods are not spread among themselves", m.name, d.Name)
		}
	}
	for _, s := range m.services {
		pods := podsOf(t, m, &metav1.LabelSelector{MatchLabels: s.Spec.Selector})
		require.Len(t, pods, 1, "%s: Service %s selects %d pod templates, want one Deployment's", m.name, s.Name, len(pods))
		for _, p := range s.Spec.Ports {
			require.True(t, hasPort(pods, p.TargetPort.String()), "%s: Service %s targets port %s its pods do not have", m.name, s.Name, p.TargetPort.String())
		}
	}
	for _, p := range m.pdbs {
		pods := podsOf(t, m, p.Spec.Selector)
		require.Len(t, pods, 1, "%s: PodDisruptionBudget %s selects %d pod templates", m.name, p.Name, len(pods))
	}
	for _, h := range m.hpas {
		d, ok := deployments[h.Spec.ScaleTargetRef.Name]
		require.True(t, ok, "%s: HPA %s scales the missing Deployment %s", m.name, h.Name, h.Spec.ScaleTargetRef.Name)
		require.Nil(t, d.Spec.Replicas, "%s: Deployment %s sets replicas although its HPA owns them", m.name, d.Name)
	}
	for _, np := range m.netpols {
		pods := podsOf(t, m, &np.Spec.PodSelector)
		require.NotEmpty(t, pods, "%s: NetworkPolicy %s selects no pod", m.name, np.Name)
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				require.True(t, hasPort(pods, p.Port.String()), "%s: NetworkPolicy %s opens port %s its pods do not have", m.name, np.Name, p.Port.String())
			}
			for _, peer := range rule.From {
				if peer.PodSelector != nil && peer.NamespaceSelector == nil {
					require.NotEmpty(t, podsOf(t, m, peer.PodSelector), "%s: NetworkPolicy %s admits pods that do not exist", m.name, np.Name)
				}
			}
		}
	}
	for _, sm := range m.monitors {
		s, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		require.NoError(t, err)
		port := sm.Spec.Endpoints[0].Port
		for _, svc := range m.services {
			selected := s.Matches(labels.Set(svc.Labels))
			// Every Service with the metrics port is scraped; one without it
			// (the compat entry's) is left out rather than scraped in vain.
			require.Equal(t, serviceHasPort(svc, port), selected, "%s: ServiceMonitor selects Service %s: %v; it has port %s: %v", m.name, svc.Name, selected, port, serviceHasPort(svc, port))
		}
	}
}

func serviceHasPort(svc *corev1.Service, name string) bool {
	for _, p := range svc.Spec.Ports {
		if p.Name == name {
			return true
		}
	}
	return false
}

// checkPods checks every msgx container: the configuration and Secret it
// mounts exist, GOMEMLIMIT is what the memory limit gives, and the default
// image is the one `make image` builds.
func checkPods(t *testing.T, m *manifests) {
	t.Helper()
	configMaps := map[string]bool{}
	for _, c := range m.configMaps {
		configMaps[c.Name] = true
	}
	globalEnv := envValue(t, m.values, "extraEnv", "GOMEMLIMIT")
	percent := int64(m.values["goMemLimit"].(map[string]any)["percent"].(float64))
	wantImage, err := ociimage.DefaultReference(repoRoot(t))
	require.NoError(t, err)
	repo, _ := m.values.PathValue("image.repository")
	tag, _ := m.values.PathValue("image.tag")
	digest, _ := m.values.PathValue("image.digest")
	defaultImage := repo == ociimage.DefaultRepository && tag == "" && digest == ""

	var templates []corev1.PodTemplateSpec
	for _, d := range m.deployments {
		templates = append(templates, d.Spec.Template)
	}
	for _, j := range m.jobs {
		templates = append(templates, j.Spec.Template)
	}
	for _, tpl := range templates {
		spec := tpl.Spec
		component := tpl.Labels["app.kubernetes.io/component"]
		// The pod's own existing Secret, or <fullname>-<target>-secrets
		// (created with secret.create, otherwise expected to exist: R-N5).
		secretName := podSecretName(t, m.values, component)
		var mountsSecret bool
		for _, v := range spec.Volumes {
			if v.ConfigMap != nil {
				require.True(t, configMaps[v.ConfigMap.Name], "%s: %s mounts the missing ConfigMap %s", m.name, component, v.ConfigMap.Name)
			}
			if v.Secret != nil && v.Name == "secrets" {
				mountsSecret = true
				require.Equal(t, secretName, v.Secret.SecretName, "%s: %s mounts a Secret the values do not name", m.name, component)
			}
		}
		require.Equal(t, secretName != "", mountsSecret, "%s: %s: secret mounted %v, want %v", m.name, component, mountsSecret, secretName != "")
		require.Len(t, spec.Containers, 1)
		c := spec.Containers[0]
		if defaultImage {
			require.Equal(t, wantImage, c.Image, "%s: the default image is not what make image builds", m.name)
		}
		if mountsSecret {
			require.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "secrets", MountPath: "/etc/msgx/secrets", ReadOnly: true})
		}
		limit, hasLimit := c.Resources.Limits[corev1.ResourceMemory]
		got := ""
		for _, e := range c.Env {
			if e.Name == "GOMEMLIMIT" {
				got = e.Value
			}
		}
		switch {
		case globalEnv != "":
			require.Equal(t, globalEnv, got, "%s: %s: GOMEMLIMIT set by extraEnv must win", m.name, component)
		case hasLimit:
			require.Equal(t, goMemLimit(limit, percent), got, "%s: %s: GOMEMLIMIT for a %s limit", m.name, component, limit.String())
			lim, err := resource.ParseQuantity(strings.TrimSuffix(got, "B"))
			require.NoError(t, err)
			require.Less(t, lim.Value(), limit.Value(), "%s: %s: GOMEMLIMIT must leave headroom below the limit", m.name, component)
		default:
			require.Empty(t, got, "%s: %s: GOMEMLIMIT without a memory limit", m.name, component)
		}
		checkResourceAttributes(t, m.name+": "+component, c)
	}
}

// checkResourceAttributes checks R-N2's Kubernetes resource attributes: the
// container tells OpenTelemetry's SDK which pod, namespace, node and
// container it is, from the downward API, through OTEL_RESOURCE_ATTRIBUTES
// whose $(VAR) references Kubernetes expands only from variables defined
// before it.
func checkResourceAttributes(t *testing.T, where string, c corev1.Container) {
	t.Helper()
	defined := map[string]string{}
	var attrs string
	for _, e := range c.Env {
		if e.Name == "OTEL_RESOURCE_ATTRIBUTES" {
			attrs = e.Value
			break
		}
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			defined[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	require.NotEmpty(t, attrs, "%s: no OTEL_RESOURCE_ATTRIBUTES", where)
	for attr, field := range map[string]string{
		"k8s.pod.name": "metadata.name", "k8s.pod.uid": "metadata.uid",
		"k8s.namespace.name": "metadata.namespace", "k8s.node.name": "spec.nodeName",
	} {
		var ref string
		for _, kv := range strings.Split(attrs, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok && k == attr {
				ref = v
			}
		}
		name, ok := strings.CutPrefix(ref, "$(")
		require.True(t, ok, "%s: %s is %q, not a $(VAR) reference", where, attr, ref)
		name = strings.TrimSuffix(name, ")")
		require.Equal(t, field, defined[name], "%s: %s must come from the downward API's %s, defined before OTEL_RESOURCE_ATTRIBUTES", where, attr, field)
	}
	require.Contains(t, strings.Split(attrs, ","), "k8s.container.name="+c.Name, where)
}

// goMemLimit is the expected GOMEMLIMIT, computed here independently of the
// chart's template arithmetic.
func goMemLimit(limit resource.Quantity, percent int64) string {
	return fmt.Sprintf("%dMiB", limit.Value()*percent/100/(1<<20))
}

func envValue(t *testing.T, vals chartutil.Values, key, name string) string {
	t.Helper()
	list, _ := vals[key].([]any)
	for _, e := range list {
		if em, ok := e.(map[string]any); ok && em["name"] == name {
			return fmt.Sprint(em["value"])
		}
	}
	return ""
}

// metricName matches msgx's own metric names in PromQL.
var metricName = regexp.MustCompile(`\bmsgx_[a-z0-9_]+`)

// checkRules: every msgx metric an alert of the chart's own group or a
// dashboard panel uses is one the code registers, so no alert waits on a
// series that never exists.
func checkRules(t *testing.T, m *manifests) {
	t.Helper()
	for _, r := range m.rules {
		for _, g := range r.Spec.Groups {
			if g.Name != "msgexchange" {
				continue
			}
			require.NotEmpty(t, g.Rules)
			for _, rule := range g.Rules {
				require.NotEmpty(t, rule.Alert)
				require.NotEmpty(t, rule.Labels["severity"], "%s: alert %s has no severity", m.name, rule.Alert)
				for _, name := range metricName.FindAllString(rule.Expr.String(), -1) {
					requireMetricInCode(t, name, "alert "+rule.Alert)
				}
			}
		}
	}
	for _, cm := range m.configMaps {
		for key, data := range cm.Data {
			if !strings.HasSuffix(key, ".json") {
				continue
			}
			var dash struct {
				Panels []struct {
					Title   string `json:"title"`
					Targets []struct {
						Expr string `json:"expr"`
					} `json:"targets"`
				} `json:"panels"`
			}
			require.NoError(t, json.Unmarshal([]byte(data), &dash), "%s: dashboard %s", m.name, key)
			require.NotEmpty(t, dash.Panels)
			for _, p := range dash.Panels {
				for _, tg := range p.Targets {
					for _, name := range metricName.FindAllString(tg.Expr, -1) {
						requireMetricInCode(t, name, "dashboard panel "+p.Title)
					}
				}
			}
		}
	}
}

var (
	sourceOnce sync.Once
	source     string
)

// requireMetricInCode fails unless the metric is a string literal in the
// non-test Go code of services/ or libs/, either as it is or as the
// instrument's name the Prometheus exporter derives it from: less a
// histogram's series suffix (_bucket, _count, _sum), then less the _total a
// counter gets, then less the _seconds a unit of "s" gets.
func requireMetricInCode(t *testing.T, name, where string) {
	t.Helper()
	sourceOnce.Do(func() {
		var b strings.Builder
		for _, dir := range []string{"services", "libs"} {
			_ = filepath.WalkDir(filepath.Join(repoRoot(t), dir), func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
					return err
				}
				data, err := os.ReadFile(p)
				b.Write(data)
				return err
			})
		}
		source = b.String()
	})
	candidates := []string{name}
	base := name
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		base = strings.TrimSuffix(base, suffix)
	}
	candidates = append(candidates, base)
	base = strings.TrimSuffix(base, "_total")
	candidates = append(candidates, base, strings.TrimSuffix(base, "_seconds"))
	// Not require.Contains: its failure message would print every source.
	require.True(t, slices.ContainsFunc(candidates, func(c string) bool { return strings.Contains(source, `"`+c+`"`) }),
		"%s uses %s, which no code registers", where, name)
}

// TestChart_R_I2_SingleActiveRolesHaveAStandbyByDefault: with the default
// values every single-active role runs two pods with a rolling update that
// never takes the last ready pod away (maxUnavailable 0), spread so that
// the active pod and its standby never share a node, with a PDB.
func TestChart_R_I2_SingleActiveRolesHaveAStandbyByDefault(t *testing.T) {
	t.Parallel()
	chrt := loadChart(t)
	for _, mode := range []string{"AllInOne", "Distributed"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			m := render(t, chrt, mode, map[string]any{"deploymentMode": mode}, nil)
			pdbs := map[string]bool{}
			for _, p := range m.pdbs {
				pdbs[p.Name] = true
			}
			n := 0
			for _, d := range m.deployments {
				if !contains(singleActive, d.Name) {
					continue
				}
				n++
				require.NotNil(t, d.Spec.Replicas)
				require.Equal(t, int32(2), *d.Spec.Replicas, "%s has no standby", d.Name)
				require.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, d.Spec.Strategy.Type, d.Name)
				require.Equal(t, "0", d.Spec.Strategy.RollingUpdate.MaxUnavailable.String(), d.Name)
				require.True(t, pdbs[d.Name], "%s has no PodDisruptionBudget", d.Name)
				var hostname bool
				for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
					if c.TopologyKey == "kubernetes.io/hostname" && c.WhenUnsatisfiable == corev1.DoNotSchedule && c.MaxSkew == 1 {
						hostname = true
					}
				}
				require.True(t, hostname, "%s: active and standby may share a node", d.Name)
			}
			want := map[string]int{"AllInOne": 1, "Distributed": 3}[mode]
			require.Equal(t, want, n, "single-active Deployments rendered")
		})
	}
}

// TestChart_R_I2_MonitoringOnlyWhereItsAPIExists: the ServiceMonitor and the
// PrometheusRule are rendered only on a cluster that serves their API, so an
// install without the Prometheus Operator does not fail.
func TestChart_R_I2_MonitoringOnlyWhereItsAPIExists(t *testing.T) {
	t.Parallel()
	chrt := loadChart(t)
	with := render(t, chrt, "with-operator", map[string]any{}, monitoringAPIs)
	require.Len(t, with.monitors, 1)
	require.Len(t, with.rules, 1)
	without := render(t, chrt, "without-operator", map[string]any{}, nil)
	require.Empty(t, without.monitors)
	require.Empty(t, without.rules)
	require.NotEmpty(t, without.deployments)
}

// TestChart_R_I2_SchemaRefusesUnknownKeysAndWrongTypes: values.schema.json
// turns the typos and wrong types that used to be ignored into errors.
func TestChart_R_I2_SchemaRefusesUnknownKeysAndWrongTypes(t *testing.T) {
	t.Parallel()
	chrt := loadChart(t)
	tests := []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"MisspeltTargetKey", map[string]any{"processor": map[string]any{"replica": 2}}, "replica"},
		{"MisspeltTopLevelKey", map[string]any{"procesor": map[string]any{"replicas": 2}}, "procesor"},
		{"ReplicasNotANumber", map[string]any{"processor": map[string]any{"replicas": "two"}}, "replicas"},
		{"UnknownMode", map[string]any{"deploymentMode": "Sharded"}, "deploymentMode"},
		{"PortOutOfRange", map[string]any{"ports": map[string]any{"http": 70000}}, "http"},
		{"ThresholdNotANumber", map[string]any{"prometheusRule": map[string]any{"thresholds": map[string]any{"backlogAgeSeconds": "5m"}}}, "backlogAgeSeconds"},
		{"SharedSecretOfOldReleases", map[string]any{"secret": map[string]any{"stringData": map[string]any{}}}, "stringData"},
		{"NetworkPolicyTypo", map[string]any{"networkPolicy": map[string]any{"compat": map[string]any{"form": []any{}}}}, "form"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := renderValues(t, chrt, tc.values, nil)
			require.Error(t, err)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, _, err := renderValues(t, chrt, map[string]any{"secret": map[string]any{"processor": map[string]any{"existingSecret": "a"}, "create": true}}, nil)
	require.ErrorContains(t, err, "secret.processor.existingSecret: set existingSecret or secret.create, not both")
	// The one Secret of every pod the chart had before each pod got its
	// own (R-K7) is refused by name, not silently ignored.
	_, _, err = renderValues(t, chrt, map[string]any{"secret": map[string]any{"existingSecret": "msgx-secrets"}}, nil)
	require.ErrorContains(t, err, "existingSecret")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
