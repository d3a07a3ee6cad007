package decide

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/flight"
)

// TestJudge_R_K2_R_C6_INV23_OutcomesAsValues: what a handler returned
// becomes one outcome value each: a decision with pending projections is
// APPLIED (INV-23), without them SUCCEEDED, a step that leaves work
// Continued (R-C6); a skip, a rejection (DEAD PROTOCOL) and an
// unsupported message or a failure a retry would repeat (parked, R-K2)
// carry their reason; an INFRA failure is a retry (R-B3); any other
// error stays an error, wrapped or not.
func TestJudge_R_K2_R_C6_INV23_OutcomesAsValues(t *testing.T) {
	t.Parallel()
	broken := errors.New("reading flights: connection reset")
	cases := []struct {
		name        string
		out         Outcome
		err         error
		projections int
		want        Outcome
	}{
		{"applied", Outcome{Note: "n"}, nil, 2, Outcome{Kind: Applied, Note: "n"}},
		{"applied-pending", Outcome{Pending: true}, nil, 0, Outcome{Kind: Applied, Pending: true}},
		{"succeeded", Outcome{Note: "n"}, nil, 0, Outcome{Kind: Succeeded, Note: "n"}},
		{"continued", Outcome{Continue: "2 of 5"}, nil, 3, Outcome{Kind: Continued, Continue: "2 of 5"}},
		{"skipped", Outcome{}, fmt.Errorf("flop: %w", &Skip{Reason: "no flight"}), 0, Outcome{Kind: Skipped, Note: "no flight"}},
		{"rejected", Outcome{}, &flight.RejectError{Reason: "bad FLID"}, 1, Outcome{Kind: Rejected, Class: ClassProtocol, Note: "bad FLID"}},
		{"unsupported", Outcome{}, &Unsupported{Reason: "RQFD"}, 0, Outcome{Kind: Parked, Class: ClassUnsupported, Note: "RQFD"}},
		{"parked", Outcome{}, &Failure{Class: "UNSUPPORTED", Reason: "no key rule"}, 0, Outcome{Kind: Parked, Class: "UNSUPPORTED", Note: "no key rule"}},
		{"retry", Outcome{}, &Failure{Class: ClassInfra, Reason: "later"}, 0, Outcome{Kind: Retry, Class: ClassInfra, Note: "later"}},
	}
	for _, c := range cases {
		got, err := Judge(c.out, c.err, c.projections)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, got, c.name)
	}
	_, err := Judge(Outcome{}, fmt.Errorf("deciding: %w", broken), 0)
	require.ErrorIs(t, err, broken, "a real error stays an error")
}
