-- +goose Up
-- req_track: outbound requests to the AODB (R-D5, US-09) and their answers.
-- RQFD asks for the daily flight data of a window (STDB..STDE, passed
-- through verbatim as sent); RQRD asks for one reference type (RTYP).
-- Lifecycle: REGISTERED (written by the control plane with the XML and its
-- outbox row) → SENT (the dispatcher's COUTMSGS insert is confirmed,
-- outbound_id recorded) → WAITING (the processor armed timeout_at) → DONE
-- (a matching RESP was applied, response_msg_id) or EXPIRED (timeout,
-- superseded by a newer request of the same scope, or undeliverable).
-- Closed rows (DONE, EXPIRED) are never changed again and are purged after
-- request.retention (G-REQ-TRACK-RETENTION).
CREATE TABLE req_track (
    id              bigserial PRIMARY KEY,
    type            text NOT NULL CHECK (type IN ('RQFD', 'RQRD')),
    stdb            text,
    stde            text,
    rtyp            text,
    sender          text NOT NULL,
    seqn            text NOT NULL,
    state           text NOT NULL DEFAULT 'REGISTERED'
                    CHECK (state IN ('REGISTERED', 'SENT', 'WAITING', 'DONE', 'EXPIRED')),
    outbound_id     bigint,
    xml             text NOT NULL,
    operator        text NOT NULL,
    reason          text NOT NULL,
    registered_at   timestamptz NOT NULL,
    sent_at         timestamptz,
    timeout_at      timestamptz,
    closed_at       timestamptz,
    response_msg_id bigint,
    match_kind      text CHECK (match_kind IN ('exact', 'fallback')),
    closed_reason   text,
    -- The scope of a request: the window for RQFD, the type for RQRD.
    CONSTRAINT req_track_scope_chk CHECK (
        (type = 'RQFD' AND stdb IS NOT NULL AND stde IS NOT NULL AND rtyp IS NULL)
        OR (type = 'RQRD' AND rtyp IS NOT NULL AND stdb IS NULL AND stde IS NULL)),
    CONSTRAINT req_track_closed_chk CHECK ((state IN ('DONE', 'EXPIRED')) = (closed_at IS NOT NULL)),
    CONSTRAINT req_track_sent_chk CHECK (state = 'REGISTERED' OR state = 'EXPIRED' OR sent_at IS NOT NULL),
    CONSTRAINT req_track_done_chk CHECK (state <> 'DONE' OR (response_msg_id IS NOT NULL AND match_kind IS NOT NULL))
);
-- At most one open request per (type, scope, sender) (G-REQ-OPEN-UNIQUE);
-- the control plane expires the open one before registering a new one.
CREATE UNIQUE INDEX req_track_open_scope_uidx ON req_track
    (type, sender, COALESCE(rtyp, ''), COALESCE(stdb, ''), COALESCE(stde, ''))
    WHERE state IN ('REGISTERED', 'SENT', 'WAITING');
CREATE INDEX req_track_waiting_idx ON req_track (timeout_at) WHERE state = 'WAITING';
CREATE INDEX req_track_closed_idx ON req_track (closed_at) WHERE state IN ('DONE', 'EXPIRED');

-- SEQN of outbound requests: 6 digits zero-padded, cycling 1…999999
-- (sis-catalogue §8).
CREATE SEQUENCE req_track_seqn AS integer MINVALUE 1 MAXVALUE 999999 START 1 CYCLE;

-- +goose Down
DROP SEQUENCE req_track_seqn;
DROP TABLE req_track;
