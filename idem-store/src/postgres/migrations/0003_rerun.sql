-- State updates (`mismatch = "rerun"`, `Claim::rerun`): a claim that
-- reruns replaces a completed record (or tombstone) of another payload in
-- the claim's one statement, dropping the replaced call's steps. The
-- function gains `p_rerun`, defaulting to false, so a claim of an earlier
-- release (five arguments) still finds it and behaves as before.
DROP FUNCTION {claim}(bytea, bytea, bytea, bigint, text);
CREATE FUNCTION {claim}(p_key bytea, p_token bytea, p_fingerprint bytea, p_lease_us bigint, p_site text,
    p_rerun boolean DEFAULT false)
RETURNS TABLE (o_outcome int, o_fingerprint bytea, o_record bytea, o_remaining_us bigint)
LANGUAGE plpgsql VOLATILE AS $idem$
DECLARE
    ts timestamptz := statement_timestamp();
    cur record;
    took_over boolean;
    -- The fingerprint of a call that does not fingerprint: matches any.
    v_none bytea := decode(repeat('00', 32), 'hex');
BEGIN
    -- Each statement below takes a fresh snapshot (READ COMMITTED), so a
    -- row committed by a racing claimer while we waited on its lock is
    -- seen on the next turn of the loop.
    FOR attempt IN 1..16 LOOP
        SELECT r.token, r.fingerprint, r.record, r.expires_at, r.tombstone_until INTO cur
            FROM {t} AS r WHERE r.key = p_key;
        IF p_rerun AND FOUND AND cur.record IS NOT NULL AND cur.fingerprint <> p_fingerprint
                AND cur.fingerprint <> v_none AND p_fingerprint <> v_none THEN
            -- A state update of another payload replaces the completed
            -- record (or its tombstone) it read, if it is still that one,
            -- and the replaced call's steps go with it.
            UPDATE {t} AS r
                SET token = p_token, fingerprint = p_fingerprint, record = NULL,
                    expires_at = ts + p_lease_us * interval '1 microsecond',
                    site = p_site, created_at = ts, tombstone_until = NULL
                WHERE r.key = p_key AND r.token = cur.token AND r.record IS NOT NULL;
            IF FOUND THEN
                DELETE FROM {steps} AS s WHERE s.call = p_key;
                RETURN QUERY SELECT 0, NULL::bytea, NULL::bytea, NULL::bigint;
                RETURN;
            END IF;
            CONTINUE;
        END IF;
        IF FOUND AND cur.expires_at > ts THEN
            IF cur.record IS NULL AND cur.token = p_token THEN
                -- Our own claim, sent again after a lost connection.
                RETURN QUERY SELECT 0, NULL::bytea, NULL::bytea, NULL::bigint;
            ELSE
                RETURN QUERY SELECT CASE WHEN cur.record IS NULL THEN 2 ELSE 3 END,
                    cur.fingerprint, cur.record,
                    -- By the clock now, not `ts`: the row may have been
                    -- written by a statement that began after ours (we
                    -- waited on its lock), and `expires_at - ts` would
                    -- then be more than its whole lease. Now is after
                    -- our read, so after the writer's commit and start.
                    floor(extract(epoch FROM cur.expires_at - clock_timestamp()) * 1000000)::bigint;
            END IF;
            RETURN;
        END IF;
        IF FOUND AND cur.record IS NOT NULL AND cur.tombstone_until > ts THEN
            -- A tombstone: the record expired this long ago; not claimed.
            RETURN QUERY SELECT 4, cur.fingerprint, NULL::bytea,
                floor(extract(epoch FROM ts - cur.expires_at) * 1000000)::bigint;
            RETURN;
        END IF;
        IF FOUND AND cur.record IS NULL AND cur.fingerprint <> p_fingerprint
                AND cur.fingerprint <> v_none AND p_fingerprint <> v_none THEN
            -- A lapsed claim of another payload: its holder may have had
            -- its effect, so it is not taken over (a mismatch).
            RETURN QUERY SELECT 2, cur.fingerprint, NULL::bytea, 0::bigint;
            RETURN;
        END IF;
        took_over := FOUND AND cur.record IS NULL;
        INSERT INTO {t} AS r (key, token, fingerprint, record, expires_at, site, created_at)
            VALUES (p_key, p_token, p_fingerprint, NULL, ts + p_lease_us * interval '1 microsecond', p_site, ts)
            ON CONFLICT (key) DO UPDATE
                SET token = EXCLUDED.token, fingerprint = EXCLUDED.fingerprint,
                    record = NULL, expires_at = EXCLUDED.expires_at,
                    site = EXCLUDED.site, created_at = EXCLUDED.created_at,
                    tombstone_until = NULL
                WHERE r.expires_at <= ts AND (r.tombstone_until IS NULL OR r.tombstone_until <= ts)
                    AND (r.record IS NOT NULL OR r.fingerprint IN (p_fingerprint, v_none)
                         OR p_fingerprint = v_none);
        IF FOUND THEN
            RETURN QUERY SELECT CASE WHEN took_over THEN 1 ELSE 0 END,
                NULL::bytea, NULL::bytea, NULL::bigint;
            RETURN;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'idem: the claim on % did not settle', encode(p_key, 'hex')
        USING ERRCODE = '40001';
END
$idem$;
