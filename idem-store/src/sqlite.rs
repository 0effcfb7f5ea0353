//! Records in a SQLite file ([`SqliteStore`]): the embedded, durable
//! default for one host.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use idem_contract::admin::Purged;
use idem_contract::fingerprint::Fingerprint;
use idem_contract::key::RecordKey;
use idem_contract::store::{Claim, ClaimOutcome, Fence, Retention, StepId, Token, async_trait};
use idem_contract::{Store, StoreError};
use sqlx::Row;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

mod admin;
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

/// [`LAPSED_CLAIM_KEPT`](idem_contract::store::LAPSED_CLAIM_KEPT) in
/// milliseconds, for the statements (a test checks the two agree).
macro_rules! lapsed_kept_ms {
    () => {
        "86400000"
    };
}

const MIGRATE: &str = concat!(
    "CREATE TABLE IF NOT EXISTS idem_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);",
    "CREATE TABLE IF NOT EXISTS idem_records (",
    " key BLOB PRIMARY KEY, token BLOB NOT NULL, fingerprint BLOB NOT NULL,",
    " record BLOB, expires_at INTEGER NOT NULL, site TEXT NOT NULL, created_at INTEGER NOT NULL,",
    " tombstone_until INTEGER",
    ") WITHOUT ROWID;",
    "CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);",
    "CREATE INDEX IF NOT EXISTS idem_records_created_at ON idem_records (created_at);",
    "INSERT OR IGNORE INTO idem_migrations (version, applied_at) VALUES (1, ",
    now_ms!(),
    ");"
);

const SELECT: &str = concat!(
    "SELECT token, fingerprint, record, expires_at - ",
    now_ms!(),
    ", coalesce(tombstone_until, 0) - ",
    now_ms!(),
    " FROM idem_records WHERE key = ?1"
);

const INSERT: &str = concat!(
    "INSERT INTO idem_records (key, token, fingerprint, record, expires_at, site, created_at) VALUES (?1, ?2, ?3, NULL, ",
    now_ms!(),
    " + ?4, ?5, ",
    now_ms!(),
    ") ON CONFLICT (key) DO UPDATE SET token = excluded.token, fingerprint = excluded.fingerprint,",
    " record = NULL, expires_at = excluded.expires_at, site = excluded.site, created_at = excluded.created_at,",
    " tombstone_until = NULL WHERE idem_records.expires_at <= ",
    now_ms!(),
    " AND coalesce(idem_records.tombstone_until, 0) <= ",
    now_ms!(),
    // A lapsed claim is taken over only by a call of its payload (or one
    // that does not fingerprint): `Store::claim`.
    " AND (idem_records.record IS NOT NULL OR idem_records.fingerprint IN (?3, zeroblob(32))",
    " OR ?3 = zeroblob(32))",
    // Whether the call has saved steps: only then does a won claim read them.
    " RETURNING EXISTS (SELECT 1 FROM idem_steps WHERE call = ?1)"
);

/// The fence of complete, release and renew: the row is our unexpired
/// claim.
macro_rules! held {
    () => {
        concat!(
            " WHERE key = ?1 AND token = ?2 AND record IS NULL AND expires_at > ",
            now_ms!()
        )
    };
}

/// Whether anyone holds or completed the key (its record or its
/// tombstone stands), asked after a fenced operation found no claim of
/// ours: to tell a takeover from an expired claim.
const LIVE: &str = concat!(
    "SELECT 1 FROM idem_records WHERE key = ?1 AND (expires_at > ",
    now_ms!(),
    " OR tombstone_until > ",
    now_ms!(),
    ")"
);
mod steps;

const COMPLETE: &str = concat!(
    "UPDATE idem_records SET record = ?3, expires_at = ",
    now_ms!(),
    " + ?4, tombstone_until = ",
    now_ms!(),
    " + ?5",
    held!()
);
const RELEASE: &str = concat!("DELETE FROM idem_records", held!());
const FORGET: &str = "DELETE FROM idem_records WHERE key = ?1";
/// Sent before `FORGET`: a forgotten call must not resume from old steps.
const FORGET_STEPS: &str = "DELETE FROM idem_steps WHERE call = ?1";
const RENEW: &str = concat!(
    "UPDATE idem_records SET expires_at = ",
    now_ms!(),
    " + ?3",
    held!()
);
/// Keeps a lapsed claim a day past its lease: the evidence a takeover
/// and its reconcile need (`LAPSED_CLAIM_KEPT`).
const PURGE: &str = concat!(
    "DELETE FROM idem_records WHERE key IN (SELECT key FROM idem_records WHERE expires_at <= ",
    now_ms!(),
    " AND (record IS NOT NULL OR expires_at <= ",
    now_ms!(),
    " - ",
    lapsed_kept_ms!(),
    ") AND coalesce(tombstone_until, 0) <= ",
    now_ms!(),
    " LIMIT ?1)"
);
/// Drops the value of records past their TTL whose tombstone stands: an
/// empty record, not NULL, which would read as a claim.
const COMPACT: &str = concat!(
    "UPDATE idem_records SET record = X'' WHERE key IN (SELECT key FROM idem_records WHERE expires_at <= ",
    now_ms!(),
    " AND tombstone_until > ",
    now_ms!(),
    " AND length(record) > 0 LIMIT ?1)"
);

/// Connections to the file the store keeps at most.
const MAX_CONNECTIONS: u32 = 4;
/// How long a writer waits for another (in this process or another one)
/// before `Error::Store`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Rows one purge statement deletes at most.
const PURGE_BATCH: i64 = 5_000;

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
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
    file: Option<FileIdentity>,
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
        let path = options.get_filename().to_owned();
        let pool = SqlitePoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await
            .map_err(err)?;
        migrate::migrate(&pool).await.map_err(err)?;
        let file = FileIdentity::of(&path)?;
        Ok(SqliteStore { pool, file })
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
        let path = options.get_filename().to_owned();
        let pool = SqlitePoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await
            .map_err(err)?;
        if let Err(why) = migrate::check(&pool).await {
            pool.close().await;
            return Err(StoreError::new(BACKEND, why));
        }
        let file = FileIdentity::of(&path)?;
        Ok(SqliteStore { pool, file })
    }

    /// Deletes expired records, claims and steps, in statements of at most 5,000
    /// rows, and returns how many it deleted; a record past its TTL whose
    /// tombstone stands loses its value instead (counted too) and is
    /// deleted once the tombstone has passed. Expired rows are already
    /// ignored by every step; this only reclaims space. Run it now and
    /// then:
    ///
    /// ```no_run
    /// # async fn f(store: idem::SqliteStore) {
    /// tokio::spawn(async move {
    ///     let mut every = tokio::time::interval(std::time::Duration::from_secs(600));
    ///     loop {
    ///         every.tick().await;
    ///         let _ = store.purge_expired().await;
    ///     }
    /// });
    /// # }
    /// ```
    pub async fn purge_expired(&self) -> Result<u64, StoreError> {
        let purged = self.purge_counted().await?;
        Ok(purged.records + purged.steps + purged.tombstones)
    }

    /// Purges as [`purge_expired`](Self::purge_expired) does, counting
    /// records and steps apart.
    async fn purge_counted(&self) -> Result<Purged, StoreError> {
        let mut purged = Purged::default();
        purged.records = self.in_batches(PURGE).await?;
        purged.tombstones = self.in_batches(COMPACT).await?;
        loop {
            let n = steps::purge(&self.pool, PURGE_BATCH).await?;
            purged.steps += n;
            if n < PURGE_BATCH as u64 {
                return Ok(purged);
            }
        }
    }

    /// Runs `statement` (bound to a batch size) until it changes fewer
    /// rows than a batch; how many it changed.
    async fn in_batches(&self, statement: &'static str) -> Result<u64, StoreError> {
        let mut changed = 0;
        loop {
            let n = sqlx::query(statement)
                .bind(PURGE_BATCH)
                .execute(&self.pool)
                .await
                .map_err(err)?
                .rows_affected();
            changed += n;
            if n < PURGE_BATCH as u64 {
                return Ok(changed);
            }
        }
    }

    /// Closes the file's connections; later steps fail.
    ///
    /// ```no_run
    /// # async fn f(store: idem::SqliteStore) {
    /// store.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        self.pool.close().await;
    }

    async fn fenced<'q>(
        &self,
        key: &RecordKey,
        query: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
    ) -> Result<Fence, StoreError> {
        let done = query.execute(&self.pool).await.map_err(err)?;
        if done.rows_affected() != 0 {
            return Ok(Fence::Held);
        }
        self.lost(key).await
    }

    /// How a fenced operation that found no claim of ours lost it.
    async fn lost(&self, key: &RecordKey) -> Result<Fence, StoreError> {
        let live = sqlx::query(LIVE)
            .bind(&key.as_bytes()[..])
            .fetch_optional(&self.pool)
            .await
            .map_err(err)?;
        Ok(if live.is_some() {
            Fence::Lost
        } else {
            Fence::Expired
        })
    }
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
        if let Some(file) = &self.file {
            file.check()?;
        }
        let (record_key, key) = (key, &key.as_bytes()[..]);
        let token = claim.token.to_bytes();
        // Few turns: the row changes between the read and the write only
        // when another caller claims, completes or releases it meanwhile.
        for _ in 0..16 {
            let row = sqlx::query(SELECT)
                .bind(key)
                .fetch_optional(&self.pool)
                .await
                .map_err(err)?;
            let mut took_over = false;
            if let Some(row) = row {
                let left: i64 = row.try_get(3).map_err(err)?;
                let record: Option<Vec<u8>> = row.try_get(2).map_err(err)?;
                let tombstone_left: i64 = row.try_get(4).map_err(err)?;
                if left <= 0 && tombstone_left > 0 && record.is_some() {
                    let fp = fingerprint(row.try_get(1).map_err(err)?)?;
                    return Ok(ClaimOutcome::expired(fp, remaining(-left)));
                }
                if left > 0 {
                    let held_by: Vec<u8> = row.try_get(0).map_err(err)?;
                    let fp = fingerprint(row.try_get(1).map_err(err)?)?;
                    return Ok(match record {
                        None if held_by == token => {
                            ClaimOutcome::won(false, steps::load(&self.pool, record_key).await?)
                        }
                        None => ClaimOutcome::in_progress(fp, remaining(left)),
                        Some(record) => {
                            ClaimOutcome::completed(fp, Bytes::from(record), remaining(left))
                        }
                    });
                }
                if record.is_none() {
                    let fp = fingerprint(row.try_get(1).map_err(err)?)?;
                    if !claim.fingerprint.matches(&fp) {
                        return Ok(ClaimOutcome::in_progress(fp, Duration::ZERO));
                    }
                    took_over = true;
                }
            }
            let won = sqlx::query(INSERT)
                .bind(key)
                .bind(&token[..])
                .bind(&claim.fingerprint.as_bytes()[..])
                .bind(millis(claim.lease))
                .bind(claim.site)
                .fetch_optional(&self.pool)
                .await
                .map_err(err)?;
            if let Some(won) = won {
                // Only a call that has saved steps pays a second statement.
                let any: bool = won.try_get(0).map_err(err)?;
                let steps = match any {
                    true => steps::load(&self.pool, record_key).await?,
                    false => Vec::new(),
                };
                return Ok(ClaimOutcome::won(took_over, steps));
            }
        }
        Err(StoreError::new(
            BACKEND,
            "the claim did not settle: the key changed hands 16 times in a row",
        ))
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        let token = token.to_bytes();
        self.fenced(
            key,
            sqlx::query(COMPLETE)
                .bind(&key.as_bytes()[..])
                .bind(&token[..])
                .bind(record)
                .bind(millis(kept.ttl))
                .bind(kept.tombstone.map(|_| millis(kept.kept_for()))),
        )
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
        match steps::save(&self.pool, key, token, step, value, ttl).await? {
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
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(err)?;
        for statement in [FORGET_STEPS, FORGET] {
            sqlx::query(statement)
                .bind(&key.as_bytes()[..])
                .execute(&mut *tx)
                .await
                .map_err(err)?;
        }
        tx.commit().await.map_err(err)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_lapsed_claim_is_kept_as_long_as_the_contract_says() {
        let kept: u128 = lapsed_kept_ms!().parse().expect("a number");
        assert_eq!(kept, idem_contract::store::LAPSED_CLAIM_KEPT.as_millis());
    }
}
