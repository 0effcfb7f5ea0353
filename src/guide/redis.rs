//! The Redis store (feature `redis`) and running Redis for idem.
//!
//! For several replicas of a service sharing one Redis or a Redis Cluster:
//!
//! ```no_run
//! # async fn f() -> Result<(), idem::StoreError> {
//! let store = idem::RedisStore::connect("redis://127.0.0.1:6379").await?;
//! // or: RedisStore::builder().prefix("billing:idem:").response_timeout(d).connect(url)
//! // or: RedisStore::builder().connect_cluster(["redis://10.0.0.1:7000", …])
//! idem::install(idem::Idempotency::new(store));
//! # Ok(()) }
//! ```
//!
//! - **One round trip per store operation.** The claim is one native `SET … NX PX GET`
//!   (atomic: it claims a free key or answers the held value); complete,
//!   release and renew each compare the claim's token, so each is one Lua
//!   script call (`EVALSHA`, reloaded once if the script cache was flushed)
//!   or, with native compare-and-set, one command. There is no window
//!   between a read and a write. A replayed duplicate is one round trip of
//!   one command: a `GET` where this store saw the key completed (its own
//!   completion, or an earlier replay; a fixed table of 16,384 keys per
//!   store), which costs the server less than the claim and answers the
//!   same, else the claim itself. A key the store saw completed but whose
//!   record has gone since (expired, forgotten) is then claimed, one trip
//!   later; the `GET` never decides a claim. Needs Redis 7.0 or later (or
//!   Valkey), the first to accept `NX` with `GET`. `integration/tests/all/round_trips.rs` counts the
//!   turns on the wire through a proxy: fresh key 2, replay 1, in-progress
//!   answer 1, release 1, a local-cache hit 0. Commands per call (`INFO
//!   commandstats`, `integration/tests/all/valkey.rs`): fresh 2 (`SET … NX GET`, the
//!   completion), replay 1 (`GET`, or `SET … NX GET` on another
//!   replica), a replay that fills a local cache too: how long the cache
//!   may keep the record is read from the completed value's expiry, which
//!   is written and read by the server's clock (its `TIME`, read on
//!   connect and after a lost connection, counted on by each host's
//!   monotonic clock, so two hosts' wall clocks never meet), less 3% for
//!   drift. Only that cache's lifetime rests on it; Redis's `PX` expires
//!   the record.
//!   A claim reads saved steps (`idem::step`) only where a released or
//!   lapsed claim left them, by a script after it: that claim takes two
//!   turns. The common hand-written pattern (GET, then SET NX, then SET)
//!   takes three trips and races between them.
//! - **Expiry by Redis.** The key's `PX` is the lease plus a day while the
//!   call runs, and the TTL once it completes. A claim whose holder vanished
//!   stays a day after its lease, so the next claim takes it over (by a
//!   script that judges the lapse by Redis's clock, the `PTTL` less that
//!   day: one more trip, only then) and says so (`took_over`: a
//!   `reconcile` is asked). Which claims ask the script is read from the
//!   claim's value (its time and lease, against this host's clock): a
//!   takeover may wait for the holder's clock's lead on this host's, never
//!   a whole lease, and `Retry-After` is that estimate. The fenced steps
//!   refuse a lapsed claim as expired; with native compare-and-set they
//!   are native while the lease is surely live by the host's clock (from
//!   before the claim was sent, less 3%) and scripts after it.
//! - **Fenced.** Completion, release and renewal check the claim's 128-bit
//!   token inside their script; a holder whose lease expired and was taken over
//!   gets `Error::LeaseLost` and cannot overwrite.
//! - **Keys.** `prefix` (default `idem:`) followed by the 32 bytes of the
//!   SHA-256 of scope and key: fixed length, any key bytes are safe, the raw
//!   key is never stored. One key per store operation, so Redis Cluster routes every
//!   call (`integration/tests/all/redis_cluster.rs` runs the conformance suite on a private
//!   3-master cluster).
//! - **Compact.** One string per record: `P` + token + fingerprint + the
//!   claim's time and lease + the call site while in progress, `D` +
//!   fingerprint + TTL + expiry + record once completed (earlier versions
//!   wrote `C` + fingerprint + TTL + record, which is still read, so
//!   replicas of both versions share one Redis during a rolling
//!   deployment: an earlier replica answers a `D` record `Error::Store`,
//!   and runs nothing). A record holding a 200-byte value takes under 512 bytes (`MEMORY USAGE`, asserted and
//!   printed by `keys_are_prefixed_hashed_and_expire_by_px` in
//!   `integration/tests/all/redis.rs`; BENCHMARKS.md has the sizes per store).
//! - **Faults.** One multiplexed, reconnecting connection
//!   (`ConnectionManager`; the cluster client for a cluster), with a
//!   connection and a response timeout of 1 s by default. While Redis is
//!   down every call answers `Error::Store` (the slowest in 580 ms with
//!   timeouts of 300 ms, under 8 concurrent workers, `integration/tests/all/redis_fault.rs`),
//!   no body runs without a won claim, and the same store works again once
//!   Redis is back.
//! - Try it: `cargo run -p idem-integration --example redis_service` (reads
//!   `REDIS_URL`, default the loopback Redis).
//!
//! # Running Redis for idem
//!
//! Three ways a Redis deployment loses records and lets a duplicate run, and
//! what guards each:
//!
//! | risk | what guards it | what idem does |
//! | --- | --- | --- |
//! | **eviction**: under `maxmemory`, any policy but `noeviction` may delete keys, and every idem key has a TTL (so even `volatile-*` policies, the default on several managed services, evict them) | `maxmemory-policy noeviction`; size the server for the TTL | on connect, reads the policy (`CONFIG GET`, or `INFO memory` where `CONFIG` is disabled; every primary of a cluster) and refuses to connect unless it is `noeviction`, naming the setting; `RedisStore::builder().allow_eviction()` accepts the risk with a `tracing` warning. At `maxmemory` with `noeviction`, Redis refuses writes: new keys fail closed, duplicates of completed calls are still replayed |
//! | **a restart**: Redis keeps data in memory | persistence: AOF with `appendfsync everysec` loses at most a second of records on a crash (`always` loses none and costs a disk write per store operation); RDB snapshots alone lose minutes | nothing to configure in idem; a lost claim lets a retry run again, a lost record lets a duplicate run again |
//! | **a failover**: replication is asynchronous, so a claim or record the primary acknowledged may not have reached the replica that takes over | `RedisStore::builder().wait_for_replicas(n, timeout)`: `WAIT n timeout` pipelined after every claim and completion (same round trip); fewer acknowledgements are `Error::Store` and the body does not run on an unacknowledged claim. Keep at least `n + 1` replicas, or after a failover no step can be acknowledged (idem then fails closed, as tested) | follows the new primary through Sentinel: `RedisStore::builder().connect_sentinel(["redis://sentinel-1:26379", …], "service")`; after a failed step the store asks the sentinels again |
//!
//! A failover under load, on loopback (`integration/tests/all/redis_failover.rs`):
//! a primary with two replicas and three sentinels (`down-after-milliseconds
//! 500`), eight workers racing duplicate calls over 3,000 keys (24,000 calls),
//! the primary SIGKILLed a third of the way in:
//!
//! | mode | keys whose body ran twice | calls that failed with `Error::Store` | working again after the kill |
//! | --- | ---: | ---: | ---: |
//! | without `wait_for_replicas` | 0 | 48–56 | 2.37–2.54 s |
//! | `wait_for_replicas(1, 200ms)` | 0 | 48 | 2.05 s |
//!
//! On loopback the replicas were never more than a write behind, so no
//! acknowledged claim was lost either way; the window `WAIT` closes is the
//! replication lag, which across a network, or under load, is larger. What
//! `WAIT` guarantees is tested separately: with no replica to acknowledge, a
//! claim fails closed and the body does not run
//! (`integration/tests/all/redis_production.rs`). **Cluster**: each key lives on one
//! primary, so these settings apply per primary; the eviction check asks
//! every one. The eviction policy is read at connect and again before the
//! first claim after a lost connection, so a server that restarts or fails
//! over with an evicting policy is refused (`the_policy_is_read_again_after_a_reconnect`);
//! a policy changed with `CONFIG SET` on a live server is not noticed.
