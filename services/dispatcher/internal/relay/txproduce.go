package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/kafka"
)

// Every Kafka target produces through a transactional producer whose
// transactional ID is the target's own and the same in every dispatcher
// instance of the deployment (TransactionalID). That is the broker's half
// of the fence (R-H6): the lease fences what a term writes to PostgreSQL,
// but a record a term handed to its producer before its lease ended can
// still reach the broker after a newer term's records — a produce delayed
// by a paused process, a slow broker or a database outage that ended the
// old term mid-flush. When a newer term's producer starts (its first
// transaction), the broker bumps the producer epoch of the transactional
// ID: the old term's open transaction is aborted and every later request
// of the old producer is refused (PRODUCER_FENCED). Consumers read with
// isolation level read_committed (libs/kafka ClientOpts), so no record of
// an aborted transaction is ever seen, and a newer state of a key can
// never be followed by an older one that an old term sent late.

// endTxnTimeout bounds the commit or abort of one transaction. It is not
// derived from the caller's context: cancelling an EndTransaction in
// flight leaves its outcome unknown (franz-go's documentation).
const endTxnTimeout = 30 * time.Second

// errProducerRestart ends a target's term after a transaction whose end
// failed: the producer's state is unknown or fenced, and only a new
// producer, in a new term, can go on. The rows of the batch were backed
// off; the new term relays them.
var errProducerRestart = errors.New("the target's transactional producer cannot go on; its term ends")

// TransactionalID is the transactional ID of target's producer: the
// deployment's prefix (kafka.DispatcherTransactionalIDPrefix, which the
// site's ACLs grant) and the target.
func TransactionalID(clientID, target string) string {
	return kafka.DispatcherTransactionalIDPrefix(clientID) + target
}

// producerOpts are the options of target's producer: the common client
// options, the transactional ID, and extra.
func (r *Relay) producerOpts(target string, extra ...kgo.Opt) []kgo.Opt {
	opts := append(r.opt.Kafka.ClientOpts(r.log, "dispatcher-"+target),
		kgo.TransactionalID(TransactionalID(r.opt.Kafka.ClientID, target)))
	return append(opts, extra...)
}

// produceTx produces recs as one transaction and commits it. The batch is
// delivered as a whole or not at all. The results are in the order of
// recs. When a record fails, the transaction is aborted: that record keeps
// its own error, and every other record fails with batchAbortedError, so
// that the caller can tell the record that cannot be delivered (R-L2) from
// those that only went down with it. When the commit fails, every record
// carries that error. The returned error is errProducerRestart (wrapped
// with the cause) when the producer cannot start another transaction; the
// results then fail too.
func produceTx(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) (kgo.ProduceResults, error) {
	failAll := func(err error) kgo.ProduceResults {
		out := make(kgo.ProduceResults, len(recs))
		for i, rec := range recs {
			out[i] = kgo.ProduceResult{Record: rec, Err: err}
		}
		return out
	}
	if err := cl.BeginTransaction(); err != nil {
		err = fmt.Errorf("beginning a Kafka transaction: %w", err)
		return failAll(err), fmt.Errorf("%w: %w", errProducerRestart, err)
	}
	results := inOrder(recs, cl.ProduceSync(ctx, recs...))
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTxnTimeout)
	defer cancel()
	if perr := results.FirstErr(); perr != nil {
		for i := range results {
			if results[i].Err == nil {
				results[i].Err = batchAbortedError{cause: perr}
			}
		}
		if err := abortTx(ectx, cl); err != nil {
			return results, fmt.Errorf("%w: producing: %w; then %w", errProducerRestart, perr, err)
		}
		if fenced(perr) {
			return results, fmt.Errorf("%w: %w", errProducerRestart, perr)
		}
		return results, nil
	}
	if err := cl.EndTransaction(ectx, kgo.TryCommit); err != nil {
		cerr := fmt.Errorf("committing the Kafka transaction: %w", err)
		// The outcome of a failed commit is unknown; aborting reloads the
		// producer ID, which settles it (franz-go's documented recovery).
		if aerr := abortTx(ectx, cl); aerr != nil || fenced(err) {
			return failAll(cerr), fmt.Errorf("%w: %w", errProducerRestart, errors.Join(cerr, aerr))
		}
		return failAll(cerr), nil
	}
	return results, nil
}

// inOrder returns results in the order of recs: franz-go reports them as
// each partition finishes.
func inOrder(recs []*kgo.Record, results kgo.ProduceResults) kgo.ProduceResults {
	at := make(map[*kgo.Record]int, len(recs))
	for i, rec := range recs {
		at[rec] = i
	}
	out := make(kgo.ProduceResults, len(recs))
	for i, rec := range recs {
		out[i] = kgo.ProduceResult{Record: rec}
	}
	for _, res := range results {
		if i, ok := at[res.Record]; ok {
			out[i].Err = res.Err
		}
	}
	return out
}

// batchAbortedError is the failure of a record that the broker did not
// refuse but that was aborted with its transaction because another record
// of the batch failed. It does not unwrap to that record's error: whatever
// the other record's class, this one is only to be tried again (transient).
type batchAbortedError struct{ cause error }

func (e batchAbortedError) Error() string {
	return "aborted with its transaction after another record failed: " + e.cause.Error()
}

// abortTx aborts the open transaction.
func abortTx(ctx context.Context, cl *kgo.Client) error {
	if err := cl.AbortBufferedRecords(ctx); err != nil {
		return fmt.Errorf("dropping buffered records: %w", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return fmt.Errorf("aborting the Kafka transaction: %w", err)
	}
	return nil
}

// fenced reports whether err says a newer producer of the same
// transactional ID took over: this producer can do nothing more.
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}
