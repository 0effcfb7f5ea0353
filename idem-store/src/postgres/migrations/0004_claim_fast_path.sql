-- The claim's fast path: a key no row holds is claimed by one
-- `INSERT … ON CONFLICT DO NOTHING`, and its steps are read in the same
-- call (a statement after the insert, so a snapshot after it, as
-- `{steps_of}` takes). Any row standing under the key goes to `{claim}`,
-- unchanged, which settles every other case as before (a live claim or
-- record, a lapsed claim and its evidence, a tombstone, a rerun). A new
-- name, not a new signature of `{claim}`: replicas of earlier releases
-- keep calling `{claim}` and `{steps_of}` during a rolling deploy.
CREATE FUNCTION {claim_v4}(p_key bytea, p_token bytea, p_fingerprint bytea, p_lease_us bigint, p_site text,
    p_rerun boolean DEFAULT false)
RETURNS TABLE (o_outcome int, o_fingerprint bytea, o_record bytea, o_remaining_us bigint, o_steps bytea[])
LANGUAGE plpgsql VOLATILE AS $idem$
BEGIN
    INSERT INTO {t} (key, token, fingerprint, record, expires_at, site, created_at)
        VALUES (p_key, p_token, p_fingerprint, NULL,
            statement_timestamp() + p_lease_us * interval '1 microsecond', p_site, statement_timestamp())
        ON CONFLICT (key) DO NOTHING;
    IF FOUND THEN
        RETURN QUERY SELECT 0, NULL::bytea, NULL::bytea, NULL::bigint,
            (SELECT array_agg(s.step || s.value) FROM {steps} AS s
             WHERE s.call = p_key AND s.expires_at > statement_timestamp());
    ELSE
        RETURN QUERY SELECT c.o_outcome, c.o_fingerprint, c.o_record, c.o_remaining_us,
            CASE WHEN c.o_outcome IN (0, 1) THEN {steps_of}(p_key) END
            FROM {claim}(p_key, p_token, p_fingerprint, p_lease_us, p_site, p_rerun) AS c;
    END IF;
END
$idem$;
