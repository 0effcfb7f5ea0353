-- 10,000 tombstones in the shape MySqlStore writes (migrations 1, 2), as
-- purge leaves them (record ''), then the same rows with a 200-byte record.
DROP TABLE IF EXISTS tomb_measure;
CREATE TABLE tomb_measure (`key` BINARY(32) NOT NULL PRIMARY KEY, token BINARY(16) NOT NULL, fingerprint BINARY(32) NOT NULL,
  record LONGBLOB NULL, expires_at DATETIME(6) NOT NULL, site TEXT CHARACTER SET utf8mb4 NULL, created_at DATETIME(6) NULL,
  tombstone_until DATETIME(6) NULL, INDEX tomb_measure_exp (expires_at)) ENGINE = InnoDB;
INSERT INTO tomb_measure SELECT UNHEX(SHA2(seq, 256)), UNHEX(LEFT(SHA2(-seq, 256), 32)), UNHEX(SHA2(seq + 1000000, 256)), '',
  UTC_TIMESTAMP(6) - INTERVAL 1 DAY, 'payments::charge', UTC_TIMESTAMP(6) - INTERVAL 2 DAY, UTC_TIMESTAMP(6) + INTERVAL 29 DAY
  FROM seq_1_to_10000;
OPTIMIZE TABLE tomb_measure;
ANALYZE TABLE tomb_measure;
SELECT 'tombstone: avg row length', AVG_ROW_LENGTH, '(data+index)/10000', (DATA_LENGTH + INDEX_LENGTH) / 10000 FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = 'tomb_measure';
UPDATE tomb_measure SET record = RANDOM_BYTES(200);
OPTIMIZE TABLE tomb_measure;
ANALYZE TABLE tomb_measure;
SELECT 'with a 200-byte record: avg row length', AVG_ROW_LENGTH, '(data+index)/10000', (DATA_LENGTH + INDEX_LENGTH) / 10000 FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = 'tomb_measure';
DROP TABLE tomb_measure;
