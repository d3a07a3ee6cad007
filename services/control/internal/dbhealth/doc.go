// Package dbhealth keeps the gRPC health status of the control plane in step
// with its database. Every answer of the control plane comes from
// PostgreSQL, so a control plane that cannot reach it must say NOT_SERVING
// to probes and load balancers instead of accepting calls it can only fail.
package dbhealth
