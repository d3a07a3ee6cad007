package oneway

import "strings"

// T is used by a.go.
type T struct{ N int }

// Upper uses nothing of the package.
func Upper(s string) string { return strings.ToUpper(s) }
