// Package charttest holds the Helm chart's Go test (R-I2): it renders
// helm/msgexchange with the Helm library at the version scripts/helm-lint.sh
// builds, with the default values and every ci/*-values.yaml, decodes each
// manifest strictly into the Kubernetes and Prometheus Operator API types
// (an unknown or duplicated field fails), and checks what YAML linting
// cannot: selectors that match their pods, standbys and rolling updates for
// the single-active roles, GOMEMLIMIT against the memory limits, monitoring
// objects only where their API exists, alerts on metrics that exist, and a
// schema that refuses unknown keys and wrong types. For the control plane
// (R-H9) it checks that each pod gets only its own credentials (the token
// file and server key on the control plane, one service token on each
// lease holder), that the generated tokens are random and survive an
// upgrade (lookup against a fake cluster), and that no ConfigMap and no
// shipped values file holds a token or password; for the compat entry
// (R-H10) its own port, Service and NetworkPolicy rule. It also holds
// docs/runbook.md to the chart and the code: one section per alert of the
// rendered PrometheusRule (and none for an alert that is gone), each
// alert's runbook_url on its section, the section's expression, threshold
// and severity as rendered, every msgx_ metric it names registered in the
// code, and every msgxctl command and flag it gives accepted by the built
// msgxctl. It has no non-test code.
package charttest
