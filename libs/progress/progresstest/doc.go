// Package progresstest reads the loop progress metrics that
// progress.RegisterMetrics exports (R-L8), so that the tests of every
// service whose loops report to a tracker check what an operator's
// dashboard sees the same way. Import it from tests only.
package progresstest
