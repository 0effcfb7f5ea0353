\set k random(1, 1000)
SELECT r.fingerprint, r.record, r.expires_at FROM public.idem AS r WHERE r.key = sha256(int8send(:k));
