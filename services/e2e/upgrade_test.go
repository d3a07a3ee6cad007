//go:build upgrade

// The rolling-upgrade test needs the previous release built from git, so it
// is compiled only by `make upgrade-test` (-tags upgrade), which builds it;
// `make test` neither builds nor skips it.

package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// flagRe matches a flag in the configuration reference: `-name`.
var flagRe = regexp.MustCompile("`(-[a-z][a-z0-9.-]*)`")

// flagsOf returns the flags bin knows, from its configuration reference
// (-doc.configuration): an earlier release lacks the flags added since.
func flagsOf(t *testing.T, bin string) map[string]bool {
	t.Helper()
	out, err := exec.Command(bin, "-doc.configuration").Output()
	require.NoError(t, err)
	known := map[string]bool{}
	for _, m := range flagRe.FindAllStringSubmatch(string(out), -1) {
		known[m[1]] = true
	}
	require.NotEmpty(t, known)
	return known
}

// upgradeTargets are replaced in this order: the control plane first (the
// lease clients reconnect), then each service, the new instance started
// beside the old one (a standby of the single-active roles) before the old
// one is stopped, as a Kubernetes rolling update does.
var upgradeTargets = []string{"control", "processor", "dispatcher", "projector", "ingest"}

// TestUpgrade_R_M4_RollingReplacementUnderLoad: the previous release's
// binary (MSGX_UPGRADE_OLD_BIN, built by `make upgrade-test` from an
// earlier commit) migrates an empty database to its schema and runs every
// service while the chaos workload streams in; a third of the way, this
// tree's binary migrates the schema (expand: the old code keeps running on
// it), then each old instance is replaced by a new one under load. The run
// must end as the reference run of this tree ends without any of that:
// nothing lost, duplicated or out of order, every row marked (R-M4). It
// prints the chaos summary line.
func TestUpgrade_R_M4_RollingReplacementUnderLoad(t *testing.T) {
	oldBin, from := os.Getenv("MSGX_UPGRADE_OLD_BIN"), os.Getenv("MSGX_UPGRADE_FROM")
	require.NotEmpty(t, oldBin, "MSGX_UPGRADE_OLD_BIN: run by `make upgrade-test`, which builds the earlier release's msgx")
	p := chaosParamsFromEnv(t)
	w := buildChaosWorkload(rand.New(rand.NewPCG(uint64(p.Seed), 1)), p.Messages)
	var ref *chaosOutcome
	var refProblems []string
	t.Run("reference", func(t *testing.T) { ref, refProblems = runChaosReference(t, w, nil) })
	if ref == nil {
		t.Fatal("the reference run failed")
	}

	migrateWith := func(bin, pgURL string) {
		out, err := exec.Command(bin, "-mode=development", "-target=migrate", "-log.format=text", "-postgres.url="+pgURL).CombinedOutput()
		require.NoError(t, err, "migrating with %s:\n%s", bin, tail(string(out), 4000))
	}
	s := newStackMigrated(t, func(pgURL string) { migrateWith(oldBin, pgURL) })
	s.bins = map[string]string{}
	for _, target := range upgradeTargets {
		s.bins[target+"-old"] = oldBin
	}
	known := flagsOf(t, oldBin)
	for _, target := range upgradeTargets {
		var flags []string
		for _, f := range chaosFlags[target] {
			if name, _, _ := strings.Cut(f, "="); known[name] {
				flags = append(flags, f)
			} else {
				t.Logf("upgrade: %s of the earlier release has no flag %s; left at its default", target, name)
			}
		}
		s.startAs(target+"-old", target, flags...)
	}
	runCtx, cancel := s.untilBroken(context.Background(), chaosStreamBudget+time.Duration(p.Messages)*100*time.Millisecond)
	defer cancel()
	began := time.Now()
	feeder := startFeeder(runCtx, s, w, 50)
	marked := func() int {
		var n int
		require.NoError(t, s.mailbox.QueryRow(`SELECT COUNT(*) FROM CMINMSGS WHERE CMINMSGS_DATE_PROCESSED IS NOT NULL`).Scan(&n))
		return n
	}
	progress := func(what string, rows int) {
		target := min(marked()+rows, len(w.Msgs))
		waitFor(t, 2*time.Minute, what, func() (bool, error) { return marked() >= target, nil })
	}
	progress("the old release processing a third of the stream", len(w.Msgs)/3)
	migrateWith(msgxBin, s.pgURL) // expand while the old release runs
	progress("the old release processing on the new schema", 20)
	var steps []string
	for _, target := range upgradeTargets {
		at := time.Since(began).Round(100 * time.Millisecond)
		if target == "control" {
			// One control plane per stack, on its reserved address.
			s.stop(target + "-old")
			s.startAs(target, target, chaosFlags[target]...)
		} else {
			s.startAs(target, target, chaosFlags[target]...)
			s.stop(target + "-old")
		}
		steps = append(steps, fmt.Sprintf("%s@%s", target, at))
		progress("progress after replacing "+target, 10)
	}
	ids, err := feeder.wait()
	require.NoError(t, err)
	settled, state := chaosSettle(s, chaosSettleBudget+time.Duration(p.Messages)*20*time.Millisecond)
	require.True(t, settled, "the run did not settle: %s", state)

	v := newChaosVerdict()
	for _, pr := range refProblems {
		v.Other = append(v.Other, "reference run: "+pr)
	}
	ctx, cancelCheck := context.WithTimeout(context.Background(), time.Minute)
	defer cancelCheck()
	got, err := collectOutcome(ctx, s, ids)
	require.NoError(t, err)
	compareOutcome(w, ref, got, v)
	v.locateLostEvents(ctx, s)
	fmt.Printf("upgrade from %s: %d messages, replaced %s, %d lost, %d duplicated effects, %d out of order, %d redeliveries\n",
		from, len(ids), strings.Join(steps, " "), len(v.Lost), len(v.Duplicated), len(v.OutOfOrder), v.Redeliveries)
	if v.failed() {
		t.Errorf("upgrade run failed:\n%s", v.report(40))
	}
}
