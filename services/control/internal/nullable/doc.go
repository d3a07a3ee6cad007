// Package nullable converts the nullable columns the control plane scans
// from PostgreSQL into protobuf fields. It exists so that every control-plane
// service maps NULL the same way: an absent timestamp, an empty string.
package nullable
