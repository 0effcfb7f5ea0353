-- Storage of 10,000 tombstones: rows of the shape PostgresStore writes
-- (migrations 1, 3, 5), as `purge_expired` leaves them (record ''), beside
-- the same rows still holding a 200-byte record.
DROP SCHEMA IF EXISTS tomb_measure CASCADE;
CREATE SCHEMA tomb_measure;
CREATE TABLE tomb_measure.r (key bytea PRIMARY KEY, token bytea NOT NULL, fingerprint bytea NOT NULL,
  record bytea, expires_at timestamptz NOT NULL, site text, created_at timestamptz, tombstone_until timestamptz);
CREATE INDEX r_expires_at ON tomb_measure.r (expires_at);
INSERT INTO tomb_measure.r SELECT sha256(int4send(i)), substr(sha256(int4send(-i)), 1, 16), sha256(int4send(i + 1000000)),
  ''::bytea, now() - interval '1 day', 'payments::charge', now() - interval '2 days', now() + interval '29 days'
  FROM generate_series(1, 10000) AS i;
VACUUM ANALYZE tomb_measure.r;
SELECT 'tombstone row bytes (avg pg_column_size)' AS what, round(avg(pg_column_size(r.*)), 1) FROM tomb_measure.r AS r
UNION ALL SELECT 'table + indexes bytes per tombstone', pg_total_relation_size('tomb_measure.r') / 10000.0;
UPDATE tomb_measure.r SET record = decode(repeat('ab', 200), 'hex');
VACUUM FULL tomb_measure.r;
SELECT 'same rows with a 200-byte record (avg pg_column_size)' AS what, round(avg(pg_column_size(r.*)), 1) FROM tomb_measure.r AS r
UNION ALL SELECT 'table + indexes bytes per record', pg_total_relation_size('tomb_measure.r') / 10000.0;
DROP SCHEMA tomb_measure CASCADE;
