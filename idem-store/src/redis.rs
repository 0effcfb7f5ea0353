//! Records in Redis: one round trip per operation, expiry by Redis itself.
//!
//! One string per record, under `prefix` + the 32 bytes of the hashed key:
//! `P` + token (16 bytes) + fingerprint (32) while in progress, `D` +
//! fingerprint (32) + TTL + expiry (8 bytes each, milliseconds,
//! big-endian; the expiry by the server's clock, see `clock.rs`) + record
//! once completed (`C` without the expiry before; still read, see
//! `value.rs`). The key's `PX` is the lease plus `KEPT_AFTER_LEASE_MS` (a
//! day) or the TTL, so Redis's clock decides expiry, and a lapsed claim
//! stays to be taken over (`took_over`) instead of vanishing. Every step touches
//! one key, so Redis Cluster routes it. A call's recovery points
//! (`idem::step`) live in a hash of their own in the record's hash slot
//! (see `steps.rs`): the claim's pipeline reads it, a save writes it. A
//! tombstone is a marker key of its own in that slot (see `tombstone.rs`).

mod admin;
mod builder;
mod cas;
mod claim;
mod clock;
mod complete;
mod conn;
mod eviction;
mod native;
mod replicas;
mod rerun;
mod scripts;
mod sentinel;
mod slot;
mod steps;
mod tombstone;
mod value;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use idem_contract::key::RecordKey;
use idem_contract::store::{Claim, ClaimOutcome, Fence, Retention, StepId, Token, async_trait};
use idem_contract::{Store, StoreError};
use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;

use replicas::Replicas;
use scripts::Scripts;

pub use builder::RedisStoreBuilder;

/// Records in Redis or a Redis Cluster, shared by every replica of a
/// service.
///
/// Claim, complete, release and renew are each one round trip, atomic,
/// with no window between a read and a write: the claim is a native
/// `SET NX PX GET` (so Redis 7.0 or later, or Valkey), and the fenced
/// operations are each one `EVALSHA` (falling back to
/// `EVAL` once if the script cache was flushed). On a server with native
/// compare-and-set (Valkey ≥ 8.1, Redis ≥ 8.4; detected on connect and
/// after a failed connection) completion, renewal and release are native
/// commands instead (`SET … IFEQ … GET`, `DELIFEQ` or `DELEX`), with the
/// same fencing; saving a step stays a script. A call that keeps a
/// tombstone ([`Call::tombstone`](idem_core::Call::tombstone)) claims and
/// completes by script instead, still one round trip each: the tombstone
/// is a small key of its own beside the record (136 bytes, see
/// BENCHMARKS.md). A replayed duplicate is one round trip of one
/// command, behind a local cache too (the record's lifetime is read from
/// its value, written by the server's clock: see
/// [`idem::guide::redis`](https://docs.rs/idemkit/latest/idem/guide/redis/index.html)):
/// a `GET` where this store saw the key completed, which costs the server
/// less than the claim and answers the same, else the claim. Expiry is
/// Redis's own `PX`; a claim's key outlives its lease
/// by a day, so a claim that finds a lapsed one takes it over (by a
/// script, one more trip, only then) and reports `took_over`. The
/// connection is one
/// multiplexed, reconnecting connection (`ConnectionManager`, or the
/// cluster client); an unreachable Redis answers within the response
/// timeout with `Error::Store`, and calls succeed again once it is back.
///
/// ```no_run
/// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
/// let store = idem::RedisStore::connect("redis://127.0.0.1:6379").await?;
/// let idem = idem::Idempotency::new(store);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    conn: Conn,
    prefix: Vec<u8>,
    /// `slot::prefix_crc(prefix)`: a record key's slot then reads only its
    /// 32 hashed bytes (see `steps::steps_key`).
    prefix_crc: Option<slot::PrefixCrc>,
    allow_eviction: bool,
    /// Set when a connection failed: the server after a reconnect may be
    /// another (a failover, a restart with other settings), so the next
    /// claim reads its eviction policy again first.
    recheck: Arc<AtomicBool>,
    replicas: Option<Replicas>,
    scripts: Scripts,
    /// The server's native compare-and-set, detected on connect and after
    /// a failed connection, and the values of the claims held with it.
    native: Arc<native::Native>,
    /// The keys last seen completed, whose replays read by `GET`.
    completed: Arc<crate::completed::Completed>,
    /// The server's clock, which a completed value's expiry is written
    /// and read by (see `clock.rs`).
    clock: Arc<clock::ServerClock>,
}

/// Its settings; not its connection or the keys it saw completed.
impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &String::from_utf8_lossy(&self.prefix))
            .field("allow_eviction", &self.allow_eviction)
            .field("replicas", &self.replicas)
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(Arc<sentinel::Followed>),
}

impl RedisStore {
    /// Connects to one Redis server with default settings: prefix `idem:`,
    /// connection and response timeouts of 1 s.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::RedisStore::connect("redis://127.0.0.1:6379").await?;
    /// let idem = idem::Idempotency::new(store);
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder().connect(url).await
    }

    /// Settings for a store: prefix, timeouts, cluster.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// use std::time::Duration;
    /// let store = idem::RedisStore::builder()
    ///     .prefix("billing:idem:")
    ///     .connection_timeout(Duration::from_millis(500))
    ///     .response_timeout(Duration::from_millis(250))
    ///     .connect("redis://127.0.0.1:6379")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn builder() -> RedisStoreBuilder {
        RedisStoreBuilder::default()
    }

    /// The Redis key of a record: the prefix, then the 32 bytes of the
    /// hashed scope and key (never the raw key). For inspecting or
    /// deleting a record by hand.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// use idem::key::RecordKey;
    /// let store = idem::RedisStore::connect("redis://127.0.0.1:6379").await?;
    /// let key = store.redis_key(&RecordKey::new("payments", "order-1"));
    /// assert_eq!(key.len(), "idem:".len() + 32);
    /// # Ok(()) }
    /// ```
    pub fn redis_key(&self, key: &RecordKey) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.prefix.len() + 32);
        out.extend_from_slice(&self.prefix);
        out.extend_from_slice(key.as_bytes());
        out
    }
}

#[async_trait]
impl Store for RedisStore {
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        self.claim_key(key, claim).await
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        self.complete_fenced(key, token, record, kept, false).await
    }

    async fn complete_again(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        self.complete_fenced(key, token, record, kept, true).await
    }

    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        self.release_fenced(key, token).await
    }

    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        self.renew_fenced(key, token, lease).await
    }

    async fn save_step(
        &self,
        key: &RecordKey,
        token: Token,
        step: StepId,
        value: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        self.save_step_fenced(key, token, step, value, ttl).await
    }

    fn records_steps(&self) -> bool {
        true
    }

    /// One `DEL` of the record's key and its steps' hash.
    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        // The steps' hash and the tombstone share the record's slot: one
        // command, routed.
        pipe.cmd("DEL")
            .arg(self.redis_key(key))
            .arg(self.steps_key(key))
            .arg(self.tombstone_key(key))
            .ignore();
        self.query::<()>(&pipe).await
    }
}
