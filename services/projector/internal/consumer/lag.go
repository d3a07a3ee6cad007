package consumer

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kadm"
)

// groupLag returns the number of records of the group's partitions that are
// not yet committed, which in this consumer means not yet projected and
// acknowledged: end offset minus committed offset (minus start offset where
// nothing is committed), summed over every partition of the group, whichever
// member owns it. It returns NaN whenever the lag cannot be read, because an
// unknown lag is not zero (R-F4).
func groupLag(ctx context.Context, adm *kadm.Client, group string) float64 {
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		return math.NaN()
	}
	l, ok := lags[group]
	if !ok || l.Error() != nil || len(l.Lag) == 0 {
		return math.NaN()
	}
	for _, ps := range l.Lag {
		for _, m := range ps {
			if m.Err != nil {
				return math.NaN()
			}
		}
	}
	return float64(l.Lag.Total())
}
