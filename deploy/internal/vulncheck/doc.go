// Package vulncheck holds the test that the vulnerability scan of
// scripts/vuln.sh (`make vuln`, part of `make test`, R-K8) can fail: it
// runs the script against a database holding one made-up entry for a
// module and symbol the project uses, and requires the scan to fail naming
// that entry. The real scan, against the pinned copy of the Go
// vulnerability database, is the script's run in `make test`. It has no
// non-test code.
package vulncheck
