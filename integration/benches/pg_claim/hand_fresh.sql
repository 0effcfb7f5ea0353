\set k random(1, 9000000000000000)
INSERT INTO public.idem (key, token, fingerprint, record, expires_at, site, created_at) VALUES (sha256(int8send(:k)), '\x0102030405060708090a0b0c0d0e0f10'::bytea, sha256('fp'::bytea), NULL, statement_timestamp() + interval '30 seconds', 'bench::site', statement_timestamp()) ON CONFLICT DO NOTHING;
