//! Operating idem: metrics, spans, forgetting records, the `idem` command.
//!
//! # Metrics
//!
//! Through the [`metrics`](https://docs.rs/metrics) facade, so any exporter
//! (Prometheus, OpenTelemetry, StatsD) sees them once it is installed as the
//! recorder; with none installed they cost a call into the facade's no-op
//! recorder and nothing else (no allocation, no formatting: each call site's
//! metric keys are built at compile time).
//!
//! | name | type | labels | what |
//! | --- | --- | --- | --- |
//! | `idem_calls_total` | counter | `site`, `outcome` | calls, by how they ended: `ran` (the body ran; its `Err`s included), `replayed`, `in_progress`, `mismatch`, `lease_lost`, `store_error`, `codec_error`, `invalid` (an empty key or impossible settings), `expired` (a late duplicate answered by a tombstone) |
//! | `idem_store_seconds` | histogram | `site`, `op` | one store operation (round trip), by `op`: `claim`, `complete`, `release`, `renew` |
//! | `idem_takeovers_total` | counter | `site` | claims won from a holder whose lease had run out |
//! | `idem_reconciled_total` | counter | `site` | takeovers answered by the call's reconcile (`Ok(Some(_))`): the body did not run |
//! | `idem_renewals_total` | counter | `site` | lease renewals that held |
//! | `idem_renewal_failures_total` | counter | `site` | lease renewals that did not hold, counted as they happen while the body runs: the store failed (retried at the next third of the lease) or answered that the claim is lost; each also logs a `WARN` event in the call's span |
//! | `idem_waits_total` | counter | `site` | calls that waited (`wait`) for another caller's result |
//! | `idem_memory_evicted_total` | counter | (none) | completed records a [`MemoryStore`](crate::MemoryStore) made with `evict_live()` evicted within their TTL (each one's duplicate runs again); always 0 without it |
//!
//! `site` is bounded: it is the call site's static name, never the scope a
//! call was given (which may carry a tenant) nor a key. For `#[idempotent]`
//! it is the function's path (`my_app::billing::charge`), whatever its
//! `scope = …` expression. A builder call is counted under `site="unnamed"`
//! unless it names its site: `.site(idem::call_site!("payments"))`
//! ([`call_site!`](crate::call_site))
//! (a `&'static str`, built at compile time). The HTTP layer's calls are
//! named `METHOD /route`.
//!
//! `integration/examples/prometheus_metrics.rs` serves them with
//! `metrics-exporter-prometheus` (`cargo run -p idem-integration --example
//! prometheus_metrics`, then `curl 127.0.0.1:9464/metrics`);
//! `integration/tests/metrics_prometheus.rs` scrapes it over HTTP after real
//! calls and checks the counts.
//!
//! # Spans
//!
//! Each call runs in an INFO span `idem.call` with `scope` (the call's own,
//! tenant included), `key` (the short hash), and, once known, `outcome` (as
//! above) and `replayed`, and `reconciled` when a takeover asked the
//! call's reconcile (`true`: it answered a value, `false`: the body ran);
//! the runtime's events (`claimed`, `replayed`, …)
//! are inside it. With no subscriber listening at INFO the span is disabled
//! and no field is formatted.
//!
//! # Forget, and a disabled handle
//!
//! [`idem.forget(scope, key)`](crate::Idempotency::forget) removes a record, completed or in
//! progress, from the store and the handle's local cache, so the next call
//! runs the body again; a key with no record is `Ok`. A body still running on
//! a forgotten claim gets `Error::LeaseLost` when it completes (its result is
//! not stored). Every built-in store implements `Store::forget`; a store of
//! your own that does not answers it with a `StoreError` saying so.
//! Inside PostgreSQL's transactional mode it deletes within the transaction.
//!
//! [`Idempotency::disabled()`](crate::Idempotency::disabled) runs every body and stores nothing (for
//! tests and local runs); its first call logs one `tracing` warning saying
//! so, once per handle.
//!
//! # The `idem` command
//!
//! The package `idem-cli` installs the `idem` binary: `cargo install
//! idem-cli` (from a checkout, `cargo install --path idem-cli`, or `cargo
//! run -p idem-cli --`). It has one feature per store (`redis`,
//! `postgres`, `sqlite`, `mysql`, all by default) and `http` (for
//! `--http`, on by default), chosen at install time:
//! `cargo install idem-cli --no-default-features --features sqlite` builds
//! the SQLite command alone, without a Redis, PostgreSQL or MySQL client.
//!
//! ```sh
//! idem list --sqlite /var/lib/app/idem.db --in-progress --older-than 10m   # stuck claims
//! idem --postgres postgres://app@db/app inspect --scope payments --key order-1
//! idem --sqlite idem.db inspect --http 'POST /orders' --key ord-a1 --header 'authorization: Bearer …'
//! idem --redis redis://cache:6379 forget --record 0eac0b3d              # a unique prefix of the hashed key, as listed
//! IDEM_POSTGRES_URL="$URL" idem stats --schema billing --table idem_records --json
//! idem --mysql mysql://app@db/app list --table checkout_idem                # MySQL or MariaDB
//! idem purge --sqlite idem.db
//! AWS_REGION=eu-west-1 idem --dynamodb idem stats                          # AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY set
//! idem purge --postgres "$URL" --batch 500 --pause 50ms             # gentler beside heavy traffic
//! ```
//!
//! | command | does |
//! | --- | --- |
//! | `inspect --scope S --key K` (or `--http 'METHOD ROUTE' --key K`, or `--record HEX`) | the store it read (and its table or key prefix), state, age, expiry, fingerprint, size, and the stored value: a response the HTTP layer stored as status, headers and body; any other value with its kind, version and type (below) |
//! | `list [--in-progress] [--older-than D] [--limit N]` | records, oldest first: hashed key, state, age, expiry, size, call site (the function's path, or `METHOD /route` for the HTTP layer) |
//! | `forget --scope S --key K` (or `--http …`, or `--record HEX`) | removes the record and its saved steps (on SQLite in one transaction) so the next call runs again |
//! | `purge [--batch N] [--pause D]` | deletes expired records and the steps of expired calls, at most N rows a statement (default 1,000) with D between statements (default 20ms, `0s` for back to back) so live calls never wait behind the whole purge, counted apart (`{"purged": records, "steps": steps}`; Redis expires its own: 0); a lapsed claim stays a day (`idem::store::LAPSED_CLAIM_KEPT`), the evidence a takeover needs |
//! | `stats` | counts by state (in progress, completed, expired, lapsed, tombstones) and stored bytes |
//!
//! The states, the same on every store: `in_progress` (a claim whose lease
//! is live: its body runs, or its holder died less than a lease ago),
//! `completed` (a result, replayed), `expired` (a result past its TTL),
//! `tombstone` (past its TTL, refusing late duplicates) and `lapsed` (a
//! claim whose lease ran out without a result: its holder died or stopped
//! renewing; the next call takes it over). `--in-progress` lists live
//! claims only; a lapsed claim has no expiry left.
//!
//! The store flags (`--redis URL`, `--postgres URL`, `--mysql URL`,
//! `--sqlite FILE`, `--dynamodb TABLE`, with `--schema`/`--table` for
//! PostgreSQL, `--table` for MySQL, whose database is the URL's,
//! `--prefix` for Redis, `--dynamodb-prefix` and `--endpoint-url` (or
//! `AWS_ENDPOINT_URL`) for DynamoDB) and `--json` go before or after the
//! command. DynamoDB's credentials and region come from the standard
//! variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION`); its `list`, `purge` and `stats`
//! scan the table.
//! `IDEM_POSTGRES_URL`/`IDEM_MYSQL_URL`/`IDEM_REDIS_URL` stand for the URL
//! flags and keep a password out of `ps`; a URL's password
//! is never printed (errors, `--json`, help): it shows as `***`. `--record`
//! takes the 64 hex digits `list` prints or a unique prefix of at least 4, as
//! git takes commits (an ambiguous prefix is exit 2, listing the records it
//! matches). Scope and key are hashed as the library hashes strings; repeat
//! `--scope` for a tuple scope (`--scope payments --scope acme` is
//! `("payments", "acme")`; a record not found by scope says so). Non-string
//! parts (integers, UUIDs) cannot be typed: find the record with `list` and
//! use `--record`.
//!
//! A record of the HTTP layer is found from what its client knows:
//! `--http 'POST /orders/{id}'` (the method and the route as the router
//! matched it, not the path), `--key` (the `Idempotency-Key`'s text,
//! without its quotes) and the credentials the request carried, which the
//! layer hashes into its scope: `--header 'authorization: Bearer …'` for
//! each header its `principal_headers` names (by default `Authorization`
//! alone) in that order, `--cookie NAME=VALUE` for each of its
//! `principal_cookies`, or `--principal TEXT` for what the layer's own
//! `principal` function returned; none of them for an anonymous request.
//! The key is derived by the layer's own code
//! ([`idem::http::record_key`](crate::http::record_key),
//! [`idem::http::credential_principal`](crate::http::credential_principal)).
//! The human output of every command names the store it read and its
//! table (PostgreSQL, MySQL) or key prefix (Redis): `--table` and
//! `--prefix` have defaults, and a wrong one shows.
//!
//! Values show as the record holds them, never as a "changed shape": `--json`
//! gives the record's own JSON (`value.json`), with the escapes of what JSON
//! cannot carry as written (`{"$u128":"340…"}`, `{"$f64":"NaN"}`,
//! `{"$some":null}`, `{"$map":[[k,v],…]}`, `"$$key"`); the table renders them
//! (`340282366920938463463374607431768211455`, `NaN`, `Some(null)`,
//! `{1: …}`, `"$key"`). A stored HTTP response is also under `value.response`
//! (`status`, `headers`, `body` as `{"text": …}` or `{"base64": …}`).
//!
//! The command changes no schema and no file: it
//! never migrates; a SQLite file is opened read-only for `inspect`, `list`
//! and `stats`, its journal mode left as it is; a file that does not exist, a
//! file without idem's tables or one at another schema version, and a
//! PostgreSQL schema or MySQL database without them or at another version,
//! are refused with exit 3 and left as they were. Run the application (or
//! `PostgresStore::migrate`, `MySqlStore::migrate`, `SqliteStore::open`)
//! first. Exit codes (also in `idem --help`): 0 done, 1
//! no such record, 2 bad arguments, 3 the store cannot be reached, failed, or
//! holds no idem records, 4 the output could not be written. A reader that
//! stops early (`idem list | head -1`) is no failure: 0. Output is a table,
//! or one JSON document with `--json`.
//!
//! What each store keeps for listing: the raw key is never stored, so records
//! carry the call site's static name (`Claim::site`) and, in SQL, the claim's
//! creation time (`site` and `created_at` columns). A Redis claim keeps its time (by the claimer's clock: the claim is
//! one native `SET`, which cannot read Redis's; expiry is still Redis's `PX`)
//! and site after its fenced fields, so `--in-progress --older-than` finds
//! stuck claims there too; a completed Redis record keeps neither, its age
//! being the time since completion (its TTL less what is left); Redis Cluster
//! supports `inspect` and `forget`, not `list` or `stats`. The module
//! `idem::admin` (`Admin`, `decode_record_json`, `display_value`), with
//! `SqliteStore::open_existing`, `PostgresStore::check_schema` and
//! `MySqlStore::check_schema`, is what the command uses,
//! for tools of your own.
