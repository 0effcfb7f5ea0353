#!/bin/bash
# The PostgreSQL claim statement today (fn_*: the read-first UNION ALL and
# the PL/pgSQL claim function) against one statement with no function
# (cte_*: a CTE over INSERT … ON CONFLICT … DO UPDATE … WHERE expired),
# the same CTE inside a PL/pgSQL loop (fn2_*; BENCHMARKS.md also has it as
# a LANGUAGE sql function: the same body), and the statements by hand
# (hand_*), and a store's replay of a key it saw completed (seen_replay:
# a read of the completed row, no function), by pgbench, with the
# server time per call from pg_stat_statements (issue 34; BENCHMARKS.md).
# A fresh call's claim and completion (issue 52): migration 0003's claim
# (fn_pair), 0004's (v4_pair), and the fenced minimum on a table shaped
# like idem's (fenced_pair: upsert where expired, update where token).
#
# Needs a server with shared_preload_libraries=pg_stat_statements: a
# private one, e.g.
#   initdb -D DIR -A trust -U postgres
#   pg_ctl -D DIR -o "-p 25433 -c shared_preload_libraries=pg_stat_statements \
#     -c fsync=off -c synchronous_commit=off" start
#   PORT=25433 run.sh setup   # the store's migrations as table public.idem, fn2.sql
#   psql … -c "INSERT INTO public.idem (key, token, fingerprint, record, expires_at, site, created_at)
#     SELECT sha256(int8send(g::bigint)), '\x01', sha256('fp'), repeat('x',50)::bytea,
#     now() + interval '1 day', 'bench::site', now() FROM generate_series(1,1000) g"
# Usage: PORT=25433 C=32 J=2 T=8 SCRIPTS="fn_fresh cte_fresh …" run.sh ROUNDS
cd "$(dirname "$0")"
port="${PORT:-25433}"
P="psql -q -h 127.0.0.1 -p $port -U postgres"
if [ "$1" = setup ]; then
  $P -c 'create extension if not exists pg_stat_statements'
  for f in ../../../idem-store/src/postgres/migrations/*.sql; do
    sed -e 's/{t}/public.idem/g; s/{claim_v4}/public.idem_claim_v4/g; s/{claim}/public.idem_claim/g; s/{index}/idem_expires_at/g;
      s/{steps_of}/public.idem_steps_of/g; s/{steps_index}/idem_steps_expires_at/g;
      s/{steps}/public.idem_steps/g' "$f" | $P
  done
  $P -f fn2.sql
  $P -c 'create table public.fenced (key bytea primary key, token bytea not null, fingerprint bytea not null,
    record bytea, expires_at timestamptz not null); create index on public.fenced (expires_at)'
  exit
fi
for round in $(seq 1 "$1"); do
  for s in ${SCRIPTS:-fn_fresh cte_fresh hand_fresh fn_replay cte_replay hand_replay seen_replay}; do
    $P -c "select pg_stat_statements_reset()" >/dev/null
    tps=$(pgbench -n -h 127.0.0.1 -p "$port" -U postgres -M prepared -c "${C:-32}" -j "${J:-2}" -T "${T:-8}" \
      -f "$s.sql" postgres 2>/dev/null | grep -o 'tps = [0-9.]*' | cut -d' ' -f3)
    us=$($P -At -c "select round((sum(total_exec_time)/sum(calls)*1000)::numeric,1) from pg_stat_statements where query not like '%pg_stat%' and calls > 1000")
    echo "round $round $s tps=$tps exec_us_per_call=$us load=$(cut -d' ' -f1 /proc/loadavg)"
  done
done
