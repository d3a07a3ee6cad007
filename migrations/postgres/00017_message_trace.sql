-- +goose Up
-- The W3C trace context (traceparent, tracestate) of the span that
-- registered a message from its inbox record (R-I4). The execution runs
-- later, from the FIFO head rather than from the record, and continues the
-- message's trace from here, so ingest, processor, dispatcher and
-- projector spans of one message form one trace. NULL when tracing is off
-- or the inbox record carried no trace context.
ALTER TABLE proc_state
    ADD COLUMN trace_parent text,
    ADD COLUMN trace_state text;

-- +goose Down
ALTER TABLE proc_state
    DROP COLUMN trace_state,
    DROP COLUMN trace_parent;
