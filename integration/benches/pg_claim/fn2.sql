CREATE OR REPLACE FUNCTION public.idem_claim2(p_key bytea, p_token bytea, p_fingerprint bytea, p_lease_us bigint, p_site text)
RETURNS TABLE (o_outcome int, o_fingerprint bytea, o_record bytea, o_remaining_us bigint)
LANGUAGE plpgsql VOLATILE AS $idem$
BEGIN
    -- One statement per turn: it reads the row and claims it if free or
    -- lapsed. It answers nothing only when a racing claimer committed the
    -- row after this statement's snapshot; the next turn's snapshot sees it.
    FOR attempt IN 1..16 LOOP
        RETURN QUERY
        WITH cur AS MATERIALIZED (SELECT r.token, r.fingerprint, r.record, r.expires_at, r.expires_at > statement_timestamp() AS live FROM public.idem AS r WHERE r.key = p_key),
        ins AS (INSERT INTO public.idem AS r (key, token, fingerprint, record, expires_at, site, created_at)
          SELECT p_key, p_token, p_fingerprint, NULL, statement_timestamp() + p_lease_us * interval '1 microsecond', p_site, statement_timestamp()
          WHERE NOT EXISTS (SELECT 1 FROM cur WHERE live)
          ON CONFLICT (key) DO UPDATE SET token = EXCLUDED.token, fingerprint = EXCLUDED.fingerprint, record = NULL, expires_at = EXCLUDED.expires_at, site = EXCLUDED.site, created_at = EXCLUDED.created_at
          WHERE r.expires_at <= statement_timestamp() RETURNING 1)
        SELECT CASE WHEN c.record IS NULL THEN 2 ELSE 3 END, c.fingerprint, c.record, floor(extract(epoch FROM c.expires_at - clock_timestamp()) * 1000000)::bigint FROM cur c WHERE c.live AND (c.record IS NOT NULL OR c.token <> p_token)
        UNION ALL SELECT CASE WHEN EXISTS (SELECT 1 FROM cur c WHERE c.record IS NULL AND NOT c.live) THEN 1 ELSE 0 END, NULL::bytea, NULL::bytea, NULL::bigint FROM ins
        UNION ALL SELECT 0, NULL::bytea, NULL::bytea, NULL::bigint FROM cur c WHERE c.live AND c.record IS NULL AND c.token = p_token;
        IF FOUND THEN RETURN; END IF;
    END LOOP;
    RAISE EXCEPTION 'idem: the claim on % did not settle', encode(p_key, 'hex') USING ERRCODE = '40001';
END
$idem$;
