// Package controlv1 is the generated Go code of the gRPC contract
// msgx.control.v1 (proto/msgx/control/v1): the operators' control plane of
// msgexchange. The contract lives in its own module so that the control
// service and its clients (msgxctl, other tools) share one definition without
// importing each other. Regenerate with scripts/proto-gen.sh; only this file
// is written by hand.
package controlv1
