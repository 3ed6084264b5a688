-- An entry's MAC in its 32 bytes, beside its columns, and rec holding only
-- what no column holds (source, outcome, reason, client address, dropped):
-- 0005's rows repeated the columns in rec, which took an entry from under
-- 300 bytes to 481. Rows written before keep a NULL mac and their full rec,
-- which reads back the same.
ALTER TABLE audit_entries ADD COLUMN mac bytea;
