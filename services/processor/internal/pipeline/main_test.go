package pipeline

import (
	"flag"
	"os"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

// minParallel is the parallelism these tests run with unless -test.parallel
// is given: every test waits on its own PostgreSQL database (creation,
// migration, round trips), not on the CPU, so the GOMAXPROCS default leaves
// the machine idle and the package slow on small CI machines.
const minParallel = 8

func TestMain(m *testing.M) {
	if url := os.Getenv(executorChildEnv); url != "" {
		os.Exit(runExecutorChild(url)) // this binary is a processor process of a test (killed_test.go)
	}
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if p := flag.Lookup("test.parallel"); p != nil && !explicit {
		if n, err := strconv.Atoi(p.Value.String()); err == nil && n < minParallel {
			_ = p.Value.Set(strconv.Itoa(minParallel))
		}
	}
	goleak.VerifyTestMain(m)
}
