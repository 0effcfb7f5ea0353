//! Records in a SQLite file ([`SqliteStore`]): the embedded, durable
//! default for one host.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use idem_contract::admin::{Purge, Purged};
use idem_contract::fingerprint::Fingerprint;
use idem_contract::key::RecordKey;
use idem_contract::store::{Claim, ClaimOutcome, Fence, Retention, StepId, Token, async_trait};
use idem_contract::{Store, StoreError};
use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqliteSynchronous};

use crate::answer::Affected;
use crate::conns::Conns;

mod admin;
mod claim;
mod exec;
mod file;
mod migrate;

use file::FileIdentity;

const BACKEND: &str = "sqlite";

/// SQLite's clock in milliseconds since the Unix epoch. `'now'` is one
/// fixed instant within one statement.
macro_rules! now_ms {
    () => {
        "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
    };
}
use now_ms;

mod statements;
mod steps;

use statements::{
    COMPACT, COMPLETE, COMPLETE_AGAIN, FORGET, FORGET_STEPS, INSERT, LIVE, MIGRATE, PURGE, RELEASE,
    RENEW, REPLACE, SELECT,
};

/// Connections to the file the store keeps at most.
const MAX_CONNECTIONS: u32 = 4;
/// How long a step waits for one of them to be free.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a writer waits for another (in this process or another one)
/// before `Error::Store`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Records in a SQLite file: the embedded, durable default for a single
/// host. No server; records survive restarts; several processes on the
/// host may share the file.
///
/// The file is opened in WAL mode (readers never wait for the writer) with
/// `synchronous = FULL` (a completed record is on disk when `complete`
/// returns), and the table is created on open. Every step is one atomic
/// SQL statement, except a claim that finds the key absent or expired:
/// it reads, then writes conditionally, and reads again if another caller
/// won the write in between. A replayed duplicate is one read.
///
/// Every claim first checks that the path still names the file the store
/// opened (same device and inode, on Unix): a file deleted or replaced
/// while open (a restore, a cleanup job) would leave this process writing
/// to records no other process sees, so the claim fails closed with
/// `Error::Store` saying so, and the body does not run. Reopen the store.
///
/// Expiry is judged by SQLite's clock, which is this host's wall clock: a
/// clock stepped forward expires claims and records early, one stepped
/// back keeps them longer. For several hosts, use a networked store.
///
/// ```no_run
/// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
/// let store = idem::SqliteStore::open("/var/lib/myapp/idem.db").await?;
/// let idem = idem::Idempotency::new(store);
/// let out: Result<u32, idem::Error> =
///     idem.call("jobs", "job-42").run(|| async { Ok(42) }).await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    conns: Arc<Conns<SqliteConnection>>,
    file: Option<FileIdentity>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if missing) the SQLite file at `path`, in WAL mode,
    /// and creates the records table if it is not there yet.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::SqliteStore::open("idem.db").await?;
    /// # Ok(()) }
    /// ```
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT);
        Self::open_with(options).await
    }

    /// As [`open`](Self::open), with sqlx's options (e.g. `synchronous =
    /// NORMAL`, which in WAL mode may lose the last records on power loss
    /// but not on a crash of the process).
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
    /// let options = SqliteConnectOptions::new()
    ///     .filename("idem.db")
    ///     .create_if_missing(true)
    ///     .journal_mode(SqliteJournalMode::Wal)
    ///     .synchronous(SqliteSynchronous::Normal);
    /// let store = idem::SqliteStore::open_with(options).await?;
    /// # Ok(()) }
    /// ```
    pub async fn open_with(options: SqliteConnectOptions) -> Result<Self, StoreError> {
        Self::opened(options, async |conn| {
            migrate::migrate(conn).await.map_err(err)
        })
        .await
    }

    /// Opens a file that already holds idem's records, exactly as it is:
    /// with `options` as given (no file created, no journal mode set
    /// unless `options` sets them), no table created or upgraded. A file
    /// without idem's tables, or at another schema version, is refused
    /// with a [`StoreError`] saying so. For tools that must not change a
    /// file they were pointed at, such as the `idem` CLI; open read-only
    /// with `read_only(true)` where only reading.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// use sqlx::sqlite::SqliteConnectOptions;
    /// let options = SqliteConnectOptions::new().filename("idem.db").read_only(true);
    /// let store = idem::SqliteStore::open_existing(options).await?;
    /// # Ok(()) }
    /// ```
    pub async fn open_existing(options: SqliteConnectOptions) -> Result<Self, StoreError> {
        Self::opened(options, async |conn| {
            migrate::check(conn)
                .await
                .map_err(|why| StoreError::new(BACKEND, why))
        })
        .await
    }

    /// A store on the file `options` name, once `prepare` has succeeded on
    /// its first connection (which it then keeps).
    async fn opened(
        options: SqliteConnectOptions,
        prepare: impl AsyncFnOnce(&mut SqliteConnection) -> Result<(), StoreError>,
    ) -> Result<Self, StoreError> {
        let path = options.get_filename().to_owned();
        let conns = conns(options);
        let mut conn = conns.connect().await?;
        if let Err(failed) = prepare(&mut conn).await {
            let _ = conn.close().await;
            return Err(failed);
        }
        conns.put_back(conn);
        let file = FileIdentity::of(&path)?;
        Ok(SqliteStore { conns, file })
    }

    /// Deletes expired records, claims and steps, in statements of at most
    /// [`Purge::DEFAULT_BATCH`] rows with [`Purge::DEFAULT_PAUSE`] between
    /// them (SQLite has one writer: a claim waits behind the batch being
    /// deleted, never behind the whole purge), and returns how many it
    /// deleted; a record past its TTL whose tombstone stands loses its
    /// value instead (counted too) and is deleted once the tombstone has
    /// passed. Expired rows are already ignored by every step; this only
    /// reclaims space. Paced otherwise with `Admin::purge_with`; run now
    /// and then with `idem::admin::spawn_purge`:
    ///
    /// ```no_run
    /// # async fn f(store: idem::SqliteStore) {
    /// let purger = idem::admin::spawn_purge(
    ///     std::sync::Arc::new(store),
    ///     std::time::Duration::from_secs(600),
    ///     idem::admin::Purge::default(),
    /// );
    /// // … serve; dropping `purger` stops it.
    /// # drop(purger);
    /// # }
    /// ```
    pub async fn purge_expired(&self) -> Result<u64, StoreError> {
        let purged = self.purge_counted(&Purge::default()).await?;
        Ok(purged.records + purged.steps + purged.tombstones)
    }

    /// Purges as [`purge_expired`](Self::purge_expired) does, paced by
    /// `options`, counting records and steps apart.
    async fn purge_counted(&self, options: &Purge) -> Result<Purged, StoreError> {
        let batch = i64::from(options.batch.max(1));
        let mut purged = Purged::default();
        purged.records = self.in_batches(PURGE, batch, options.pause).await?;
        purged.tombstones = self.in_batches(COMPACT, batch, options.pause).await?;
        purged.steps = self.in_batches(steps::PURGE, batch, options.pause).await?;
        Ok(purged)
    }

    /// Runs `statement` (bound to a batch size) until it changes fewer
    /// rows than a batch, pausing `pause` after each full batch so that
    /// claims get the single writer's lock in between; how many it changed.
    async fn in_batches(
        &self,
        statement: &'static str,
        batch: i64,
        pause: Duration,
    ) -> Result<u64, StoreError> {
        let mut changed = 0;
        loop {
            let Affected(n) = self.send(sqlx::query(statement).bind(batch)).await?;
            changed += n;
            if n < batch as u64 {
                return Ok(changed);
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// Closes the file's idle connections. Steps after this open new ones.
    ///
    /// ```no_run
    /// # async fn f(store: idem::SqliteStore) {
    /// store.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        self.conns.close().await;
    }

    async fn fenced<'q>(
        &self,
        key: &RecordKey,
        query: exec::SqliteQuery<'q>,
    ) -> Result<Fence, StoreError> {
        match self.send(query).await? {
            Affected(0) => self.lost(key).await,
            Affected(_) => Ok(Fence::Held),
        }
    }

    /// A completion by `statement` (`COMPLETE`, or `COMPLETE_AGAIN`).
    async fn completed(
        &self,
        statement: &'static str,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        let token = token.to_bytes();
        self.fenced(
            key,
            sqlx::query(statement)
                .bind(&key.as_bytes()[..])
                .bind(&token[..])
                .bind(record)
                .bind(millis(kept.ttl))
                .bind(kept.tombstone.map(|_| millis(kept.kept_for()))),
        )
        .await
    }

    /// How a fenced operation that found no claim of ours lost it.
    async fn lost(&self, key: &RecordKey) -> Result<Fence, StoreError> {
        let live: Option<sqlx::sqlite::SqliteRow> = self
            .send(sqlx::query(LIVE).bind(&key.as_bytes()[..]))
            .await?;
        Ok(if live.is_some() {
            Fence::Lost
        } else {
            Fence::Expired
        })
    }
}

/// At most [`MAX_CONNECTIONS`] connections opened with `options`.
fn conns(options: SqliteConnectOptions) -> Arc<Conns<SqliteConnection>> {
    let names = (BACKEND, "SQLite");
    Arc::new(Conns::new(options, MAX_CONNECTIONS, ACQUIRE_TIMEOUT, names))
}

fn err(err: sqlx::Error) -> StoreError {
    StoreError::new(BACKEND, err)
}

/// A duration in whole milliseconds, rounded up, capped at 100 years.
fn millis(duration: Duration) -> i64 {
    const CAP: u128 = 100 * 365 * 24 * 3600 * 1000;
    duration.as_nanos().div_ceil(1_000_000).min(CAP) as i64
}

fn remaining(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

fn fingerprint(bytes: Vec<u8>) -> Result<Fingerprint, StoreError> {
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| StoreError::new(BACKEND, "a stored fingerprint is not 32 bytes"))?;
    Ok(Fingerprint::from_bytes(bytes))
}

#[async_trait]
impl Store for SqliteStore {
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
        self.completed(COMPLETE, key, token, record, kept).await
    }

    async fn complete_again(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        self.completed(COMPLETE_AGAIN, key, token, record, kept)
            .await
    }

    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        let token = token.to_bytes();
        self.fenced(
            key,
            sqlx::query(RELEASE)
                .bind(&key.as_bytes()[..])
                .bind(&token[..]),
        )
        .await
    }

    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        let token = token.to_bytes();
        self.fenced(
            key,
            sqlx::query(RENEW)
                .bind(&key.as_bytes()[..])
                .bind(&token[..])
                .bind(millis(lease)),
        )
        .await
    }

    async fn save_step(
        &self,
        key: &RecordKey,
        token: Token,
        step: StepId,
        value: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        match steps::save(self, key, token, step, value, ttl).await? {
            0 => self.lost(key).await,
            _ => Ok(Fence::Held),
        }
    }

    fn records_steps(&self) -> bool {
        true
    }

    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        // One transaction: a step saved between the two deletes would
        // otherwise outlive its record, and the next call would resume
        // from it.
        self.in_transaction(async |conn| {
            for statement in [FORGET_STEPS, FORGET] {
                sqlx::query(statement)
                    .bind(&key.as_bytes()[..])
                    .execute(&mut *conn)
                    .await?;
            }
            Ok(())
        })
        .await
    }
}
