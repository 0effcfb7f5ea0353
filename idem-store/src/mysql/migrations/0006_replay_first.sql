-- A replay (a live record, or a live claim of another caller) is
-- answered by the procedure's first statement: a plain read, without
-- locks, sent as the result set itself, so that a replay costs one read
-- and none of 0005's variables, handlers and second statement. Anything
-- else finds no row there, and the store skips that empty result set;
-- 0005's claim follows, unchanged but for its start: a plain insert where
-- 0005 read the row first (the read above has just found no live row).
-- A state update (`p_rerun`, which may replace a completed record) and a
-- claim in the caller's transaction skip the first read and run 0005's
-- claim whole. A procedure of a new name, so that replicas of the
-- releases before keep calling theirs during a rolling deploy.
DROP PROCEDURE IF EXISTS {claim_v6}
//
CREATE PROCEDURE {claim_v6}(
    p_key BINARY(32), p_token BINARY(16), p_fingerprint BINARY(32),
    p_lease_us BIGINT, p_site TEXT CHARACTER SET utf8mb4, p_own_tx BOOLEAN, p_rerun BOOLEAN
)
MODIFIES SQL DATA
COMMENT 'idem: claim a key; answers one row (outcome, fingerprint, record, remaining microseconds), then the steps of a won claim'
BEGIN
    -- Live by the CALL's start (UTC_TIMESTAMP), with the time left read by
    -- the clock as the row is read (see 0005): a row that lapsed a moment
    -- ago is answered in progress or completed, with no time left, as if
    -- read a moment sooner.
    IF p_own_tx AND NOT p_rerun THEN
        SELECT CAST(IF(record IS NULL, 2, 3) AS INT) AS outcome, fingerprint, record,
               TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
                   - TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)) AS remaining_us,
               NULL AS step, NULL AS value
            FROM {t}
            WHERE `key` = p_key AND expires_at > UTC_TIMESTAMP(6) AND (record IS NOT NULL OR token <> p_token);
    END IF;
    IF NOT p_own_tx OR p_rerun OR FOUND_ROWS() = 0 THEN
        BEGIN
            -- Outcomes: 0 won, 1 won by taking over an expired claim, 2 in
            -- progress elsewhere, 3 completed, 4 a completed record past its TTL
            -- whose tombstone stands (remaining_us: since the TTL ran out).
            DECLARE v_outcome INT DEFAULT NULL;
            DECLARE v_token BINARY(16);
            DECLARE v_fingerprint BINARY(32);
            DECLARE v_record LONGBLOB;
            DECLARE v_left BIGINT;
            DECLARE v_tombstone BIGINT;
            DECLARE v_attempt INT DEFAULT 0;
            -- The fingerprint of a call that does not fingerprint: matches any.
            DECLARE v_none BINARY(32) DEFAULT UNHEX(REPEAT('00', 32));
            -- A state update of another payload (`p_rerun`): it replaces a
            -- completed record or tombstone rather than being answered it.
            DECLARE v_replaces BOOLEAN DEFAULT FALSE;
            -- The fast path's insert met a row (see below).
            DECLARE v_duplicate BOOLEAN DEFAULT FALSE;
            -- A key nobody claimed: SELECT … INTO finds no row.
            DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_left = NULL;

            -- The read above found no live row: a plain insert, a
            -- transaction of its own, claims a key no row holds, with no
            -- locking read after. A row standing under the key (a lapsed
            -- claim, a tombstone, our own claim sent again) or a racing
            -- claimer's (a duplicate, or a deadlock that rolled this insert
            -- back) takes the loop below.
            IF p_own_tx AND NOT p_rerun THEN
                BEGIN
                    DECLARE CONTINUE HANDLER FOR 1062, 1213 SET v_duplicate = TRUE;
                    INSERT INTO {t} (`key`, token, fingerprint, record, expires_at, site, created_at)
                        VALUES (p_key, p_token, p_fingerprint, NULL,
                                UTC_TIMESTAMP(6) + INTERVAL p_lease_us MICROSECOND, p_site, UTC_TIMESTAMP(6));
                END;
                IF NOT v_duplicate THEN
                    SET v_outcome = 0;
                END IF;
            ELSEIF p_own_tx THEN
                -- A state update (`p_rerun`), not read above: as 0005, a
                -- plain read first (no locks), so that a replay or a
                -- duplicate of a running call costs an index lookup. Time
                -- left is read by the clock as the row is read: UTC_TIMESTAMP
                -- is the CALL's start, which may precede the holder's claim
                -- or renewal we waited for (it would answer more than a
                -- whole lease), so the time since the CALL began (SYSDATE -
                -- NOW) is taken off.
                SET v_left = NULL, v_tombstone = NULL;
                SELECT token, fingerprint, record, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
                           - TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)),
                       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), tombstone_until)
                    INTO v_token, v_fingerprint, v_record, v_left, v_tombstone
                    FROM {t} WHERE `key` = p_key;
                SET v_replaces = p_rerun AND v_record IS NOT NULL AND v_fingerprint <> p_fingerprint
                    AND v_fingerprint <> v_none AND p_fingerprint <> v_none;
                IF v_replaces THEN
                    SET v_outcome = NULL;
                ELSEIF v_left > 0 AND (v_record IS NOT NULL OR v_token <> p_token) THEN
                    SET v_outcome = IF(v_record IS NULL, 2, 3);
                ELSEIF v_left <= 0 AND v_record IS NOT NULL AND v_tombstone > 0 THEN
                    SET v_outcome = 4, v_left = -v_left;
                ELSEIF v_left IS NULL THEN
                    -- No row holds the key: a plain insert, a transaction of its
                    -- own, claims it, with no locking read after. A row a racing
                    -- claimer wrote meanwhile (a duplicate, or a deadlock that
                    -- rolled this insert back) takes the loop below.
                    BEGIN
                        DECLARE CONTINUE HANDLER FOR 1062, 1213 SET v_duplicate = TRUE;
                        INSERT INTO {t} (`key`, token, fingerprint, record, expires_at, site, created_at)
                            VALUES (p_key, p_token, p_fingerprint, NULL,
                                    UTC_TIMESTAMP(6) + INTERVAL p_lease_us MICROSECOND, p_site, UTC_TIMESTAMP(6));
                    END;
                    IF NOT v_duplicate THEN
                        SET v_outcome = 0;
                    END IF;
                END IF;
            END IF;

            WHILE v_outcome IS NULL DO
                SET v_attempt = v_attempt + 1;
                attempt: BEGIN
                    -- Two claimers of a key nobody held can deadlock in InnoDB;
                    -- the loser's transaction is rolled back, so try again (never
                    -- inside the caller's transaction, which is gone).
                    DECLARE EXIT HANDLER FOR 1213
                    BEGIN
                        IF v_attempt >= 16 OR NOT p_own_tx THEN
                            RESIGNAL;
                        END IF;
                    END;
                    IF p_own_tx THEN
                        START TRANSACTION;
                    END IF;
                    -- Inserts the claim, or locks the row that holds the key
                    -- (an exclusive lock on that one row, no gap lock on a miss).
                    INSERT INTO {t} (`key`, token, fingerprint, record, expires_at, site, created_at)
                        VALUES (p_key, p_token, p_fingerprint, NULL,
                                UTC_TIMESTAMP(6) + INTERVAL p_lease_us MICROSECOND, p_site, UTC_TIMESTAMP(6))
                        ON DUPLICATE KEY UPDATE `key` = `key`;
                    SET v_left = NULL, v_tombstone = NULL;
                    SELECT token, fingerprint, record, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
                           - TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)),
                           TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), tombstone_until)
                        INTO v_token, v_fingerprint, v_record, v_left, v_tombstone
                        FROM {t} WHERE `key` = p_key FOR UPDATE;
                    SET v_replaces = p_rerun AND v_record IS NOT NULL AND v_fingerprint <> p_fingerprint
                        AND v_fingerprint <> v_none AND p_fingerprint <> v_none;
                    IF v_left IS NULL THEN
                        -- Deleted before our lock (cannot happen while we hold
                        -- it); start again.
                        SET v_outcome = NULL;
                    ELSEIF v_replaces THEN
                        -- A state update of another payload: the completed record
                        -- (or its tombstone) is replaced under our row lock, and
                        -- the replaced call's steps go with it.
                        UPDATE {t} SET token = p_token, fingerprint = p_fingerprint, record = NULL,
                                expires_at = UTC_TIMESTAMP(6) + INTERVAL p_lease_us MICROSECOND,
                                site = p_site, created_at = UTC_TIMESTAMP(6), tombstone_until = NULL
                            WHERE `key` = p_key;
                        DELETE FROM {steps} WHERE `call` = p_key;
                        SET v_outcome = 0;
                    ELSEIF v_left > 0 AND v_record IS NULL AND v_token = p_token THEN
                        -- Our claim: just inserted, or this claim sent again.
                        SET v_outcome = 0;
                    ELSEIF v_left > 0 THEN
                        SET v_outcome = IF(v_record IS NULL, 2, 3);
                    ELSEIF v_record IS NOT NULL AND v_tombstone > 0 THEN
                        -- A tombstone: not claimed.
                        SET v_outcome = 4, v_left = -v_left;
                    ELSEIF v_record IS NULL AND v_fingerprint <> p_fingerprint
                            AND v_fingerprint <> v_none AND p_fingerprint <> v_none THEN
                        -- A lapsed claim of another payload: its holder may have
                        -- had its effect, so it is not taken over (a mismatch).
                        SET v_outcome = 2, v_left = 0;
                    ELSE
                        UPDATE {t} SET token = p_token, fingerprint = p_fingerprint, record = NULL,
                                expires_at = UTC_TIMESTAMP(6) + INTERVAL p_lease_us MICROSECOND,
                                site = p_site, created_at = UTC_TIMESTAMP(6), tombstone_until = NULL
                            WHERE `key` = p_key;
                        SET v_outcome = IF(v_record IS NULL AND v_token <> p_token, 1, 0);
                    END IF;
                    IF p_own_tx THEN
                        COMMIT;
                    END IF;
                END attempt;
                IF v_outcome IS NULL AND v_attempt >= 16 THEN
                    SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'idem: the claim did not settle';
                END IF;
            END WHILE;

            IF v_outcome IN (0, 1) THEN
                -- After the commit, so this read's snapshot holds every step saved
                -- before our claim (a save holds the row's shared lock until it
                -- commits; our claim waited for it).
                SELECT v_outcome AS outcome, v_fingerprint AS fingerprint, v_record AS record,
                       v_left AS remaining_us, NULL AS step, NULL AS value
                UNION ALL
                SELECT NULL, NULL, NULL, NULL, s.step, s.value FROM {steps} AS s
                    WHERE s.`call` = p_key AND s.expires_at > UTC_TIMESTAMP(6);
            ELSE
                SELECT v_outcome AS outcome, v_fingerprint AS fingerprint, v_record AS record,
                       v_left AS remaining_us, NULL AS step, NULL AS value;
            END IF;
        END;
    END IF;
END
