-- The mailbox tables as the adapter team defines them (schema
-- aodbinterface). Development and tests create them from this file;
-- production never runs DDL against the shared MySQL (C-14).
CREATE TABLE IF NOT EXISTS CMINMSGS (
    CMINMSGS_ID                  bigint NOT NULL AUTO_INCREMENT,
    CMINMSGS_CLOB_MSG            MEDIUMTEXT NOT NULL,
    CMINMSGS_DATE_RECEIVED       datetime NULL,
    CMINMSGS_DATE_PROCESSED      datetime NULL,
    CMINMSGS_SUBSYSTEM_NAME      varchar(4) NULL,
    CMINMSGS_SUBSYSTEM_SEQUENCE  mediumint NULL,
    CMINMSGS_SUBSYSTEM_DATE_SENT datetime NULL,
    CMINMSGS_SUBSYSTEM_SUBTYPE   varchar(4) NULL,
    CMINMSGS_SUBSYSTEM_TYPE      varchar(4) NULL,
    CMINMSGS_STATUS              varchar(20) NULL,
    PRIMARY KEY (CMINMSGS_ID)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE IF NOT EXISTS COUTMSGS (
    COUTMSGS_ID                bigint NOT NULL AUTO_INCREMENT,
    COUTMSGS_CLOB_MSG          MEDIUMTEXT NULL,
    COUTMSGS_DATE_INSERTED     datetime NOT NULL,
    COUTMSGS_DATE_SENT         datetime NULL,
    ROUTINGID                  varchar(23) NOT NULL,
    COUTMSGS_TRUEFALS_GROUP    tinyint NOT NULL DEFAULT 0,
    COUTMSGS_FINAL_GROUP_IND   tinyint NOT NULL DEFAULT 0,
    COUTMSGS_ACK_REQD          tinyint NOT NULL DEFAULT 0,
    COUTMSGS_ACK_RESEND_TIMES  tinyint NOT NULL DEFAULT 0,
    COUTMSGS_ENCRYPT           tinyint NOT NULL DEFAULT 0,
    COUTMSGS_ERROR             tinyint NOT NULL DEFAULT 0,
    COUTMSGS_NO_MESSAGES       tinyint NULL,
    COUTMSGS_GROUP_ORDER       smallint NULL,
    COUTMSGS_GROUP_ID          smallint NULL,
    COUTMSGS_ACK_DATE_RECV     datetime NULL,
    PRIMARY KEY (COUTMSGS_ID)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
