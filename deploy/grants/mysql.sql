-- Least-privilege grants of msgexchange on the mailbox database (R-H11).
--
-- The mailbox (schema aodbinterface) belongs to the adapter team; its DBA
-- runs this file once, and again after an upgrade of msgexchange whose
-- release notes name a change here. Every grant is column-level: each
-- account can touch exactly the columns of the statements listed beside it
-- and nothing else — no DELETE, no DDL, no other table, no other column.
--
-- Names: the schema is aodbinterface and the accounts are 'msgx_ingest'@'%',
-- 'msgx_dispatcher'@'%' and, for the all-in-one pod (the chart's AllInOne
-- mode: ingest and the dispatcher in one process on one pool),
-- 'msgx_all_in_one'@'%'. A site with other names replaces these four words
-- throughout (for example with sed) before running the file; narrow '%' to
-- the network the services connect from. A site without the all-in-one pod
-- creates its account all the same (it is never used) or drops the
-- section below that names it.
--
-- The accounts are created first, with the password kept in the Secret the
-- services mount (mysql.dsn) and TLS required (mysql.tls.*), for example:
--
--   CREATE USER 'msgx_ingest'@'%' IDENTIFIED BY '<password>' REQUIRE SSL;
--   CREATE USER 'msgx_dispatcher'@'%' IDENTIFIED BY '<password>' REQUIRE SSL;
--   CREATE USER 'msgx_all_in_one'@'%' IDENTIFIED BY '<password>' REQUIRE SSL;
--
-- (REQUIRE X509 instead of a password when the site issues client
-- certificates.) Running this file again is harmless: GRANT only adds.
-- SHOW GRANTS FOR 'msgx_ingest'@'%'; must list exactly what is below.

-- ---------------------------------------------------------------------
-- ingest: the mailbox scan and the compat entry POST /cminmsgs/send (one
-- process, one connection pool, so one account).
--
-- Scan (services/ingest/internal/mailbox):
--   SELECT CMINMSGS_ID FROM CMINMSGS
--     WHERE CMINMSGS_DATE_PROCESSED IS NULL AND CMINMSGS_STATUS = ?
--     AND CMINMSGS_ID > ? ORDER BY CMINMSGS_ID LIMIT ?
--   SELECT CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED FROM CMINMSGS
--     WHERE CMINMSGS_ID IN (…) AND CMINMSGS_DATE_PROCESSED IS NULL AND CMINMSGS_STATUS = ?
--   SELECT MAX(CMINMSGS_ID) FROM CMINMSGS
--   SELECT 1 FROM CMINMSGS WHERE CMINMSGS_ID = 0            (readiness)
-- The CMINMSGS_SUBSYSTEM_* columns are never read.
GRANT SELECT (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED,
              CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS)
    ON aodbinterface.CMINMSGS TO 'msgx_ingest'@'%';

-- Compat entry, as the adapter inserts (every other column keeps its
-- default, the marker NULL, CMINMSGS_ID from AUTO_INCREMENT):
--   INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS)
GRANT INSERT (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS)
    ON aodbinterface.CMINMSGS TO 'msgx_ingest'@'%';

-- ---------------------------------------------------------------------
-- dispatcher: the processed markers and the outbound requests.
--
-- Markers (services/dispatcher/internal/relay/mailbox.go), one transaction
-- per batch: a locking read that tells "unmarked", "already marked",
-- "row missing" and "row replaced" apart (the receive time is not the one
-- the message was read with: its ID was handed out again, as after a
-- failover to a replica that lacked the row), then one UPDATE written
-- only onto unmarked rows:
--   SELECT CMINMSGS_ID, CMINMSGS_DATE_PROCESSED, CMINMSGS_DATE_RECEIVED FROM CMINMSGS
--     WHERE CMINMSGS_ID IN (…) FOR UPDATE
--   UPDATE CMINMSGS SET CMINMSGS_DATE_PROCESSED = ?, CMINMSGS_STATUS = ?
--     WHERE CMINMSGS_ID IN (…) AND CMINMSGS_DATE_PROCESSED IS NULL
-- The WHERE clause reads CMINMSGS_ID and CMINMSGS_DATE_PROCESSED, which
-- needs SELECT on them; the message text is not readable to this account.
--
-- The same two columns answer an operator's mailbox census (msgxctl
-- mailbox census, services/dispatcher/internal/relay/census.go), the
-- figures of the cutover from the predecessor (R-L6), read only:
--   SELECT COALESCE(MAX(CMINMSGS_ID), 0) + 1 FROM CMINMSGS
--   SELECT COALESCE(MAX(CMINMSGS_ID), 0) + 1 FROM CMINMSGS
--     WHERE CMINMSGS_DATE_PROCESSED IS NOT NULL
--   SELECT COUNT(*), COALESCE(SUM(CMINMSGS_DATE_PROCESSED IS NULL), 0) FROM CMINMSGS
--     WHERE CMINMSGS_ID >= ?
--   SELECT COUNT(*) FROM CMINMSGS WHERE CMINMSGS_ID < ? AND CMINMSGS_DATE_PROCESSED IS NULL
GRANT SELECT (CMINMSGS_ID, CMINMSGS_DATE_PROCESSED, CMINMSGS_DATE_RECEIVED)
    ON aodbinterface.CMINMSGS TO 'msgx_dispatcher'@'%';
GRANT UPDATE (CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS)
    ON aodbinterface.CMINMSGS TO 'msgx_dispatcher'@'%';

-- Outbound requests (services/dispatcher/internal/relay/coutmsgs.go):
--   INSERT INTO COUTMSGS (COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, COUTMSGS_DATE_SENT,
--     ROUTINGID, COUTMSGS_TRUEFALS_GROUP, COUTMSGS_FINAL_GROUP_IND, COUTMSGS_ACK_REQD,
--     COUTMSGS_ACK_RESEND_TIMES, COUTMSGS_ENCRYPT, COUTMSGS_ERROR, COUTMSGS_NO_MESSAGES,
--     COUTMSGS_GROUP_ORDER, COUTMSGS_GROUP_ID, COUTMSGS_ACK_DATE_RECV)
GRANT INSERT (COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, COUTMSGS_DATE_SENT, ROUTINGID,
              COUTMSGS_TRUEFALS_GROUP, COUTMSGS_FINAL_GROUP_IND, COUTMSGS_ACK_REQD,
              COUTMSGS_ACK_RESEND_TIMES, COUTMSGS_ENCRYPT, COUTMSGS_ERROR,
              COUTMSGS_NO_MESSAGES, COUTMSGS_GROUP_ORDER, COUTMSGS_GROUP_ID,
              COUTMSGS_ACK_DATE_RECV)
    ON aodbinterface.COUTMSGS TO 'msgx_dispatcher'@'%';

-- Before each insert, the lookup that keeps a crash between the insert and
-- its record in PostgreSQL from inserting the request a second time (R-D5,
-- C-24): an identical XML under the same ROUTINGID since the request was
-- registered is the earlier attempt, and its COUTMSGS_ID is reused.
--   SELECT COUTMSGS_ID, COUTMSGS_CLOB_MSG FROM COUTMSGS
--     WHERE ROUTINGID = ? AND COUTMSGS_DATE_INSERTED >= ? AND COUTMSGS_CLOB_MSG = ?
-- It reads four columns; the delivery and acknowledgement columns the AODB
-- side maintains (COUTMSGS_DATE_SENT, COUTMSGS_ACK_*, COUTMSGS_ERROR, …)
-- are not readable. docs/security.md explains why this SELECT is granted.
GRANT SELECT (COUTMSGS_ID, COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, ROUTINGID)
    ON aodbinterface.COUTMSGS TO 'msgx_dispatcher'@'%';

-- ---------------------------------------------------------------------
-- all-in-one: one account with ingest's grants and the dispatcher's, and
-- nothing else; the row rules below hold it as they hold the dispatcher.
GRANT SELECT (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED,
              CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS)
    ON aodbinterface.CMINMSGS TO 'msgx_all_in_one'@'%';
GRANT INSERT (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS)
    ON aodbinterface.CMINMSGS TO 'msgx_all_in_one'@'%';
GRANT UPDATE (CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS)
    ON aodbinterface.CMINMSGS TO 'msgx_all_in_one'@'%';
GRANT INSERT (COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, COUTMSGS_DATE_SENT, ROUTINGID,
              COUTMSGS_TRUEFALS_GROUP, COUTMSGS_FINAL_GROUP_IND, COUTMSGS_ACK_REQD,
              COUTMSGS_ACK_RESEND_TIMES, COUTMSGS_ENCRYPT, COUTMSGS_ERROR,
              COUTMSGS_NO_MESSAGES, COUTMSGS_GROUP_ORDER, COUTMSGS_GROUP_ID,
              COUTMSGS_ACK_DATE_RECV)
    ON aodbinterface.COUTMSGS TO 'msgx_all_in_one'@'%';
GRANT SELECT (COUTMSGS_ID, COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, ROUTINGID)
    ON aodbinterface.COUTMSGS TO 'msgx_all_in_one'@'%';

-- ---------------------------------------------------------------------
-- Row rules (R-K7). A column grant cannot say which rows: the UPDATE on the
-- two marker columns would also let the dispatcher's account clear a
-- marker or write one over another, and the INSERT on COUTMSGS would take
-- any ROUTINGID. These two triggers refuse, for the dispatcher's and the
-- all-in-one account only (USER() is the account that logged in), a
-- marker written onto a row already marked or cleared, and an outbound
-- row under a ROUTINGID
-- other than the gateway's own (VIEWRQFD, VIEWRQRD). Every other account,
-- the adapter's included, is untouched. The dispatcher's code guards the
-- same rules before each statement, and names every row it marks by its
-- CMINMSGS_ID (services/dispatcher/internal/relay/mailboxguard.go); no
-- trigger can bound how many rows one statement changes. Creating a
-- trigger needs the TRIGGER privilege; run as the schema's owner. Running
-- the file again replaces them.
DROP TRIGGER IF EXISTS aodbinterface.msgx_marker_from_empty;
DROP TRIGGER IF EXISTS aodbinterface.msgx_coutmsgs_own_routing;
DELIMITER //
CREATE TRIGGER aodbinterface.msgx_marker_from_empty
    BEFORE UPDATE ON aodbinterface.CMINMSGS FOR EACH ROW
BEGIN
    IF SUBSTRING_INDEX(USER(), '@', 1) IN ('msgx_dispatcher', 'msgx_all_in_one')
       AND (OLD.CMINMSGS_DATE_PROCESSED IS NOT NULL OR NEW.CMINMSGS_DATE_PROCESSED IS NULL) THEN
        SIGNAL SQLSTATE '45000'
            SET MESSAGE_TEXT = 'msgexchange R-K7: the dispatcher sets a marker only on a row whose marker is empty';
    END IF;
END//
CREATE TRIGGER aodbinterface.msgx_coutmsgs_own_routing
    BEFORE INSERT ON aodbinterface.COUTMSGS FOR EACH ROW
BEGIN
    IF SUBSTRING_INDEX(USER(), '@', 1) IN ('msgx_dispatcher', 'msgx_all_in_one')
       AND NEW.ROUTINGID NOT IN ('VIEWRQFD', 'VIEWRQRD') THEN
        SIGNAL SQLSTATE '45000'
            SET MESSAGE_TEXT = 'msgexchange R-K7: the dispatcher inserts COUTMSGS rows only under its own routing IDs';
    END IF;
END//
DELIMITER ;
