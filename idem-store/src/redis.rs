//! Records in Redis: one round trip per step, expiry by Redis itself.
//!
//! One string per record, under `prefix` + the 32 bytes of the hashed key:
//! `P` + token (16 bytes) + fingerprint (32) while in progress, `C` +
//! fingerprint (32) + TTL (8 bytes, milliseconds, big-endian) + record once
//! completed. The key's `PX` is the lease or the TTL, so Redis's clock
//! decides expiry and an expired claim simply vanishes. Every step touches
//! one key, so Redis Cluster routes it. A call's recovery points
//! (`idem::step`) live in a hash of their own in the record's hash slot
//! (see `steps.rs`): the claim's pipeline reads it, a save writes it.

mod admin;
mod eviction;
mod replicas;
mod sentinel;
mod steps;

use replicas::Replicas;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use idem_core::fingerprint::Fingerprint;
use idem_core::key::RecordKey;
use idem_core::store::{Claim, ClaimOutcome, Fence, StepId, Token, async_trait};
use idem_core::{Store, StoreError};
use redis::Script;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;

// The fenced steps compare the claim's token inside Redis, so they are Lua;
// the claim needs no comparison and is native (see `Store::claim` below).
// Each answers 1 when the claim was ours, 0 when another caller holds or
// completed the key, -1 when the key is gone (our claim expired).
//
// A completion is sent once more after a lost connection (ARGV[5] = '1'):
// the first may have landed, and then the value is completed with exactly
// our TTL and record. Another holder's identical bytes would answer 1 as
// well, which tells the caller nothing false: that same value is replayed.
const COMPLETE: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
if string.sub(v, 1, 17) == 'P' .. ARGV[1] then
  redis.call('SET', KEYS[1], 'C' .. string.sub(v, 18, 49) .. ARGV[4] .. ARGV[2], 'PX', ARGV[3])
  return 1
end
if ARGV[5] == '1' and string.sub(v, 1, 1) == 'C' and string.sub(v, 34) == ARGV[4] .. ARGV[2] then
  return 1
end
return 0
";

const RELEASE: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
if string.sub(v, 1, 17) == 'P' .. ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
";

const RENEW: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
if string.sub(v, 1, 17) == 'P' .. ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
";

/// Records in Redis or a Redis Cluster, shared by every replica of a
/// service.
///
/// Claim, complete, release and renew are each one round trip, atomic,
/// with no window between a read and a write: the claim is a native
/// `SET NX PX GET` (so Redis 7.0 or later, or Valkey) pipelined after a
/// `PTTL`, and the fenced steps are each one `EVALSHA` (falling back to
/// `EVAL` once if the script cache was flushed). A replayed duplicate is
/// one round trip. Expiry is Redis's own `PX`. The connection is one
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
    allow_eviction: bool,
    /// Set when a connection failed: the server after a reconnect may be
    /// another (a failover, a restart with other settings), so the next
    /// claim reads its eviction policy again first.
    recheck: Arc<AtomicBool>,
    replicas: Option<Replicas>,
    scripts: Scripts,
}

#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(Arc<sentinel::Followed>),
}

#[derive(Clone)]
struct Scripts {
    complete: Script,
    release: Script,
    renew: Script,
    save_step: Script,
}

/// Settings of a [`RedisStore`]: key prefix and timeouts.
///
/// ```no_run
/// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
/// use std::time::Duration;
/// let store = idem::RedisStore::builder()
///     .prefix("billing:idem:")
///     .response_timeout(Duration::from_millis(250))
///     .connect("redis://127.0.0.1:6379")
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RedisStoreBuilder {
    prefix: Vec<u8>,
    connection_timeout: Duration,
    response_timeout: Duration,
    allow_eviction: bool,
    replicas: Option<Replicas>,
}

impl Default for RedisStoreBuilder {
    fn default() -> Self {
        Self {
            prefix: b"idem:".to_vec(),
            connection_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            allow_eviction: false,
            replicas: None,
        }
    }
}

fn store_error(err: redis::RedisError) -> StoreError {
    StoreError::new("redis", err)
}

impl RedisStoreBuilder {
    /// The prefix of every key this store writes (default `idem:`). Give
    /// each service or environment sharing a Redis its own.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::RedisStore::builder()
    ///     .prefix("orders:idem:")
    ///     .connect("redis://127.0.0.1:6379")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn prefix(mut self, prefix: impl AsRef<[u8]>) -> Self {
        self.prefix = prefix.as_ref().to_vec();
        self
    }

    /// How long to wait for a connection, at start and on every
    /// reconnection (default 1 s).
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// use std::time::Duration;
    /// let store = idem::RedisStore::builder()
    ///     .connection_timeout(Duration::from_millis(200))
    ///     .connect("redis://127.0.0.1:6379")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// How long to wait for an answer before failing with `Error::Store`
    /// (default 1 s). A call whose claim times out does not run its body.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// use std::time::Duration;
    /// let store = idem::RedisStore::builder()
    ///     .response_timeout(Duration::from_millis(250))
    ///     .connect("redis://127.0.0.1:6379")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Accepts a server whose `maxmemory-policy` may evict idem's keys
    /// (anything but `noeviction`), or whose policy cannot be read, with a
    /// `tracing` warning instead of refusing to connect. Every idem key has
    /// a TTL, so under memory pressure such a server may delete claims and
    /// records, and a retry then runs the body again: use it only where the
    /// server's memory is known to suffice.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::RedisStore::builder()
    ///     .allow_eviction()
    ///     .connect("redis://127.0.0.1:6379")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn allow_eviction(mut self) -> Self {
        self.allow_eviction = true;
        self
    }

    /// Makes every claim and completion wait until `count` replicas have
    /// acknowledged it (`WAIT count timeout`, pipelined after the write: no
    /// extra round trip, but each step now lasts as long as replication
    /// takes, typically well under a millisecond on a LAN, up to `timeout`
    /// when a replica lags). Too few acknowledgements are `Error::Store`,
    /// and the body does not run on a claim that was not acknowledged. With
    /// this, a claim or record acknowledged to a caller survives a failover
    /// to any of those replicas. Completions are then sent as `EVAL` with
    /// the script's text (a pipeline cannot fall back from `EVALSHA`).
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// use std::time::Duration;
    /// let store = idem::RedisStore::builder()
    ///     .wait_for_replicas(1, Duration::from_millis(100))
    ///     .connect("redis://127.0.0.1:6379")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn wait_for_replicas(mut self, count: u32, timeout: Duration) -> Self {
        self.replicas = Some(Replicas { count, timeout });
        self
    }

    /// Connects to one Redis server (`redis://…`, with user, password and
    /// database number as the `redis` crate reads them). Fails with a
    /// [`StoreError`] if the server does not answer within the connection
    /// timeout.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::RedisStore::builder()
    ///     .connect("redis://:secret@127.0.0.1:6379/2")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(self, url: &str) -> Result<RedisStore, StoreError> {
        let client = redis::Client::open(url).map_err(store_error)?;
        let manager = ConnectionManager::new_with_config(client, self.manager_config())
            .await
            .map_err(store_error)?;
        let store = self.build(Conn::Single(manager));
        store.check_eviction().await?;
        Ok(store)
    }

    /// Connects to a Redis Cluster through any of its nodes; the client
    /// learns the slot map and follows `MOVED`/`ASK` redirections. Every
    /// step touches one key, so each call goes to one master.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::RedisStore::builder()
    ///     .connect_cluster(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"])
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_cluster<I, U>(self, nodes: I) -> Result<RedisStore, StoreError>
    where
        I: IntoIterator<Item = U>,
        U: redis::IntoConnectionInfo,
    {
        let client = redis::cluster::ClusterClient::builder(nodes)
            .connection_timeout(self.connection_timeout)
            .response_timeout(self.response_timeout)
            .retries(2)
            .build()
            .map_err(store_error)?;
        let conn = client.get_async_connection().await.map_err(store_error)?;
        let store = self.build(Conn::Cluster(conn));
        store.check_eviction().await?;
        Ok(store)
    }

    /// Connects to the primary that Redis Sentinel names for `service`
    /// (asking the sentinels at `sentinels`, `redis://host:26379` each),
    /// and follows failovers: after a step fails, the store asks the
    /// sentinels again and moves to the new primary. A step in flight
    /// during a failover fails with `Error::Store` (no body runs on an
    /// unconfirmed claim); pair with
    /// [`wait_for_replicas`](Self::wait_for_replicas) so that what was
    /// acknowledged before the failover survives it.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::RedisStore::builder()
    ///     .wait_for_replicas(1, std::time::Duration::from_millis(100))
    ///     .connect_sentinel(["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"], "idem")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_sentinel<I, U>(
        self,
        sentinels: I,
        service: &str,
    ) -> Result<RedisStore, StoreError>
    where
        I: IntoIterator<Item = U>,
        U: Into<String>,
    {
        let sentinels = sentinels.into_iter().map(Into::into).collect();
        let followed = sentinel::Followed::connect(sentinels, service, self.manager_config())
            .await
            .map_err(store_error)?;
        let store = self.build(Conn::Sentinel(Arc::new(followed)));
        store.check_eviction().await?;
        Ok(store)
    }

    fn manager_config(&self) -> ConnectionManagerConfig {
        ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connection_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500))
    }

    fn build(self, conn: Conn) -> RedisStore {
        RedisStore {
            conn,
            prefix: self.prefix,
            allow_eviction: self.allow_eviction,
            recheck: Arc::default(),
            replicas: self.replicas,
            scripts: Scripts {
                complete: Script::new(COMPLETE),
                release: Script::new(RELEASE),
                renew: Script::new(RENEW),
                save_step: Script::new(steps::SAVE),
            },
        }
    }
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

    /// Refuses a server that may evict idem's keys (every primary of a
    /// cluster is asked), unless eviction was allowed.
    async fn check_eviction(&self) -> Result<(), StoreError> {
        let mut config = redis::cmd("CONFIG");
        config.arg("GET").arg("maxmemory-policy");
        let mut info = redis::cmd("INFO");
        info.arg("memory");
        let mut found = Vec::new();
        for cmd in [config, info] {
            match self.ask_every_primary(cmd).await {
                Ok(answer) => found = eviction::policies(&answer),
                // Unreachable, not refused: say so, not "cannot read".
                Err(err) if err.is_io_error() || err.is_timeout() => return Err(store_error(err)),
                Err(_) => {}
            }
            if !found.is_empty() {
                break;
            }
        }
        eviction::check(&found, self.allow_eviction)
    }

    async fn ask_every_primary(&self, cmd: redis::Cmd) -> redis::RedisResult<redis::Value> {
        match &self.conn {
            Conn::Single(conn) => cmd.query_async(&mut conn.clone()).await,
            Conn::Sentinel(followed) => {
                followed
                    .send(async |mut manager| cmd.query_async(&mut manager).await)
                    .await
            }
            Conn::Cluster(conn) => {
                let every = redis::cluster_routing::RoutingInfo::MultiNode((
                    redis::cluster_routing::MultipleNodeRoutingInfo::AllMasters,
                    None,
                ));
                conn.clone().route_command(cmd, every).await
            }
        }
    }

    async fn invoke<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        key: &RecordKey,
        args: &[&[u8]],
    ) -> redis::RedisResult<T> {
        let mut invocation = script.prepare_invoke();
        invocation.key(self.redis_key(key));
        for arg in args {
            invocation.arg(*arg);
        }
        self.run_script(&invocation).await
    }

    /// A prepared script, on whichever connection this store has.
    async fn run_script<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> redis::RedisResult<T> {
        match &self.conn {
            Conn::Single(conn) => invocation.invoke_async(&mut conn.clone()).await,
            Conn::Cluster(conn) => invocation.invoke_async(&mut conn.clone()).await,
            Conn::Sentinel(followed) => {
                followed
                    .send(async |mut manager| invocation.invoke_async(&mut manager).await)
                    .await
            }
        }
    }

    async fn query<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, StoreError> {
        self.query_raw(pipe).await.map_err(store_error)
    }

    async fn query_raw<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> redis::RedisResult<T> {
        let answer = self.send_pipe(pipe).await;
        if answer
            .as_ref()
            .is_err_and(|err| err.is_io_error() || err.is_timeout())
        {
            self.recheck.store(true, Ordering::Relaxed);
        }
        answer
    }

    async fn send_pipe<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> redis::RedisResult<T> {
        match &self.conn {
            Conn::Single(conn) => pipe.query_async(&mut conn.clone()).await,
            Conn::Cluster(conn) => pipe.query_async(&mut conn.clone()).await,
            Conn::Sentinel(followed) => {
                followed
                    .send(async |mut manager| pipe.query_async(&mut manager).await)
                    .await
            }
        }
    }

    /// The claim on a server that refuses writes (at `maxmemory` with
    /// `noeviction`, or a read-only replica): a completed record is still
    /// replayed, a held key still answers in progress, and a free key
    /// cannot be claimed (the refusal, as `Error::Store`).
    async fn read_instead(
        &self,
        redis_key: &[u8],
        refused: redis::RedisError,
    ) -> Result<(i64, Option<Vec<u8>>), StoreError> {
        let mut pipe = redis::pipe();
        pipe.cmd("PTTL").arg(redis_key).cmd("GET").arg(redis_key);
        match self.query::<(i64, Option<Vec<u8>>)>(&pipe).await? {
            (pttl, Some(held)) => Ok((pttl, Some(held))),
            (_, None) => Err(store_error(refused)),
        }
    }

    async fn fenced(
        &self,
        script: &Script,
        key: &RecordKey,
        args: &[&[u8]],
    ) -> Result<Fence, StoreError> {
        let answer = self.invoke(script, key, args).await.map_err(store_error)?;
        Ok(fence(answer))
    }

    /// The completion, sent once more when the connection was lost before
    /// its answer came: the first may have landed (see `COMPLETE`).
    async fn complete_once_more(
        &self,
        key: &RecordKey,
        args: [&[u8]; 4],
    ) -> Result<Fence, StoreError> {
        let [token, record, px, ttl] = args;
        let first = [token, record, px, ttl, b"0".as_slice()];
        match self.invoke(&self.scripts.complete, key, &first).await {
            Ok(answer) => Ok(fence(answer)),
            Err(err) if err.is_io_error() || err.is_connection_dropped() => {
                tracing::debug!(error = %err, "idem: Redis connection lost during a completion; sending it again");
                let again = [token, record, px, ttl, b"1".as_slice()];
                self.fenced(&self.scripts.complete, key, &again).await
            }
            Err(err) => Err(store_error(err)),
        }
    }
}

/// A fenced script's answer: 1 ours, 0 another caller's, -1 gone.
fn fence(answer: i64) -> Fence {
    match answer {
        1 => Fence::Held,
        0 => Fence::Lost,
        _ => Fence::Expired,
    }
}

/// Whether Redis refused a write it would otherwise take: out of memory
/// under `noeviction`, or a read-only replica.
fn refuses_writes(err: &redis::RedisError) -> bool {
    // In a pipeline the server's code is not always parsed into a kind;
    // its text always carries it.
    let text = err.to_string();
    text.contains("OOM") || text.contains("READONLY")
}

/// A duration in whole milliseconds, at least 1 (`PX` needs it).
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

fn corrupt(what: &'static str) -> StoreError {
    StoreError::new(
        "redis",
        format!("unexpected value under an idem key: {what}"),
    )
}

/// The 32 fingerprint bytes of a stored value, at `at`.
fn fingerprint_at(value: &[u8], at: usize) -> Result<Fingerprint, StoreError> {
    value
        .get(at..at + 32)
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .map(Fingerprint::from_bytes)
        .ok_or_else(|| corrupt("fingerprint is not 32 bytes"))
}

/// The TTL a completed value was stored with, at `at`.
fn ttl_at(value: &[u8], at: usize) -> Result<Duration, StoreError> {
    value
        .get(at..at + 8)
        .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
        .map(|ms| Duration::from_millis(u64::from_be_bytes(ms)))
        .ok_or_else(|| corrupt("TTL is not 8 bytes"))
}

fn remaining(pttl_ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(pttl_ms).unwrap_or(0))
}

/// What a claim's `SET … NX GET` answered: nothing (the claim is ours), a
/// completed record, or another caller's claim.
fn claimed(pttl: i64, held: Option<Vec<u8>>) -> Result<ClaimOutcome, StoreError> {
    let Some(held) = held else {
        return Ok(ClaimOutcome::Won {
            took_over: false,
            steps: Vec::new(),
        });
    };
    let held = Bytes::from(held);
    let left = remaining(pttl);
    match held.first() {
        Some(b'C') if held.len() >= RECORD_AT => Ok(ClaimOutcome::Completed {
            fingerprint: fingerprint_at(&held, 1)?,
            expires_in: left.min(ttl_at(&held, 33)?),
            record: held.slice(RECORD_AT..),
        }),
        Some(b'P') if held.len() >= CLAIM_AT => Ok(ClaimOutcome::InProgress {
            fingerprint: fingerprint_at(&held, 17)?,
            retry_after: left,
        }),
        _ => Err(corrupt("unknown state")),
    }
}

/// Where a claim's listing fields start: `P`, token, fingerprint.
const CLAIM_AT: usize = 1 + 16 + 32;

/// An in-progress value: `P`, token, fingerprint, then for listing only
/// (`idem list`; the fenced steps read the first 49 bytes) the claim's
/// time in Unix milliseconds by the claimer's clock and the call site's
/// name. Expiry never reads that time: it is Redis's `PX`.
fn claim_value(claim: &Claim) -> Vec<u8> {
    let now = unix_now().as_millis() as u64;
    let mut value = Vec::with_capacity(CLAIM_AT + 8 + claim.site.len());
    value.push(b'P');
    value.extend_from_slice(&claim.token.to_bytes());
    value.extend_from_slice(claim.fingerprint.as_bytes());
    value.extend_from_slice(&now.to_be_bytes());
    value.extend_from_slice(claim.site.as_bytes());
    value
}

/// The wall-clock time since the Unix epoch (zero before it), for a
/// claim's listing time only.
fn unix_now() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// The fields of a call's steps hash.
type Steps = Vec<(Vec<u8>, Vec<u8>)>;

/// A won claim with the steps its pipeline read.
fn with_steps(
    outcome: Result<ClaimOutcome, StoreError>,
    saved: Steps,
) -> Result<ClaimOutcome, StoreError> {
    match outcome? {
        ClaimOutcome::Won { took_over, .. } => Ok(ClaimOutcome::Won {
            took_over,
            steps: steps::parse(saved)?,
        }),
        other => Ok(other),
    }
}

/// Where a completed value's record starts: `C`, fingerprint, TTL.
const RECORD_AT: usize = 1 + 32 + 8;

#[async_trait]
impl Store for RedisStore {
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        if self.recheck.load(Ordering::Relaxed) {
            self.check_eviction().await?;
            self.recheck.store(false, Ordering::Relaxed);
        }
        let value = claim_value(claim);
        // `SET … NX GET` claims a free key, or leaves a held one as it is
        // and answers its value: atomic, and native, which costs Redis a
        // fraction of a script (and MULTI/EXEC around it costs more than
        // the script). The `PTTL` before it, in the same pipeline (one
        // write, one turn), gives the store-clock `Retry-After` and cache
        // lifetime. The two may be split by other clients' commands, so
        // the `PTTL` may be of an earlier value than the one read; it is
        // sent first so that it can only be of one that existed before:
        // either the value read, or one it replaced, in which case the
        // value read was written after the `PTTL` ran and lives at least
        // its own stored TTL from then. The lifetime reported is the
        // smaller of the two, never later than the store's expiry.
        // The `HGETALL` after it reads the call's saved steps in the same
        // turn: if the `SET` won, no one else can save steps in between.
        let redis_key = self.redis_key(key);
        let mut pipe = redis::pipe();
        pipe.cmd("PTTL")
            .arg(&redis_key)
            .cmd("SET")
            .arg(&redis_key)
            .arg(&value[..])
            .arg("NX")
            .arg("PX")
            .arg(millis(claim.lease))
            .arg("GET")
            .cmd("HGETALL")
            .arg(self.steps_key(key));
        if let Some(replicas) = &self.replicas {
            replicas.append(&mut pipe);
            let (pttl, held, saved, acks): (i64, Option<Vec<u8>>, Steps, u32) =
                self.query(&pipe).await?;
            if held.is_none() {
                replicas.check(acks, "claim")?;
            }
            return with_steps(claimed(pttl, held), saved);
        }
        let (pttl, held, saved) = match self.query_raw(&pipe).await {
            Ok(answer) => answer,
            Err(err) if refuses_writes(&err) => {
                let (pttl, held) = self.read_instead(&redis_key, err).await?;
                (pttl, held, Vec::new())
            }
            Err(err) => return Err(store_error(err)),
        };
        with_steps(claimed(pttl, held), saved)
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        let ttl = millis(ttl);
        let px = ttl.to_string();
        let args: [&[u8]; 4] = [&token.to_bytes(), record, px.as_bytes(), &ttl.to_be_bytes()];
        let Some(replicas) = &self.replicas else {
            return self.complete_once_more(key, args).await;
        };
        let mut pipe = redis::pipe();
        pipe.cmd("EVAL")
            .arg(COMPLETE)
            .arg(1)
            .arg(self.redis_key(key));
        for arg in args {
            pipe.arg(arg);
        }
        pipe.arg("0");
        replicas.append(&mut pipe);
        let (held, acks): (i64, u32) = self.query(&pipe).await?;
        if held != 1 {
            return Ok(fence(held));
        }
        replicas.check(acks, "completion")?;
        Ok(Fence::Held)
    }

    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        self.fenced(&self.scripts.release, key, &[&token.to_bytes()])
            .await
    }

    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        let px = millis(lease).to_string();
        let args: [&[u8]; 2] = [&token.to_bytes(), px.as_bytes()];
        self.fenced(&self.scripts.renew, key, &args).await
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
        // The steps' hash shares the record's slot: one command, routed.
        pipe.cmd("DEL")
            .arg(self.redis_key(key))
            .arg(self.steps_key(key))
            .ignore();
        self.query::<()>(&pipe).await
    }
}
