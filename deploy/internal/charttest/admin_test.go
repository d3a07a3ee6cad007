package charttest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// adminArgs returns the -admin.addr flags of a pod's msgx container.
func adminArgs(spec corev1.PodSpec) []string {
	var out []string
	for _, a := range spec.Containers[0].Args {
		if strings.HasPrefix(a, "-admin.addr") {
			out = append(out, a)
		}
	}
	return out
}

// TestChart_R_N2_AdminPortOffByDefaultAndOnLoopbackWhenOn: by default no
// pod serves the admin port (pprof, the log level); with admin.enabled
// every Deployment's container listens on 127.0.0.1:<admin.port> — the
// one address production mode accepts, reached with kubectl
// port-forward — while the migration Job does not, and no container port
// or Service port exposes it.
func TestChart_R_N2_AdminPortOffByDefaultAndOnLoopbackWhenOn(t *testing.T) {
	t.Parallel()
	chrt := loadChart(t)
	for _, mode := range []string{"AllInOne", "Distributed"} {
		m := render(t, chrt, mode, map[string]any{"deploymentMode": mode}, nil)
		require.NotEmpty(t, m.deployments)
		for _, d := range m.deployments {
			require.Empty(t, adminArgs(d.Spec.Template.Spec), "%s: %s serves the admin port by default", mode, d.Name)
		}
		for _, j := range m.jobs {
			require.Empty(t, adminArgs(j.Spec.Template.Spec), "%s: %s", mode, j.Name)
		}

		on := map[string]any{"deploymentMode": mode, "admin": map[string]any{"enabled": true, "port": 7070}}
		m = render(t, chrt, mode+"+admin", on, nil)
		for _, d := range m.deployments {
			spec := d.Spec.Template.Spec
			require.Equal(t, []string{"-admin.addr=127.0.0.1:7070"}, adminArgs(spec), "%s: %s", mode, d.Name)
			for _, p := range spec.Containers[0].Ports {
				require.NotEqual(t, int32(7070), p.ContainerPort, "%s: %s: the admin port is not a container port", mode, d.Name)
			}
		}
		require.NotEmpty(t, m.jobs)
		for _, j := range m.jobs {
			require.Empty(t, adminArgs(j.Spec.Template.Spec), "%s: the migration Job serves no admin port", mode)
		}
		for _, svc := range m.services {
			for _, p := range svc.Spec.Ports {
				require.NotEqual(t, int32(7070), p.Port, "%s: %s", mode, svc.Name)
				require.NotEqual(t, int32(7070), p.TargetPort.IntVal, "%s: %s", mode, svc.Name)
			}
		}
	}
}
