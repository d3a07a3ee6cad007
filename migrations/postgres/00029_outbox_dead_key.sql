-- +goose Up
-- A dead-lettered row parks its key on its target: the relay holds every
-- later row of the key until an operator requeues or discards the dead one
-- (R-L3), and the gauges count the parked rows and keys. Both look up the
-- DEAD rows of one key; this index holds only DEAD rows, which are few.
CREATE INDEX outbox_dead_key_idx ON outbox (target, pkey, id) WHERE state = 'DEAD';

-- +goose Down
DROP INDEX outbox_dead_key_idx;
