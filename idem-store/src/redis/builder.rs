//! The settings of a `RedisStore` and the ways to connect it: one server,
//! a cluster, or the primary Sentinel names.

use std::sync::Arc;
use std::time::Duration;

use idem_contract::StoreError;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::conn::store_error;
use super::replicas::Replicas;
use super::scripts::Scripts;
use super::{Conn, RedisStore, sentinel, slot};

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
        store.check_server().await?;
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
        store.check_server().await?;
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
        store.check_server().await?;
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
            prefix_crc: slot::prefix_crc(&self.prefix),
            prefix: self.prefix,
            allow_eviction: self.allow_eviction,
            recheck: Arc::default(),
            replicas: self.replicas,
            scripts: Scripts::new(),
            native: Arc::default(),
            completed: Arc::default(),
            clock: Arc::default(),
        }
    }
}
