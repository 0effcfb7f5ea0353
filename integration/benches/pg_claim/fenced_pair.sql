\set k random(1, 9000000000000000)
INSERT INTO public.fenced AS r (key, token, fingerprint, expires_at) VALUES (sha256(int8send(:k)), '\x0102030405060708090a0b0c0d0e0f10'::bytea, sha256('fp'::bytea), now() + interval '30 seconds') ON CONFLICT (key) DO UPDATE SET token = EXCLUDED.token, fingerprint = EXCLUDED.fingerprint, record = NULL, expires_at = EXCLUDED.expires_at WHERE r.expires_at < now();
UPDATE public.fenced SET record = '\x01000331'::bytea, expires_at = now() + interval '1 day' WHERE key = sha256(int8send(:k)) AND token = '\x0102030405060708090a0b0c0d0e0f10'::bytea;
