\set k random(1, 1000)
SELECT 3, r.fingerprint, r.record, floor(extract(epoch FROM r.expires_at - clock_timestamp()) * 1000000)::bigint FROM public.idem AS r WHERE r.key = sha256(int8send(:k)) AND r.expires_at > statement_timestamp() AND r.record IS NOT NULL;
