-- 10,000 tombstones in the shape SqliteStore writes (steps 1, 2, 4), as
-- purge leaves them (record X''), then the same rows with a 200-byte record.
CREATE TABLE idem_records (key BLOB PRIMARY KEY, token BLOB NOT NULL, fingerprint BLOB NOT NULL,
  record BLOB, expires_at INTEGER NOT NULL, site TEXT, created_at INTEGER, tombstone_until INTEGER) WITHOUT ROWID;
CREATE INDEX idem_records_expires_at ON idem_records (expires_at);
CREATE INDEX idem_records_created_at ON idem_records (created_at);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
INSERT INTO idem_records SELECT randomblob(32), randomblob(16), randomblob(32), X'', 1764000000000 + i,
  'payments::charge', 1763900000000 + i, 1766600000000 + i FROM n;
VACUUM;
SELECT 'tombstone: bytes per row (pages * page_size / 10000)', (SELECT page_count FROM pragma_page_count()) * (SELECT page_size FROM pragma_page_size()) / 10000.0;
UPDATE idem_records SET record = randomblob(200);
VACUUM;
SELECT 'with a 200-byte record: bytes per row', (SELECT page_count FROM pragma_page_count()) * (SELECT page_size FROM pragma_page_size()) / 10000.0;
