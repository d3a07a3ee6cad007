package charttest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// servicesOfMode are the msgx targets a deployment mode must run: the
// all-in-one pod runs every service in one process (every target but
// migrate, which the migration Job runs as the schema's owner: R-K7), the
// distributed mode one Deployment per service.
var servicesOfMode = map[string][]string{
	"AllInOne":    {"control,processor,dispatcher,projector,ingest"},
	"Distributed": {"ingest", "processor", "projector", "dispatcher", "control"},
}

// TestChart_R_G3_EveryServiceDeployedWithConfigSecretsProbesResourcesAndMonitor
// renders every shipped values file on a cluster with the Prometheus
// Operator and checks R-G3 for each service the mode runs: a Deployment
// whose msgx container runs that target with a mounted configuration, its
// Secrets, liveness and readiness probes, CPU and memory requests and a
// memory limit, and (unless the values switch monitoring off) a Service
// with the metrics port that a ServiceMonitor scrapes. (That the chart lints and renders in CI is scripts/helm-lint.sh,
// run by make test.)
func TestChart_R_G3_EveryServiceDeployedWithConfigSecretsProbesResourcesAndMonitor(t *testing.T) {
	t.Parallel()
	chrt := loadChart(t)
	for name, file := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := render(t, chrt, name, valuesOf(t, file), monitoringAPIs)
			mode, _ := m.values["deploymentMode"].(string)
			want, ok := servicesOfMode[mode]
			require.True(t, ok, "%s: unknown deploymentMode %q", name, mode)
			byTarget := map[string]*appsv1.Deployment{}
			for _, d := range m.deployments {
				target := containerTarget(d.Spec.Template.Spec.Containers[0])
				require.NotEmpty(t, target, "%s: Deployment %s runs msgx without -target", name, d.Name)
				require.Nil(t, byTarget[target], "%s: two Deployments run -target=%s", name, target)
				byTarget[target] = d
			}
			require.Len(t, byTarget, len(want), "%s: Deployments by target %v, want %v", name, keys(byTarget), want)
			for _, target := range want {
				d := byTarget[target]
				require.NotNil(t, d, "%s: no Deployment runs -target=%s", name, target)
				checkServiceDeployment(t, m, d)
			}
		})
	}
}

// checkServiceDeployment checks one service's Deployment for R-G3.
func checkServiceDeployment(t *testing.T, m *manifests, d *appsv1.Deployment) {
	t.Helper()
	where := m.name + ": " + d.Name
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]

	configMaps := map[string]bool{}
	for _, cm := range m.configMaps {
		configMaps[cm.Name] = true
	}
	var config, secret bool
	for _, v := range spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			require.True(t, configMaps[v.ConfigMap.Name], "%s mounts the ConfigMap %s the chart does not render", where, v.ConfigMap.Name)
			config = config || mounted(c, v.Name)
		case v.Secret != nil:
			// Which Secret, and that it exists, is checkPods' and the
			// R-H9 tests' concern.
			secret = secret || mounted(c, v.Name)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					secret = secret || mounted(c, v.Name)
				}
			}
		}
	}
	require.True(t, config, "%s: no configuration mounted into msgx", where)
	require.True(t, secret, "%s: no Secret mounted into msgx", where)
	require.True(t, hasConfigFlag(c), "%s: msgx is not pointed at its configuration file: %v", where, c.Args)

	require.NotNil(t, c.LivenessProbe, "%s: no liveness probe", where)
	require.NotNil(t, c.ReadinessProbe, "%s: no readiness probe", where)
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q, ok := c.Resources.Requests[r]
		require.True(t, ok && !q.IsZero(), "%s: no %s request", where, r)
	}
	q, ok := c.Resources.Limits[corev1.ResourceMemory]
	require.True(t, ok && !q.IsZero(), "%s: no memory limit", where)

	if enabled, _ := m.values.PathValue("serviceMonitor.enabled"); enabled != true {
		// Monitoring switched off by the values (a trial without the
		// Prometheus Operator): nothing to scrape with.
		require.Empty(t, m.monitors, "%s: ServiceMonitor rendered although switched off", where)
		return
	}
	var scraped bool
	for _, svc := range m.services {
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			continue
		}
		for _, sm := range m.monitors {
			sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
			require.NoError(t, err)
			if sel.Matches(labels.Set(svc.Labels)) && len(sm.Spec.Endpoints) > 0 && serviceHasPort(svc, sm.Spec.Endpoints[0].Port) {
				scraped = true
			}
		}
	}
	require.True(t, scraped, "%s: no ServiceMonitor scrapes a Service of its pods", where)
}

// containerTarget is the value of msgx's -target flag.
func containerTarget(c corev1.Container) string {
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		if v, ok := strings.CutPrefix(a, "-target="); ok {
			return v
		}
	}
	return ""
}

// hasConfigFlag reports whether msgx is given a configuration file.
func hasConfigFlag(c corev1.Container) bool {
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		if v, ok := strings.CutPrefix(a, "-config.file="); ok && v != "" {
			return true
		}
	}
	return false
}

// mounted reports whether the container mounts the volume.
func mounted(c corev1.Container, volume string) bool {
	for _, vm := range c.VolumeMounts {
		if vm.Name == volume {
			return true
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
