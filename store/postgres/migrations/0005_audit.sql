-- The audit trail (audit.go). Entries by sequence number, each kept as the
-- JSON bbolt keeps (rec) with the columns its filters need.
CREATE TABLE audit_entries (
    seq         bigint PRIMARY KEY,
    at_ns       bigint NOT NULL,
    actor_id    text COLLATE "C" NOT NULL,
    actor_email text COLLATE "C" NOT NULL,
    actor_key   text COLLATE "C" NOT NULL,
    action      text COLLATE "C" NOT NULL,
    target      text COLLATE "C" NOT NULL,
    rec         bytea NOT NULL
);

-- One row: the chain's head (the newest entry) and anchor (the last entry
-- retention dropped). Every appender locks it FOR UPDATE in the
-- transaction that writes its entries, engine batch or account change
-- alike, so the chain has one appender at a time.
CREATE TABLE audit_chain (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    head_seq   bigint NOT NULL,
    head_mac   text NOT NULL,
    anchor_seq bigint NOT NULL,
    anchor_mac text NOT NULL
);

INSERT INTO audit_chain VALUES (true, 0, '', 0, '');
