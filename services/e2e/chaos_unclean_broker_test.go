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
	// Everything delivered so far is in the copy and was sent before it.
	release, ok := e.holdSettled(problem)
	if !ok {
		return 0
	}
	defer release()
	lossBegan := time.Now()
	copied, ok := e.copyBroker(problem)
	if !ok {
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
	if !e.restoreBroker(copied, problem) {
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

// holdSettled holds the workload's feed and waits until everything
// inserted is processed, delivered and marked: the moment a broker's copy
// is taken at. It returns the release of the feed, which acts once.
func (e *chaosEnv) holdSettled(problem func(string, ...any)) (release func(), ok bool) {
	if e.freezeFeed == nil {
		problem("the kind needs a held stream (the chaos workload's feed)")
		return nil, false
	}
	release = e.freezeFeed()
	if settled, state := chaosSettle(e.stack, 60*time.Second); !settled {
		problem("not settled with the feed held before the copy: %s", state)
		release()
		return nil, false
	}
	return release, true
}

// copyBroker copies the broker's data directory while the broker is
// paused, so that the copy is one moment of it.
func (e *chaosEnv) copyBroker(problem func(string, ...any)) (dir string, ok bool) {
	dir = e.t.TempDir()
	if err := e.broker.Pause(); err != nil {
		problem("pausing the broker: %v", err)
		return "", false
	}
	out, err := exec.Command("cp", "-a", e.broker.DataDir()+"/.", dir).CombinedOutput()
	if rerr := e.broker.Resume(); rerr != nil {
		problem("resuming the broker: %v", rerr)
		return "", false
	}
	if err != nil {
		problem("copying the broker's data: %v: %s", err, out)
		return "", false
	}
	return dir, true
}

// restoreBroker crashes the broker and starts it again from the copy in
// dir: every record acknowledged since the copy is lost.
func (e *chaosEnv) restoreBroker(dir string, problem func(string, ...any)) bool {
	if err := e.broker.Crash(); err != nil {
		problem("crashing the broker: %v", err)
		return false
	}
	if err := os.RemoveAll(e.broker.DataDir()); err != nil {
		problem("removing the broker's data: %v", err)
		return false
	}
	if out, err := exec.Command("cp", "-a", dir+"/.", e.broker.DataDir()).CombinedOutput(); err != nil {
		problem("restoring the broker's data: %v: %s", err, out)
		return false
	}
	if err := e.broker.Start(); err != nil {
		problem("restarting the broker: %v", err)
		return false
	}
	return true
}

// faultUncleanInbox is a broker that loses inbox records of messages no
// processor registered (R-M1): with the stream held and settled, every
// processor instance is killed (SIGKILL) and the broker's data copied;
// a few rows then come in and ingest publishes them; the broker crashes
// and comes back from the copy, and the processors start again. No record
// of any other topic is lost, so there is nothing to re-send. The
// processors are killed rather than paused: a paused one would find the
// records in the answer to a fetch it sent before the pause, waiting in
// its socket, and register them after all. Ingest must
// find the loss and publish those rows again before any later row, so
// that no later message runs before them; with the harness's five-second
// republish their own republish would hide a late finding, so the kind's
// test runs ingest with the production ten minutes.
const faultUncleanInbox = "unclean-inbox"

// uncleanInboxRows is how many rows ingest publishes after the copy.
const uncleanInboxRows = 4

// uncleanInbox stages the loss of unregistered inbox records and returns
// how long processing took to resume after the stream was released.
func (e *chaosEnv) uncleanInbox(problem func(string, ...any)) time.Duration {
	release, ok := e.holdSettled(problem)
	if !ok {
		return 0
	}
	defer release()
	restart := e.killProcessors()
	defer restart()
	copied, ok := e.copyBroker(problem)
	if !ok {
		return 0
	}
	before, err := e.topicEnd(e.kafka.Topics.Inbox)
	var last int64
	if err == nil {
		err = e.mailbox.QueryRow(`SELECT COALESCE(MAX(CMINMSGS_ID), 0) FROM CMINMSGS`).Scan(&last)
	}
	if err != nil {
		problem("reading the inbox's end and the last mailbox row: %v", err)
		return 0
	}
	e.feedOnly(uncleanInboxRows)
	if !e.poll(30*time.Second, func() bool {
		n, err := e.topicEnd(e.kafka.Topics.Inbox)
		return err == nil && n >= before+uncleanInboxRows
	}) {
		problem("ingest did not publish %d rows within 30s with no processor running", uncleanInboxRows)
	}
	e.feedOnly(0)
	ids, err := e.mailboxIDsAbove(last)
	if err != nil {
		problem("listing the rows ingest published: %v", err)
	}
	e.t.Logf("chaos: rows ingest published while no processor ran, lost with the broker's copy: %v", ids)
	if !e.restoreBroker(copied, problem) {
		return 0
	}
	restart()
	release()
	recovery := e.awaitRecovery(problem)
	// Every message runs in mailbox order: none after a lost one finished
	// before the lost one was registered.
	if n, err := e.overtaken(ids); err != nil {
		problem("checking the order of the rows %v: %v", ids, err)
	} else if n > 0 {
		problem("%d later messages finished before one of the rows %v, whose records were lost unregistered, was registered: out of mailbox order", n, ids)
	}
	if !e.poll(45*time.Second, func() bool { return e.logsOf("ingest", "alert=broker-lost-records") }) {
		problem("ingest did not report the loss (alert=broker-lost-records) within 45s")
	}
	return recovery
}

// killProcessors kills every running processor instance (SIGKILL) and
// returns what starts them again, which acts once.
func (e *chaosEnv) killProcessors() (restart func()) {
	var killed []string
	for _, n := range instancesOf("processor") {
		if e.alive(n) {
			e.kill(n)
			killed = append(killed, n)
		}
	}
	return func() {
		for _, n := range killed {
			e.startInstance(n)
		}
		killed = nil
	}
}

// mailboxIDsAbove lists the mailbox IDs above id.
func (e *chaosEnv) mailboxIDsAbove(id int64) ([]int64, error) {
	rows, err := e.mailbox.Query(`SELECT CMINMSGS_ID FROM CMINMSGS WHERE CMINMSGS_ID > ? ORDER BY CMINMSGS_ID`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		ids = append(ids, n)
	}
	return ids, rows.Err()
}

// overtaken counts the messages that finished before a message of ids
// with a lower mailbox ID was registered.
func (e *chaosEnv) overtaken(ids []int64) (int, error) {
	var n int
	err := e.pg.QueryRow(context.Background(), `SELECT count(*) FROM proc_state a JOIN proc_state b ON b.msg_id > a.msg_id
		WHERE a.msg_id = ANY($1) AND b.finished_at < a.registered_at`, ids).Scan(&n)
	return n, err
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
// the lost window again; later it loses inbox records of messages no
// processor registered (faultUncleanInbox), which ingest publishes again
// in mailbox order by itself. Every service keeps running. The run must
// end as the run without faults does: msg in order per FLID with every
// event, schd and Redis equal to PostgreSQL, every row marked. Ingest
// republishes a row still unmarked after ten minutes, as in production,
// not after the harness's five seconds: the lost unregistered rows must
// come back by ingest's loss check, not by their republish.
func TestChaos_R_M1_BrokerLosesAcknowledgedRecords(t *testing.T) {
	testutil.Integration(t)
	p := chaosParams{Messages: 160, Faults: 2, Seed: chaosDefaultSeed,
		Flags: map[string][]string{"ingest": {"-ingest.pipeline.republish-after=10m"}}}
	sched := []chaosFault{{Kind: faultUncleanBroker, At: 60}, {Kind: faultUncleanInbox, At: 110}}
	runChaos(t, p, sched, fmt.Sprintf("go test -count=1 -run '^%s$' ./e2e/", t.Name()))
}
