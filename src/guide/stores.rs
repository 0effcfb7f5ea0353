//! Choosing a store, what every store guarantees, and your own.
//!
//! Each store type is at `idem::`; its module ([`memory`](crate::memory),
//! [`redis`](crate::redis), [`postgres`](crate::postgres),
//! [`sqlite`](crate::sqlite), [`mysql`](crate::mysql),
//! [`dynamodb`](crate::dynamodb)) holds the rest: builders, defaults, the
//! transactional mode.
//!
//! | type | feature | use it for | guide |
//! | --- | --- | --- | --- |
//! | [`MemoryStore`](crate::MemoryStore) | `memory` (default) | one process, tests, the zero-setup default | below |
//! | [`SqliteStore`](crate::SqliteStore) | `sqlite` | one host whose records must survive restarts, no server | [`sql`](super::sql) |
//! | [`RedisStore`](crate::RedisStore) | `redis` | several replicas sharing a Redis or a Redis Cluster | [`redis`](super::redis) |
//! | [`PostgresStore`](crate::PostgresStore) | `postgres` | several replicas, durable records, and the transactional mode | [`sql`](super::sql) |
//! | [`MySqlStore`](crate::MySqlStore) | `mysql` | several replicas on the MySQL 8 or MariaDB 10.6+ they already run | [`sql`](super::sql#mysql-and-mariadb) |
//! | [`DynamoDbStore`](crate::DynamoDbStore) | `dynamodb` | services and Lambdas on AWS, no server to run | [below](#dynamodb) |
//!
//! **Which store when.** Put the records where the service already keeps its
//! state; add a server only for idempotency when none of these fits.
//!
//! | your service | pick | because |
//! | --- | --- | --- |
//! | one process; tests; a demo | `MemoryStore` | nothing to run; records go with the process |
//! | one host, records must outlive a restart | `SqliteStore` | one file, no server; expiry by this host's clock |
//! | several replicas and a Redis | `RedisStore` | the fewest microseconds per call; durable as far as your Redis is (AOF, replicas with `wait_for_replicas`) |
//! | several replicas on PostgreSQL | `PostgresStore` | durable; with effects in the same database, the transactional mode commits effect and record together |
//! | several replicas on MySQL or MariaDB (RDS, Aurora MySQL) | `MySqlStore` | durable, in the database you run, no Redis to add; not on Vitess/PlanetScale (no stored procedures) |
//! | AWS Lambda, or services on AWS without a database of their own | `DynamoDbStore` | on-demand, nothing to run; one request per claim and per replay; expiry by the callers' clocks |
//!
//! # What every store keeps
//!
//! Completion is fenced by a random 128-bit token drawn per claim, so a
//! holder whose lease ran out and was taken over gets `Error::LeaseLost`
//! and cannot overwrite; lease and TTL are judged by the store's clock;
//! keys are stored hashed (32 bytes), so any key bytes are safe. A holder
//! whose lease ran out is refused at completion even when nobody took
//! over yet: the rule is "succeeds only while the claim is held", which a
//! TTL-based store such as Redis can keep exactly.
//!
//! # DynamoDB
//!
//! [`DynamoDbStore`](crate::DynamoDbStore) takes the
//! `aws_sdk_dynamodb::Client` you build (from `aws-config`, with your
//! region and credentials) and a table name;
//! [`create_table`](crate::DynamoDbStore::create_table) makes an on-demand
//! table with DynamoDB's TTL sweep enabled, or create it with your
//! infrastructure code (string keys `pk` and `sk`, TTL attribute `ttl`;
//! other names with `with_key_attributes` and `with_ttl_attribute`, a
//! shared table with `with_prefix`).
//!
//! | a call | requests |
//! | --- | --- |
//! | fresh | the claim (`UpdateItem`) and the completion (`UpdateItem`) |
//! | a replay, in progress, another payload | the claim alone: its failed condition returns the item (`ALL_OLD`) |
//! | a takeover of a lapsed claim, a rerun's replacement | the claim alone |
//! | a resumed call with saved steps | the claim and one `Query` |
//! | each step saved | one `TransactWriteItems` (fence and step) |
//!
//! Capacity, by DynamoDB's rules (1 WCU per KB written, rounded up; a
//! failed condition consumes write units by the item's size; returning
//! the item with it consumes no read units): a fresh call whose result is
//! under a kilobyte consumes 2 WCU, a replay, a mismatch or a call in
//! progress 1 WCU, and no call reads. A larger result costs more on every
//! replay too (4 WCU at 3 KB). These are the requests and the units of AWS
//! Powertools' hand-written protocol, measured side by side in
//! BENCHMARKS.md ("DynamoDB").
//!
//! DynamoDB has no clock in a condition: leases and TTLs are judged by the
//! calling hosts' clocks, checked in every condition and read (its TTL
//! sweep runs late). Keep the clocks synchronised; the store's skew
//! allowance (`with_clock_skew`, 50 ms) ends a holder's usable lease that
//! much early, so a holder's last fenced write precedes any takeover while
//! clocks differ by less. DynamoDB keeps items of up to 400 KB: a larger
//! record is refused at completion (`StoreErrorKind::Unsupported`, nothing
//! written, the claim lapses); give the handle
//! `max_record_bytes(idem::dynamodb::MAX_RECORD_BYTES)` to settle such
//! results as not stored instead. `idem list`, `purge` and `stats` scan
//! the table.
//!
//! # The memory store
//!
//! [`MemoryStore`](crate::MemoryStore) has 64 shards and is bounded
//! ([`with_max_records`](crate::MemoryStore::with_max_records), one million
//! by default): expired records are evicted first; a shard still full of
//! live records (completed within their TTL or tombstone, claims, lapsed
//! claims kept a day) refuses new claims with `Error::Store` (fail closed),
//! because an evicted record's duplicate would run its body again.
//! [`evict_live`](crate::MemoryStore::evict_live) asks for the lossy
//! alternative (the completed records nearest expiry go, counted in
//! `idem_memory_evicted_total`).
//!
//! # The local replay cache
//!
//! [`IdempotencyBuilder::local_cache`](crate::IdempotencyBuilder::local_cache)
//! keeps completed records in the process, so a replay that hits costs no
//! round trip:
//!
//! ```
//! let idem = idem::Idempotency::builder(idem::MemoryStore::new())
//!     .local_cache(10_000)
//!     .build();
//! # let _ = idem;
//! ```
//!
//! A record is kept no longer than the store said it lives (measured from
//! before the request left), and in-progress states are never cached.
//!
//! # Your own store
//!
//! [`Store`](crate::Store) is a small public trait (keys, tokens and
//! bytes: claim, complete, release, renew, `save_step` and `forget`, each
//! one atomic round trip), with the types it speaks in
//! [`store`](crate::store). Every backend passes one conformance suite,
//! the `idem-conformance` crate:
//! `idem_conformance::suite!(async { Idempotency::new(MyStore::new()) });`
//! in a test file of yours runs every case against your store.
//!
//! A store's crate depends on the store contract alone, the
//! [`idem-contract`](https://docs.rs/idem-contract) crate: the same trait
//! and types (`idem::Store` is `idem_contract::Store`), without the
//! runtime, tokio, `metrics` or `arc-swap`; `idemkit` and
//! `idem-conformance` are only its dev-dependencies.
