package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	leaseapi "msgexchange/libs/lease"
	"msgexchange/libs/testutil/pgtest"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// TestLease_R_F1_AcquireRenewReleaseList walks one lease through its
// calls: acquire, re-acquire by the same holder (renews, keeps the token),
// renew, list, release (idempotent), and a new term by another holder.
func TestLease_R_F1_AcquireRenewReleaseList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	ctx := callCtx(t)

	a, err := e.api.Acquire(ctx, &controlv1.AcquireLeaseRequest{Name: "processor", Holder: "host-a/1/aa", Ttl: ttl(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, int64(1), a.GetToken())
	require.False(t, a.GetRenewed())
	require.WithinDuration(t, a.GetAcquiredAt().AsTime().Add(time.Minute), a.GetExpiresAt().AsTime(), time.Millisecond)

	again, err := e.api.Acquire(ctx, &controlv1.AcquireLeaseRequest{Name: "processor", Holder: "host-a/1/aa", Ttl: ttl(2 * time.Minute)})
	require.NoError(t, err)
	require.Equal(t, int64(1), again.GetToken(), "the same holder keeps its token")
	require.True(t, again.GetRenewed())
	require.Equal(t, a.GetAcquiredAt().AsTime(), again.GetAcquiredAt().AsTime())
	require.True(t, again.GetExpiresAt().AsTime().After(a.GetExpiresAt().AsTime()))

	r, err := e.api.Renew(ctx, &controlv1.RenewLeaseRequest{Name: "processor", Holder: "host-a/1/aa", Token: 1, Ttl: ttl(3 * time.Minute)})
	require.NoError(t, err)
	require.True(t, r.GetExpiresAt().AsTime().After(again.GetExpiresAt().AsTime()))

	// A second lease, to see the list ordered by name.
	_, err = e.api.Acquire(ctx, &controlv1.AcquireLeaseRequest{Name: "dispatcher/msg", Holder: "host-b/2/bb", Ttl: ttl(time.Minute)})
	require.NoError(t, err)

	list, err := e.api.List(ctx, &controlv1.ListLeasesRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetLeases(), 2)
	require.Equal(t, "dispatcher/msg", list.GetLeases()[0].GetName())
	p := list.GetLeases()[1]
	require.Equal(t, "processor", p.GetName())
	require.Equal(t, "host-a/1/aa", p.GetHolder())
	require.Equal(t, int64(1), p.GetToken())
	require.True(t, p.GetHeld())
	require.Nil(t, p.GetReleasedAt())
	require.Equal(t, r.GetExpiresAt().AsTime(), p.GetExpiresAt().AsTime())
	require.InDelta(t, 3*time.Minute, p.GetRemaining().AsDuration(), float64(10*time.Second))
	require.WithinDuration(t, p.GetExpiresAt().AsTime().Add(-p.GetRemaining().AsDuration()), list.GetNow().AsTime(), time.Millisecond)

	rel, err := e.api.Release(ctx, &controlv1.ReleaseLeaseRequest{Name: "processor", Holder: "host-a/1/aa", Token: 1})
	require.NoError(t, err)
	require.True(t, rel.GetReleased())
	rel, err = e.api.Release(ctx, &controlv1.ReleaseLeaseRequest{Name: "processor", Holder: "host-a/1/aa", Token: 1})
	require.NoError(t, err)
	require.False(t, rel.GetReleased(), "a second release is a no-op")
	_, err = e.api.Renew(ctx, &controlv1.RenewLeaseRequest{Name: "processor", Holder: "host-a/1/aa", Token: 1, Ttl: ttl(time.Minute)})
	requireCode(t, codes.FailedPrecondition, err)

	list, err = e.api.List(ctx, &controlv1.ListLeasesRequest{})
	require.NoError(t, err)
	p = list.GetLeases()[1]
	require.False(t, p.GetHeld())
	require.NotNil(t, p.GetReleasedAt())
	require.Zero(t, p.GetRemaining().AsDuration())

	b, err := e.api.Acquire(ctx, &controlv1.AcquireLeaseRequest{Name: "processor", Holder: "host-b/2/bb", Ttl: ttl(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, int64(2), b.GetToken(), "a new term after a release gets the next token")

	require.Equal(t, []auditRow{
		{Action: "acquire", Holder: "host-a/1/aa", Token: 1},
		{Action: "release", Holder: "host-a/1/aa", Token: 1},
		{Action: "renew-lost", Holder: "host-a/1/aa", Token: 1, Reason: "term ended; now " + describeFromList(p)},
		{Action: "acquire", Holder: "host-b/2/bb", Token: 2},
	}, e.audits(t, "processor"))
}

// describeFromList renders a listed lease the way the server describes an
// ended term.
func describeFromList(l *controlv1.Lease) string {
	return "holder " + l.GetHolder() + " token " + itoa(l.GetToken()) + " ended " + l.GetExpiresAt().AsTime().UTC().Format(time.RFC3339Nano)
}

// TestLease_R_B8_SecondHolderRefusedUntilExpiry: while A's term is live B
// is refused with FAILED_PRECONDITION naming A; once A's short TTL ran out
// B takes over with the next token, A's renewal is refused, and the audit
// records A's term as expired.
func TestLease_R_B8_SecondHolderRefusedUntilExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	a, b := e.client(t), e.client(t)
	// short is long enough that B's two refusals below come inside A's
	// term on a loaded machine (a 300 ms term once ran out before them in
	// the race-detecting CI run) and short enough to wait out.
	const short = 3 * time.Second

	ga, err := a.Acquire(callCtx(t), "ingest-scanner", "host-a/1/aa", short)
	require.NoError(t, err)
	require.Equal(t, int64(1), ga.Token)

	_, err = e.api.Acquire(callCtx(t), &controlv1.AcquireLeaseRequest{Name: "ingest-scanner", Holder: "host-b/2/bb", Ttl: ttl(short)})
	requireCode(t, codes.FailedPrecondition, err)
	require.Contains(t, err.Error(), "held: holder host-a/1/aa until")
	require.NotContains(t, err.Error(), "token", "a live term's token goes only to its holder (R-H9)")
	info := errorInfo(t, err)
	require.Equal(t, leaseapi.ReasonHeld, info.GetReason())
	require.Equal(t, "host-a/1/aa", info.GetMetadata()["holder"])
	require.NotContains(t, info.GetMetadata(), "token")

	_, err = b.Acquire(callCtx(t), "ingest-scanner", "host-b/2/bb", short)
	require.ErrorIs(t, err, leaseapi.ErrHeld)
	require.ErrorContains(t, err, "holder host-a/1/aa")

	gb := acquireEventually(t, b, "ingest-scanner", "host-b/2/bb", time.Minute)
	require.Equal(t, int64(2), gb.Token)
	require.False(t, gb.Renewed)

	_, err = a.Renew(callCtx(t), "ingest-scanner", "host-a/1/aa", 1, short)
	require.ErrorIs(t, err, leaseapi.ErrLost)
	require.ErrorContains(t, err, "holder host-b/2/bb until")
	released, err := a.Release(callCtx(t), "ingest-scanner", "host-a/1/aa", 1)
	require.NoError(t, err)
	require.False(t, released, "a stale release must not end the new term")

	got := e.audits(t, "ingest-scanner")
	require.Equal(t, []string{"acquire host-a/1/aa 1", "expire host-a/1/aa 1", "acquire host-b/2/bb 2", "renew-lost host-a/1/aa 1"}, actions(got))
	require.Contains(t, got[1].Reason, "without release; next term token 2 by host-b/2/bb")
}

// TestLease_R_B8_TokensStrictlyIncreaseAndNeverRepeat: every new term —
// after expiry, release, force-release, by the same or another holder —
// gets a larger token, and deleting the lease row by hand cannot make a
// token come back.
func TestLease_R_B8_TokensStrictlyIncreaseAndNeverRepeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	c := e.client(t)
	const name = "dispatcher/flight-state"
	var tokens []int64
	record := func(g leaseapi.Grant) {
		require.False(t, g.Renewed)
		tokens = append(tokens, g.Token)
	}
	holders := []string{"h1/1/01", "h2/2/02", "h1/1/01"}
	for i := 0; i < 9; i++ {
		h := holders[i%len(holders)]
		d := time.Minute
		if i%3 == 2 {
			d = 100 * time.Millisecond
		}
		g := acquireEventually(t, c, name, h, d)
		record(g)
		switch i % 3 {
		case 0: // released by the holder
			ok, err := c.Release(callCtx(t), name, h, g.Token)
			require.NoError(t, err)
			require.True(t, ok)
		case 1: // force-released by an operator
			_, err := e.api.ForceRelease(callCtx(t), &controlv1.ForceReleaseLeaseRequest{Name: name, Operator: "ops", Reason: "test"})
			require.NoError(t, err)
		case 2: // left to expire
			require.Eventually(t, func() bool {
				list, err := e.api.List(callCtx(t), &controlv1.ListLeasesRequest{})
				return err == nil && !list.GetLeases()[0].GetHeld()
			}, 10*time.Second, 5*time.Millisecond)
		}
	}
	// An operator deletes the row: the audit still knows the largest token.
	pgtest.MustExec(t, e.dbURL, `DELETE FROM lease WHERE name=$1`, name)
	record(acquireEventually(t, c, name, "h3/3/03", time.Minute))

	for i := 1; i < len(tokens); i++ {
		require.Greater(t, tokens[i], tokens[i-1], "tokens %v", tokens)
	}
	require.Equal(t, int64(10), tokens[len(tokens)-1])
}

// TestLease_R_F1_ForceReleaseWithAudit: an operator ends a live term;
// operator and reason are recorded; the holder's renewal and fenced writes
// fail; the token is unchanged and the next acquirer gets token + 1.
func TestLease_R_F1_ForceReleaseWithAudit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	c := e.client(t)
	ctx := callCtx(t)
	g, err := c.Acquire(ctx, "processor", "host-a/1/aa", time.Minute)
	require.NoError(t, err)

	_, err = e.api.ForceRelease(ctx, &controlv1.ForceReleaseLeaseRequest{Name: "processor"})
	requireCode(t, codes.InvalidArgument, err)
	require.Contains(t, err.Error(), "operator is required")
	require.Contains(t, err.Error(), "reason is required")
	_, err = e.api.ForceRelease(ctx, &controlv1.ForceReleaseLeaseRequest{Name: "nope", Operator: "ops", Reason: "r"})
	requireCode(t, codes.NotFound, err)

	resp, err := e.api.ForceRelease(ctx, &controlv1.ForceReleaseLeaseRequest{Name: "processor", Operator: "alice", Reason: "host-a hangs"})
	require.NoError(t, err)
	require.True(t, resp.GetWasHeld())
	require.False(t, resp.GetLease().GetHeld())
	require.Equal(t, g.Token, resp.GetLease().GetToken(), "force-release bumps nothing")
	require.NotNil(t, resp.GetLease().GetReleasedAt())
	au := resp.GetAudit()
	require.Equal(t, controlv1.LeaseAction_LEASE_ACTION_FORCE_RELEASE, au.GetAction())
	require.Equal(t, "host-a/1/aa", au.GetHolder())
	require.Equal(t, g.Token, au.GetToken())
	require.Equal(t, "alice", au.GetOperator())
	require.Equal(t, "host-a hangs", au.GetReason())
	require.Positive(t, au.GetId())

	_, err = c.Renew(ctx, "processor", "host-a/1/aa", g.Token, time.Minute)
	require.ErrorIs(t, err, leaseapi.ErrLost)
	err = leaseapi.InFencedTx(ctx, e.pool, "processor", g.Token, func(pgx.Tx) error { return nil })
	require.ErrorIs(t, err, leaseapi.ErrFenced)

	again, err := e.api.ForceRelease(ctx, &controlv1.ForceReleaseLeaseRequest{Name: "processor", Operator: "bob", Reason: "twice"})
	require.NoError(t, err)
	require.False(t, again.GetWasHeld())

	next, err := c.Acquire(ctx, "processor", "host-a/1/aa", time.Minute)
	require.NoError(t, err)
	require.Equal(t, g.Token+1, next.Token, "even the same holder starts a new term")
	require.Equal(t, []auditRow{
		{Action: "acquire", Holder: "host-a/1/aa", Token: 1},
		{Action: "force-release", Holder: "host-a/1/aa", Token: 1, Operator: "alice", Reason: "host-a hangs"},
		{Action: "renew-lost", Holder: "host-a/1/aa", Token: 1, Reason: "term ended; now " + describeFromList(resp.GetLease())},
		{Action: "force-release", Holder: "host-a/1/aa", Token: 1, Operator: "bob", Reason: "twice"},
		{Action: "acquire", Holder: "host-a/1/aa", Token: 2},
	}, e.audits(t, "processor"))
}

// TestLease_R_F1_RefusesInvalidArguments: every malformed call is
// INVALID_ARGUMENT with every problem named.
func TestLease_R_F1_RefusesInvalidArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	for _, tc := range []struct {
		name string
		call func(context.Context) error
		want []string
	}{
		{"AcquireEmpty", func(ctx context.Context) error {
			_, err := e.api.Acquire(ctx, &controlv1.AcquireLeaseRequest{})
			return err
		}, []string{"name is required", "holder is required", "ttl is required"}},
		{"AcquireBadName", func(ctx context.Context) error {
			_, err := e.api.Acquire(ctx, &controlv1.AcquireLeaseRequest{Name: "pro cessor", Holder: "h", Ttl: ttl(time.Second)})
			return err
		}, []string{`name "pro cessor"`}},
		{"AcquireTTLTooShort", func(ctx context.Context) error {
			_, err := e.api.Acquire(ctx, &controlv1.AcquireLeaseRequest{Name: "p", Holder: "h", Ttl: ttl(time.Millisecond)})
			return err
		}, []string{"ttl 1ms"}},
		{"AcquireTTLTooLong", func(ctx context.Context) error {
			_, err := e.api.Acquire(ctx, &controlv1.AcquireLeaseRequest{Name: "p", Holder: "h", Ttl: ttl(2 * time.Hour)})
			return err
		}, []string{"ttl 2h0m0s"}},
		{"AcquireHolderWithSpace", func(ctx context.Context) error {
			_, err := e.api.Acquire(ctx, &controlv1.AcquireLeaseRequest{Name: "p", Holder: "a b", Ttl: ttl(time.Second)})
			return err
		}, []string{`holder "a b"`}},
		{"RenewNoToken", func(ctx context.Context) error {
			_, err := e.api.Renew(ctx, &controlv1.RenewLeaseRequest{Name: "p", Holder: "h", Ttl: ttl(time.Second)})
			return err
		}, []string{"token 0"}},
		{"ReleaseNoToken", func(ctx context.Context) error {
			_, err := e.api.Release(ctx, &controlv1.ReleaseLeaseRequest{Name: "p", Holder: "h"})
			return err
		}, []string{"token 0"}},
		{"ForceReleaseNoName", func(ctx context.Context) error {
			_, err := e.api.ForceRelease(ctx, &controlv1.ForceReleaseLeaseRequest{Operator: "o", Reason: "r"})
			return err
		}, []string{"name is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.call(callCtx(t))
			requireCode(t, codes.InvalidArgument, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
	// The client maps them to ErrRejected: retrying cannot help.
	_, err := e.client(t).Acquire(callCtx(t), "", "h", time.Second)
	require.ErrorIs(t, err, leaseapi.ErrRejected)
}

// TestLease_ConcurrentAcquireHasOneWinner: many holders racing for a new
// lease: exactly one term begins.
func TestLease_ConcurrentAcquireHasOneWinner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	c := e.client(t)
	const n = 12
	results := make(chan error, n)
	for i := range n {
		go func() {
			_, err := c.Acquire(callCtx(t), "race", "h/"+itoa(int64(i))+"/x", time.Minute)
			results <- err
		}()
	}
	var won, held int
	for range n {
		err := <-results
		switch {
		case err == nil:
			won++
		case errors.Is(err, leaseapi.ErrHeld):
			held++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	require.Equal(t, 1, won)
	require.Equal(t, n-1, held)
	got := e.audits(t, "race")
	require.Len(t, got, 1)
	require.Equal(t, "acquire", got[0].Action)
	require.Equal(t, int64(1), got[0].Token)
}

// errorInfo extracts the LeaseService ErrorInfo of a status error.
func errorInfo(t *testing.T, err error) *errdetails.ErrorInfo {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			require.Equal(t, leaseapi.ErrorDomain, info.GetDomain())
			return info
		}
	}
	t.Fatalf("no ErrorInfo in %v", err)
	return nil
}
