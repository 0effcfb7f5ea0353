//! The SQL stores (`idem::guide::sql`, features `sqlite` and `postgres` of
//! idemkit): SQLite (feature `sqlite`), PostgreSQL (feature
//! `postgres`, with its transactional mode) and MySQL/MariaDB (feature
//! `mysql`).
//!
//! All three are built on [sqlx](https://docs.rs/sqlx) 0.8 (sqlx 0.9 needs rustc
//! 1.94, above idem's `rust-version`); a program that shares a pool or a
//! transaction with idem uses sqlx 0.8 too. idem enables no TLS backend of
//! sqlx; for `sslmode=require`, enable one on your own sqlx 0.8 dependency
//! (e.g. feature `tls-rustls`): Cargo unifies the features.
//!
//! # SQLite: the durable default for one host
//!
//! When one machine runs the service and records must survive a restart or a
//! crash, use `SqliteStore` (feature `sqlite`): no server, one file.
//!
//! ```
//! # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
//! # let dir = std::env::temp_dir().join(format!("idem-guide-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! # let path = dir.join("idem.db");
//! // "/var/lib/myapp/idem.db" in production
//! let store = idem::SqliteStore::open(&path).await?;
//! idem::install(idem::Idempotency::new(store));
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(()) }
//! ```
//!
//! - The file is created if missing and opened in WAL mode with
//!   `synchronous = FULL`: a completed record is on disk when the call returns.
//!   `SqliteStore::open_with(SqliteConnectOptions)` takes other settings (e.g.
//!   `synchronous = NORMAL`, which may lose the last records on power loss,
//!   not on a process crash).
//! - The store keeps at most 4 connections to the file, each a thread of
//!   sqlx's, reused as they are (no sqlx pool, whose pings on hand-out and
//!   return cost each statement two more hops between threads): a replay is
//!   one statement, a fresh call three.
//! - Several processes on the host may share the file; a record written by one
//!   is replayed by the next one started (see `integration/tests/all/sqlite.rs`).
//! - Expiry is judged by SQLite's clock, which is **this host's wall clock**:
//!   stepping it forward ends leases and records early, stepping it back
//!   keeps them longer. For several hosts use PostgreSQL or Redis.
//! - Try it: `cargo run --example quickstart --features sqlite -- --sqlite /tmp/idem.db`,
//!   twice: the second run replays every charge.
//!
//! # PostgreSQL
//!
//! ```no_run
//! # async fn f() -> Result<(), idem::StoreError> {
//! let store = idem::PostgresStore::connect("postgres://app@db/app").await?;
//! store.migrate().await?; // at start-up; idempotent
//! idem::install(idem::Idempotency::new(store.clone()));
//! # Ok(()) }
//! ```
//!
//! **Migrations.** `migrate()` creates the schema (if missing), the table
//! (`bytea` key, token, fingerprint and record, `timestamptz` expiry), an
//! index on the expiry, and the claim function, and records what it applied
//! in `<table>_migrations`. Running it again, or from several replicas at
//! once, is harmless: the runs take turns on an advisory lock and skip
//! applied steps. idem keeps its own version table, so it never mixes with the
//! application's `_sqlx_migrations`. The schema and table are yours to choose:
//!
//! ```no_run
//! # async fn f(url: &str) -> Result<(), idem::StoreError> {
//! let store = idem::PostgresStore::builder()
//!     .schema("billing")
//!     .table("payment_idempotency")
//!     .connect(url)
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! **One statement, one round trip per operation.** claim is one call of the
//! claim function (`<table>_claim_v4`: a key no row holds is claimed by one
//! `INSERT … ON CONFLICT (key) DO NOTHING`; any other goes to `<table>_claim`,
//! a PL/pgSQL loop: read the row; if absent or expired,
//! `INSERT … ON CONFLICT (key) DO UPDATE … WHERE expires_at <= now`; if a racing
//! claimer won, read again), complete, release and renew are one fenced
//! `UPDATE`/`DELETE` each (`WHERE key = $1 AND token = $2 AND record IS NULL
//! AND expires_at > now`). All are atomic at READ COMMITTED. A replayed
//! duplicate is one statement that only reads (no row lock, no WAL
//! flush): a plain `SELECT` of the completed row where this store saw the
//! key completed (its own completion or an earlier replay; a fixed table
//! of 16,384 keys per store, on MySQL too), else the claim, whose first
//! read answers it. Where that row has gone since (expired, forgotten),
//! the claim follows, one turn later; the `SELECT` never decides a
//! claim. Expiry is the server's `statement_timestamp()`, never the
//! application host's clock.
//!
//! **Connections.** A sqlx `PgPool` pings each connection when it goes back to
//! the pool, and by default before handing it out too. Counted on the wire
//! through a proxy (`each_step_is_one_round_trip` in `integration/tests/all/postgres.rs`):
//!
//! | how the store reaches PostgreSQL | turns per store operation (claim, renew, complete, replay, release) |
//! | --- | --- |
//! | `PostgresStore::connect(url)`: the store's own connections | 1 |
//! | `PostgresStore::from_pool(pool)`, pool with `test_before_acquire(false)` | 2 (the statement, then the release ping) |
//! | `from_pool(pool)`, sqlx's default pool options | 3 |
//!
//! So `connect` keeps dedicated `PgConnection`s (up to
//! `max_connections`, default 10) and reuses them without a health check.
//! A connection that died while idle (server restart, `idle_session_timeout`,
//! a proxy) is found out by the next statement: the store then closes every
//! idle connection and sends the step once more on a new one (each step is
//! safe to send twice: the claim recognizes its own token, a repeated
//! completion its own bytes). While the server is down every call is
//! `Error::Store` and no body runs; when it is back, the same store works
//! again without a restart. `from_pool` is there for programs that want one
//! pool for everything; the release ping adds server work and a network turn,
//! though not caller latency.
//!
//! **Purging.** Expired records are ignored by every store operation, so purging them
//! only reclaims space. A claim whose lease lapsed without a result is not
//! space but evidence: its holder may have had its effect, and the next
//! call must take it over (and ask its `reconcile`) rather than run as if
//! the key were new. So a purge keeps a lapsed claim for
//! [`LAPSED_CLAIM_KEPT`](idem_contract::store::LAPSED_CLAIM_KEPT) (a day) after its
//! lease, as Redis does. `purge_expired()` deletes the rest in batches of
//! `purge_batch` rows (default 1,000; rows locked by a running claim are
//! skipped) with 20 ms between batches, so a claim waits behind one short
//! batch at most, never behind the whole purge, and returns how many went.
//! `Admin::purge_with(&idem::admin::Purge)` paces one purge otherwise
//! (`batch(n)`, `pause(d)`; the CLI's `idem purge --batch N --pause 20ms`).
//! Run it every few minutes from one place, with
//! `idem::admin::spawn_purge`:
//!
//! ```toml
//! [dependencies]
//! idemkit = { version = "0.1", features = ["postgres"] }
//! tokio = { version = "1", features = ["full"] }
//! ```
//!
//! ```no_run
//! # fn purge(store: idem::PostgresStore) -> Result<(), idem::Error> {
//! use std::{sync::Arc, time::Duration};
//! use idem::admin::{Purge, spawn_purge};
//! let purger = spawn_purge(Arc::new(store), Duration::from_secs(300), Purge::default())?;
//! // … serve; at shutdown (or on drop) it stops:
//! drop(purger);
//! # Ok(()) }
//! ```
//!
//! **PostgreSQL and bloat.** A `DELETE` leaves dead rows that only a
//! vacuum makes reusable; between two vacuums the table and its indexes
//! grow by what was deleted. idem's table is a churn table (every call
//! inserts a row, updates it once, and a purge deletes it a TTL later),
//! and the default autovacuum trigger (20% of the table dead) lets a large
//! table carry a fifth of itself as dead rows. Tell autovacuum to visit
//! this table after each purge instead, so the space is reused by the next
//! inserts and the table stays at its live size:
//!
//! ```sql
//! ALTER TABLE idem_records SET (
//!     autovacuum_vacuum_scale_factor = 0.01,
//!     autovacuum_vacuum_threshold = 1000,
//!     autovacuum_vacuum_insert_scale_factor = 0.05,
//!     autovacuum_analyze_scale_factor = 0.02
//! );
//! ALTER TABLE idem_records_steps SET (autovacuum_vacuum_scale_factor = 0.01);
//! ```
//!
//! Measured (BENCHMARKS.md, "PostgreSQL's table under churn"): 200,000
//! live rows and about 600 calls a second, each row purged 5 s after its
//! TTL, for 7 minutes. With autovacuum on, the table grew from 54 to 64 MB
//! in the first 3 minutes and then stayed there, with these settings or
//! without them (1.01×): at that size a fifth of the table dies within one
//! `autovacuum_naptime` (1 min), so autovacuum visits every minute either
//! way. The settings matter where a fifth of the table is more than a
//! minute's churn (millions of rows), and autovacuum itself always does: a
//! server with it off kept every dead row (142,000 after 5 minutes), and
//! the purge's batches slowed as they stepped over them.
//!
//! A lower `fillfactor` does not help here: it makes room for updates that
//! change no indexed column (HOT updates), and a completion changes
//! `expires_at`, which is indexed. idem does not set these itself (they
//! are the operator's, and `migrate` never rewrites a table's storage
//! parameters). Time partitions dropped whole would replace the `DELETE`
//! altogether, but a record's partition would follow its TTL, which each
//! call chooses: not done.
//!
//! A plain `DELETE … WHERE expires_at <= now()` (from `pg_cron`, say) is
//! not a substitute: it would drop the lapsed claims and the standing
//! tombstones that `purge_expired` keeps (it empties a tombstoned record's
//! value instead), and leave the expired calls' steps.
//!
//! # Transactional mode: the effect and the record commit together
//!
//! When the body's effect is a write to the same database, run the call
//! inside your transaction: the claim, the body's writes and the completed
//! record commit together, or none of them does.
//!
//! ```toml
//! [dependencies]
//! idemkit = { version = "0.1", features = ["postgres"] }
//! sqlx = { version = "0.8", default-features = false, features = ["runtime-tokio", "postgres"] }
//! serde = { version = "1", features = ["derive"] }
//! # AppError needs `impl From<idem::Error>` and, for the `?` on the
//! # queries, `impl From<sqlx::Error>`.
//! ```
//!
//! ```no_run
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Serialize, Deserialize)] struct Order { id: i64, sku: String }
//! # #[derive(Serialize, Deserialize)] struct NewOrder { order_id: String, sku: String }
//! # #[derive(Debug)] enum AppError { Idem(idem::Error), Db(sqlx::Error) }
//! # impl From<idem::Error> for AppError { fn from(e: idem::Error) -> Self { AppError::Idem(e) } }
//! # impl From<sqlx::Error> for AppError { fn from(e: sqlx::Error) -> Self { AppError::Db(e) } }
//! # async fn place(pool: sqlx::PgPool, store: idem::PostgresStore, idem: idem::Idempotency, req: NewOrder) -> Result<(), AppError> {
//! let mut tx = pool.begin().await?;
//! let order: Result<Order, AppError> = store
//!     .in_transaction(&mut tx, idem.call("orders", &req.order_id).fingerprint(&req))
//!     .run(async |conn| {
//!         // `conn` is the transaction's connection.
//!         let id: i64 = sqlx::query_scalar("INSERT INTO orders (sku) VALUES ($1) RETURNING id")
//!             .bind(&req.sku)
//!             .fetch_one(&mut *conn)
//!             .await?;
//!         Ok(Order { id, sku: req.sku.clone() })
//!     })
//!     .await;
//! match &order {
//!     Ok(_) => tx.commit().await?,    // order row + record
//!     Err(_) => tx.rollback().await?, // neither
//! }
//! # Ok(()) }
//! ```
//!
//! - A crash before the commit (the process killed between the insert and
//!   the commit) rolls back everything, the claim included: no order row, no
//!   record, and the retry runs at once, with no lease to wait out
//!   (`integration/tests/all/postgres_tx.rs` kills a child process there).
//! - A duplicate replays the committed record (also through the plain store).
//!   While the transaction is open its claim row is locked: a concurrent
//!   duplicate waits for the commit, then replays (or, after a rollback,
//!   claims). Keep these transactions short.
//! - Nobody can take over a claim whose transaction is alive, so the lease is
//!   neither renewed nor checked in this mode.
//! - Expects READ COMMITTED (PostgreSQL's default); under REPEATABLE READ a
//!   race with another claimer is a serialization error (`Error::Store`):
//!   retry the transaction.
//! - The handle's local replay cache is not used in this mode.
//! - For `#[idempotent]` fns and queue handlers, `store.tx_handle(tx)` is an
//!   `Idempotency` handle on the transaction (`idem::postgres::TxHandle`,
//!   `idem::mysql::TxHandle`): pass it as `store = tx`, write through
//!   `tx.conn()`, then `tx.commit()` or `tx.rollback()`, as in
//!   [queues](super::queues).
//!
//! # MySQL and MariaDB
//!
//! `MySqlStore` (feature `mysql`) keeps the records in MySQL 8.0+ or MariaDB
//! 10.6+: `idem::MySqlStore::connect("mysql://app@db/app").await?`, then
//! `store.migrate().await?` at start-up (idempotent; replicas take turns on
//! `GET_LOCK`), or `MySqlStore::from_pool(pool)` on your `MySqlPool`;
//! `MySqlStore::builder()` sets the database, table and connections, as for
//! PostgreSQL.
//!
//! - **One round trip per store operation**, counted through a proxy
//!   (`integration/tests/all/mysql.rs`, `round_trips.rs`): claim, complete, release,
//!   renew and saving a step are 1 turn each on the store's own connections,
//!   2 on a pool with `test_before_acquire(false)`, 3 on sqlx's default pool;
//!   a fresh call is 2 turns, a replay 1 (a `SELECT` of the completed row
//!   where the store saw the key completed, as on PostgreSQL, else the
//!   procedure).
//! - **The claim is a stored procedure** (`<table>_claim_v5`; replicas of
//!   earlier releases call `<table>_claim` and `<table>_claim_v4`, which stay) returning one
//!   result set: a plain read (a replay costs an index lookup), where it
//!   finds no row one plain `INSERT` (a fresh key), else, in a
//!   transaction of its own, `INSERT … ON DUPLICATE KEY UPDATE` that inserts
//!   the claim or locks the one row holding the key, the row read under that
//!   lock, taken over only if expired. No `SELECT … FOR UPDATE` on a missing
//!   key first: under REPEATABLE READ its gap lock deadlocks two claimers.
//!   Complete, release and renew are one fenced `UPDATE`/`DELETE` each.
//! - **Expiry is the server's** `UTC_TIMESTAMP(6)` in `DATETIME(6)` columns,
//!   whatever the session's `time_zone`; `purge_expired()` deletes expired
//!   rows in batches.
//! - **MySQL 8 and MariaDB** run the same migration: the statements keep to
//!   what both accept (no `RETURNING`, which only MariaDB has; no
//!   `INSERT … AS new` alias, which only MySQL has; `LOCK IN SHARE MODE`).
//!   MySQL with binary logging needs `log_bin_trust_function_creators = 1`
//!   (or `SUPER`) for `migrate` to create the procedure. Tested on MariaDB
//!   10.11; the rustdoc of `MySqlStore` lists the differences.
//! - **Transactional mode**: `store.in_transaction(&mut tx, idem.call(…)).run(async |conn| …)`
//!   claims and completes inside your `sqlx::Transaction<MySql>`, as for
//!   PostgreSQL: the effect and the record commit together, and a worker
//!   SIGKILLed before its commit leaves neither (`integration/tests/all/mysql_tx.rs`). Under
//!   REPEATABLE READ the claim of an existing key also locks the gap before
//!   its row until the commit (InnoDB's duplicate-key check): keep those
//!   transactions short. `store.tx_handle(tx)` gives the
//!   `idem::mysql::TxHandle` for `#[idempotent(store = tx)]`, as on
//!   PostgreSQL (`?` placeholders in the body's own SQL).
//! - **Operating**: `idem --mysql URL` (or `IDEM_MYSQL_URL`) inspects,
//!   lists, forgets, purges and counts its records, as for the other stores
//!   ([operations](https://docs.rs/idemkit/latest/idem/guide/operations/index.html)); `--table` names the table, the
//!   database is the URL's.
