package charttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	corev1 "k8s.io/api/core/v1"
)

// certManagerAPI is what a cluster with cert-manager serves.
const certManagerAPI = "cert-manager.io/v1"

// buildMsgx builds the msgx binary of the tree into a directory of the
// test: the configuration the chart renders is judged by the code that
// will read it.
func buildMsgx(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "msgx")
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "./services/cmd/msgx")
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "building msgx: %s", out)
	return bin
}

// writePEM writes a self-signed CA certificate for name and its key under
// dir as <base>.crt and <base>.key.
func writePEM(t *testing.T, dir, base, name string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, base+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, base+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
}

// placeholders writes what the pods find mounted, as the site's Secrets
// would hold it in the forms production mode accepts: each pod's own
// Secret with only its keys (podSecretKeys) and its own accounts
// (podAccount; verified TLS to PostgreSQL, rediss://), the control plane's
// token file with a line per service, each service's token, the compat
// tokens, and certificates. It returns a directory standing in for
// /etc/msgx/secrets per target, and the one for /etc/msgx/credentials.
func placeholders(t *testing.T) (secrets map[string]string, credentials string) {
	t.Helper()
	secrets, credentials = map[string]string{}, t.TempDir()
	token := func(who string) string { return who + "-" + strings.Repeat("0123456789abcdef", 2) }
	for target, keys := range podSecretKeys {
		dir := t.TempDir()
		for _, key := range keys {
			require.NoError(t, os.WriteFile(filepath.Join(dir, key), []byte(placeholderSecret(key, podAccount[target])+"\n"), 0o600))
		}
		secrets[target] = dir
	}
	var lines []string
	for p, leases := range map[string]string{"all-in-one": "*", "ingest": "ingest-scanner", "processor": "processor", "dispatcher": "dispatcher/*"} {
		lines = append(lines, p+":service="+leases+":"+token(p))
	}
	lines = append(lines, "oncall:read:"+token("oncall"))
	for name, content := range map[string]string{
		"control-tokens": strings.Join(lines, "\n"),
		"lease-token":    token("ingest"),
		"compat-tokens":  token("sender"),
	} {
		require.NoError(t, os.WriteFile(filepath.Join(credentials, name), []byte(content+"\n"), 0o600))
	}
	writePEM(t, credentials, "control-tls", "msgx-msgexchange-control.msgx.svc")
	writePEM(t, credentials, "lease-tls", "service")
	for _, ca := range []string{"control-client-ca.crt", "lease-ca.crt"} {
		b, err := os.ReadFile(filepath.Join(credentials, "control-tls.crt"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(credentials, ca), b, 0o600))
	}
	return secrets, credentials
}

// targetOf is the -target flag of a pod's msgx container.
func targetOf(t *testing.T, spec corev1.PodSpec) string {
	t.Helper()
	for _, a := range spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "-target="); ok {
			return v
		}
	}
	t.Fatalf("no -target flag in %v", spec.Containers[0].Args)
	return ""
}

// TestChart_R_K1_R_K7_EveryRenderingPassesProductionVerifyConfig: the defaults
// and every ci/*-values.yaml, on a cluster with and without cert-manager,
// render configurations that msgx accepts in production mode (the
// default mode; nothing in the chart says development) for each
// Deployment's and the migration Job's target and flags (-admin.addr
// included, R-N2), with the site's Secrets in the forms production mode
// accepts — each pod with only the keys of its own Secret (R-K7), so a
// configuration that reads another pod's credential fails.
func TestChart_R_K1_R_K7_EveryRenderingPassesProductionVerifyConfig(t *testing.T) {
	t.Parallel()
	chrt := loadChart(t)
	msgx := buildMsgx(t)
	secrets, credentials := placeholders(t)
	for name, file := range valueSets(t) {
		for _, apis := range [][]string{monitoringAPIs, append([]string{certManagerAPI}, monitoringAPIs...)} {
			label := name
			if len(apis) > len(monitoringAPIs) {
				label += "+cert-manager"
			}
			t.Run(label, func(t *testing.T) {
				t.Parallel()
				m := render(t, chrt, label, valuesOf(t, file), apis)
				configs := map[string]string{}
				for _, cm := range m.configMaps {
					configs[cm.Name] = cm.Data["config.yaml"]
				}
				var pods []corev1.PodTemplateSpec
				for _, d := range m.deployments {
					pods = append(pods, d.Spec.Template)
				}
				for _, j := range m.jobs {
					pods = append(pods, j.Spec.Template)
				}
				require.NotEmpty(t, pods)
				for _, pod := range pods {
					component := pod.Labels["app.kubernetes.io/component"]
					var cm string
					for _, v := range pod.Spec.Volumes {
						if v.ConfigMap != nil {
							cm = v.ConfigMap.Name
						}
					}
					cfg, ok := configs[cm]
					require.True(t, ok, "%s: %s mounts no rendered ConfigMap", label, component)
					require.NotContains(t, cfg, "mode: development", "%s: %s", label, component)
					own, ok := secrets[component]
					require.True(t, ok, "%s: no Secret keys known for %s", label, component)
					// Only the pod's own Secret's keys exist: a
					// reference to any other refuses to start.
					cfg = strings.NewReplacer("/etc/msgx/secrets/", own+"/", "/etc/msgx/credentials/", credentials+"/").Replace(cfg)
					path := filepath.Join(t.TempDir(), "config.yaml")
					require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
					// The container's own flags (-admin.addr among them), the
					// config file at its place here.
					args := []string{"-target=" + targetOf(t, pod.Spec)}
					for _, a := range pod.Spec.Containers[0].Args {
						if !strings.HasPrefix(a, "-target=") && !strings.HasPrefix(a, "-config.file=") {
							args = append(args, a)
						}
					}
					args = append(args, "-config.file="+path, "-config.expand-env", "-verify-config")
					out, err := exec.Command(msgx, args...).CombinedOutput()
					require.NoError(t, err, "%s: %s: msgx refuses its configuration in production mode:\n%s", label, component, out)
				}
			})
		}
	}
}

// TestChart_R_K1_DefaultsAreClosed: with the defaults the control plane
// serves TLS (from <fullname>-control-tls: a cert-manager Certificate
// where that API exists, the site's Secret otherwise), every pod has an
// ingress policy admitting only the release's pods on port http, an
// egress policy exists, and the compat entry is off.
func TestChart_R_K1_DefaultsAreClosed(t *testing.T) {
	t.Parallel()
	chrt := loadChart(t)
	for _, mode := range []string{"AllInOne", "Distributed"} {
		m := render(t, chrt, mode, map[string]any{"deploymentMode": mode}, nil)
		cfg := msgxConfig(t, m)
		require.Equal(t, credentialsDir+"/control-tls.crt", valueString(t, cfg, "control.tls.cert_file"), mode)
		kafkaTLS, err := cfg.PathValue("kafka.tls.enabled")
		require.NoError(t, err)
		require.Equal(t, true, kafkaTLS, mode)
		require.Equal(t, "SCRAM-SHA-512", pathString(cfg, "kafka.sasl.mechanism"), mode)
		_, err = cfg.PathValue("ingest.compat.addr")
		require.Error(t, err, "%s: the compat entry is off by default", mode)
		egress := 0
		covered := map[string]bool{}
		for _, np := range m.netpols {
			for _, pt := range np.Spec.PolicyTypes {
				if pt == "Egress" {
					egress++
					require.Empty(t, np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"], "one egress policy for every pod")
				}
			}
			for _, rule := range np.Spec.Ingress {
				require.NotEmpty(t, rule.From, "%s: %s: an ingress rule without peers admits every source", mode, np.Name)
				for _, peer := range rule.From {
					require.Nil(t, peer.IPBlock, "%s: %s: no network is admitted by default", mode, np.Name)
					require.Nil(t, peer.NamespaceSelector, "%s: %s: no namespace is admitted by default", mode, np.Name)
				}
			}
			covered[np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"]] = true
		}
		require.Equal(t, 1, egress, mode)
		for _, d := range m.deployments {
			require.True(t, covered[d.Spec.Template.Labels["app.kubernetes.io/component"]], "%s: %s has no ingress policy", mode, d.Name)
		}

		out, _, err := renderValues(t, chrt, map[string]any{"deploymentMode": mode}, []string{certManagerAPI})
		require.NoError(t, err)
		var kinds []string
		for _, doc := range releaseutil.SplitManifests(out["msgexchange/templates/control-certificate.yaml"]) {
			obj, err := chartutil.ReadValues([]byte(doc))
			require.NoError(t, err)
			kind := pathString(obj, "kind")
			kinds = append(kinds, kind)
			if kind == "Certificate" {
				require.Equal(t, "msgx-msgexchange-control-tls", pathString(obj, "spec.secretName"))
				names, err := obj.PathValue("spec.dnsNames")
				require.NoError(t, err)
				require.Contains(t, names, valueString(t, cfg, "lease.tls.server_name"), "the certificate carries the name the services verify")
			}
		}
		require.ElementsMatch(t, []string{"Issuer", "Certificate"}, kinds, mode)
		without, _, err := renderValues(t, chrt, map[string]any{"deploymentMode": mode}, nil)
		require.NoError(t, err)
		require.Empty(t, strings.TrimSpace(stripComments(without["msgexchange/templates/control-certificate.yaml"])), "%s: no Certificate without the cert-manager API", mode)
	}
}

// TestChart_R_N5_TwoRendersAreByteIdentical: nothing is generated at
// render time by default, so two renders of the same values, with every
// shipped values file that does not opt into generated tokens, are
// byte-identical; GitOps tools (Argo CD, Flux) see no change between
// syncs. The defaults create no Secret at all.
func TestChart_R_N5_TwoRendersAreByteIdentical(t *testing.T) {
	t.Parallel()
	chrt := loadChart(t)
	for name, file := range valueSets(t) {
		vals := valuesOf(t, file)
		if gen, _ := chartutil.Values(vals).PathValue("controlPlane.auth.generate"); gen == true {
			continue // opted into tokens generated at render time (ci/allinone)
		}
		for _, apis := range [][]string{nil, append([]string{certManagerAPI}, monitoringAPIs...)} {
			first, _, err := renderValues(t, chrt, vals, apis)
			require.NoError(t, err, name)
			second, _, err := renderValues(t, chrt, valuesOf(t, file), apis)
			require.NoError(t, err, name)
			require.Equal(t, first, second, "%s: two renders differ", name)
		}
	}
	m := render(t, chrt, "default", map[string]any{}, nil)
	require.Empty(t, m.secrets, "the defaults create no Secret: the site's existing Secrets are mounted")
}

// TestChart_R_N5_FirstInstallInOneStep: with secret.create the migration
// Job's Secret is a pre-install hook weighted before the Job's ConfigMap
// and Job, so the Job finds it on a first install; without it the Job
// mounts the existing Secret, which exists before the install.
func TestChart_R_N5_FirstInstallInOneStep(t *testing.T) {
	t.Parallel()
	m := render(t, loadChart(t), "create", map[string]any{"secret": map[string]any{"create": true, "migrate": map[string]any{"stringData": map[string]any{"MSGX_POSTGRES_URL": "${file:/dev/null}"}}}}, nil)
	weight := map[string]string{}
	for _, s := range m.secrets {
		if s.Name == "msgx-msgexchange-migrate-secrets" {
			require.Equal(t, "pre-install,pre-upgrade", s.Annotations["helm.sh/hook"])
			weight["secret"] = s.Annotations["helm.sh/hook-weight"]
		}
	}
	require.Len(t, m.jobs, 1)
	job := m.jobs[0]
	require.Equal(t, "pre-install,pre-upgrade", job.Annotations["helm.sh/hook"])
	weight["job"] = job.Annotations["helm.sh/hook-weight"]
	for _, cm := range m.configMaps {
		if cm.Name == "msgx-msgexchange-migrate" {
			weight["configmap"] = cm.Annotations["helm.sh/hook-weight"]
		}
	}
	require.Equal(t, map[string]string{"secret": "-20", "configmap": "-10", "job": "0"}, weight, "the Secret comes first among the hooks")
	mountsIt := false
	for _, v := range job.Spec.Template.Spec.Volumes {
		mountsIt = mountsIt || (v.Secret != nil && v.Secret.SecretName == "msgx-msgexchange-migrate-secrets")
	}
	require.True(t, mountsIt)
}
