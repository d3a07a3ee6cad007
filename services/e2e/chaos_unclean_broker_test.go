package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"msgexchange/libs/testutil"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// faultUncleanBroker is a broker that loses records it acknowledged (R-M1;
// what an SRE who lived through an unclean leader election wants proven):
// staged as the broker's data directory, copied while the broker is
// paused, put back after a crash. With the stream held and everything
// delivered, the copy is taken; more rows then run through — registered,
// applied, projected, delivered to msg, schd and flight-state, marked —
// and the broker crashes and comes back from the copy: every record since
// is gone, its offsets are handed out again, and the outbox rows of the
// lost records are SENT. The services keep running. The operator then
// follows the runbook ("The broker lost acknowledged records"): each
// Kafka target's rows sent since the loss began are sent again (msgxctl
// outbox resend, here its RPC). The run must end as the run without faults
// does: msg without a gap or a regression, every event once, Redis equal
// to PostgreSQL, every row marked.
const faultUncleanBroker = "unclean-broker"

// uncleanLostRows is how many rows run through between the copy and the
// crash.
const uncleanLostRows = 12

// uncleanBroker stages the loss and returns how long processing took to
// resume after the resend.
func (e *chaosEnv) uncleanBroker(problem func(string, ...any)) time.Duration {
	if e.freezeFeed == nil {
		problem("the kind needs a held stream (the chaos workload's feed)")
		return 0
	}
	release := e.freezeFeed()
	defer release()
	// Everything delivered so far is in the copy and was sent before it.
	if settled, state := chaosSettle(e.stack, 60*time.Second); !settled {
		problem("not settled with the feed held before the copy: %s", state)
		return 0
	}
	copied := e.t.TempDir()
	lossBegan := time.Now()
	if err := e.broker.Pause(); err != nil {
		problem("pausing the broker: %v", err)
		return 0
	}
	out, err := exec.Command("cp", "-a", e.broker.DataDir()+"/.", copied).CombinedOutput()
	if rerr := e.broker.Resume(); rerr != nil {
		problem("resuming the broker: %v", rerr)
		return 0
	}
	if err != nil {
		problem("copying the broker's data: %v: %s", err, out)
		return 0
	}

	// The rows whose records the broker loses: delivered and marked.
	e.feedOnly(uncleanLostRows)
	before := e.markedRows()
	if !e.poll(30*time.Second, func() bool { return e.markedRows() >= before+uncleanLostRows }) {
		problem("fewer than %d rows marked in 30s after the copy", uncleanLostRows)
	}
	e.feedOnly(0)
	if settled, state := chaosSettle(e.stack, 60*time.Second); !settled {
		problem("not settled with the feed held after the copy: %s", state)
	}
	sent := map[string]int{}
	rows, err := e.pg.Query(context.Background(), `SELECT target, count(*) FROM outbox WHERE state = 'SENT' AND sent_at >= $1 GROUP BY target`, lossBegan)
	if err == nil {
		for rows.Next() {
			var target string
			var n int
			if err = rows.Scan(&target, &n); err == nil {
				sent[target] = n
			}
		}
		rows.Close()
	}
	if err != nil || sent["msg"] == 0 {
		problem("no msg record delivered after the copy (%v, %v): the loss would lose nothing", sent, err)
	}

	// The broker loses them: it crashes and comes back from the copy.
	if err := e.broker.Crash(); err != nil {
		problem("crashing the broker: %v", err)
		return 0
	}
	if err := os.RemoveAll(e.broker.DataDir()); err != nil {
		problem("removing the broker's data: %v", err)
		return 0
	}
	if out, err := exec.Command("cp", "-a", copied+"/.", e.broker.DataDir()).CombinedOutput(); err != nil {
		problem("restoring the broker's data: %v: %s", err, out)
		return 0
	}
	if err := e.broker.Start(); err != nil {
		problem("restarting the broker: %v", err)
		return 0
	}
	e.t.Logf("chaos: the broker lost what it acknowledged after %s: outbox rows sent since, by target: %v",
		lossBegan.Format(time.RFC3339Nano), sent)

	// The runbook: each Kafka target's window again, before the AODB's
	// next rows (the stream is still held).
	resent, err := e.resendSince(lossBegan)
	if err != nil {
		problem("re-sending the lost window: %v", err)
		return 0
	}
	for target, n := range sent {
		if target != "mailbox" && target != "coutmsgs" && resent[target] != n {
			problem("%s: %d rows re-sent, %d were sent after the copy", target, resent[target], n)
		}
	}
	release()
	recovery := e.awaitRecovery(problem)
	// The loss is reported where the runbook says: by the processor (its
	// consumers' positions lie past the partitions' new ends) and by the
	// dispatcher's Kafka targets (their check every LossCheckInterval).
	for _, role := range []string{"processor", "dispatcher"} {
		if !e.poll(relayLossCheck+15*time.Second, func() bool { return e.logsOf(role, "alert=broker-lost-records") }) {
			problem("no %s reported the loss (alert=broker-lost-records) within %s", role, relayLossCheck+15*time.Second)
		}
	}
	// The dispatcher's remedy names a window that covers the loss: the
	// operator could have run it as logged.
	for _, m := range remedyRe.FindAllStringSubmatch(e.logText("dispatcher"), -1) {
		since, err := time.Parse(time.RFC3339, m[2])
		switch {
		case err != nil:
			problem("the dispatcher's remedy for %s names no time: %q", m[1], m[0])
		case since.After(lossBegan):
			problem("the dispatcher's remedy for %s re-sends from %s, after the loss began at %s", m[1], m[2], lossBegan.Format(time.RFC3339Nano))
		default:
			e.t.Logf("chaos: the dispatcher's remedy: %s", m[0])
		}
	}
	return recovery
}

// remedyRe matches the remedy of a dispatcher's loss report.
var remedyRe = regexp.MustCompile(`remedy="msgxctl outbox resend --target (\S+) --since (\S+)"`)

// relayLossCheck is the dispatcher's relay.LossCheckInterval.
const relayLossCheck = 30 * time.Second

// logsOf reports whether an instance of role logged a line holding text.
func (e *chaosEnv) logsOf(role, text string) bool {
	return strings.Contains(e.logText(role), text)
}

// logText returns what every instance of role logged so far.
func (e *chaosEnv) logText(role string) string {
	entries, err := os.ReadDir(e.logDir)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, de := range entries {
		if strings.HasPrefix(de.Name(), role) {
			if text, err := os.ReadFile(filepath.Join(e.logDir, de.Name())); err == nil {
				b.Write(text)
			}
		}
	}
	return b.String()
}

// resendSince sends every Kafka target's rows sent since `since` again,
// as the runbook's operator does, and returns how many each moved.
func (e *chaosEnv) resendSince(since time.Time) (map[string]int, error) {
	conn, err := grpc.NewClient(e.controlAddr, e.controlCreds())
	if err != nil {
		return nil, fmt.Errorf("dialling the control plane: %w", err)
	}
	defer conn.Close()
	cl := controlv1.NewAdminServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]int{}
	for _, target := range []string{"flight-state", "msg", "schd", "projection-control"} {
		req := &controlv1.ResendOutboxRequest{Target: target, SentSince: timestamppb.New(since),
			Operator: "chaos", Reason: "R-M1 chaos run: the broker lost what it acknowledged"}
		for {
			var resp *controlv1.ResendOutboxResponse
			err := retry(ctx, func() error {
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				var err error
				resp, err = cl.ResendOutbox(cctx, req)
				return err
			})
			if err != nil {
				return out, fmt.Errorf("%s: %w", target, err)
			}
			out[target] += int(resp.GetResent())
			if !resp.GetMore() {
				break
			}
			req.SentUntil = resp.GetSentUntil()
		}
	}
	return out, nil
}

// TestChaos_R_M1_BrokerLosesAcknowledgedRecords: the broker loses records
// it acknowledged mid-stream (faultUncleanBroker), and the operator sends
// the lost window again. Every service keeps running. The run must end as
// the run without faults does: msg in order per FLID with every event,
// schd and Redis equal to PostgreSQL, every row marked.
func TestChaos_R_M1_BrokerLosesAcknowledgedRecords(t *testing.T) {
	testutil.Integration(t)
	p := chaosParams{Messages: 160, Faults: 1, Seed: chaosDefaultSeed}
	sched := []chaosFault{{Kind: faultUncleanBroker, At: 60}}
	runChaos(t, p, sched, fmt.Sprintf("go test -count=1 -run '^%s$' ./e2e/", t.Name()))
}
