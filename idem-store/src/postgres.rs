//! Records in PostgreSQL ([`PostgresStore`]): one statement, one round trip per step, expiry by
//! the server's clock, and a transactional mode.

mod admin;
mod conns;
mod sql;
mod steps;
mod tx;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use idem_core::fingerprint::Fingerprint;
use idem_core::key::RecordKey;
use idem_core::store::{Claim, ClaimOutcome, Fence, StepId, Token, async_trait};
use idem_core::{Store, StoreError};
use sqlx::postgres::{PgArguments, PgConnectOptions, PgConnection, PgPool, PgRow};
use sqlx::query::Query;
use sqlx::{Acquire, Postgres, Row};

use conns::{Conns, lost_connection};
use sql::{MIGRATIONS, Sql, micros};
pub use tx::{InTransaction, TxHandle};

const BACKEND: &str = "postgres";

/// Connections [`PostgresStore::connect`] opens at most, unless set.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10;
/// How long a step waits for a free connection (or for a new one to
/// open) before failing with `Error::Store`, unless set.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a step waits for the server's answer by default: 5 seconds.
/// A stalled server (paused, partitioned, overloaded) fails callers within
/// this bound instead of hanging them; a claim waiting on a row locked by
/// another caller's open transaction waits within it too.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
/// The schema of the records table, unless set.
pub const DEFAULT_SCHEMA: &str = "public";
/// The name of the records table, unless set.
pub const DEFAULT_TABLE: &str = "idem_records";
/// How many rows one statement of [`PostgresStore::purge_expired`] deletes.
pub const DEFAULT_PURGE_BATCH: u32 = 5_000;

/// Records in PostgreSQL: for several replicas that share a database, with
/// records that survive restarts.
///
/// Each step (claim, complete, release, renew) is **one statement**, sent
/// in one round trip and atomic at READ COMMITTED; a replayed duplicate is
/// the claim statement alone. Lease and TTL expiry are judged by the
/// server's clock (`statement_timestamp()`). Keys, tokens, fingerprints and
/// records are `bytea`. Run [`migrate`](PostgresStore::migrate) once at
/// start-up (it is idempotent and versioned), and
/// [`purge_expired`](PostgresStore::purge_expired) now and then.
///
/// **Connections.** [`connect`](PostgresStore::connect) keeps its own
/// dedicated connections and reuses them *without* a health check, so every
/// step is exactly one network turn. A sqlx `PgPool` pings each connection
/// when it returns to the pool (and, unless `test_before_acquire(false)`,
/// before handing it out): through [`from_pool`](PostgresStore::from_pool)
/// a step costs the caller one turn of latency plus one or two pings (two
/// or three turns of server work in all). Without the ping, a connection
/// that died while idle is found out by the statement itself: the store
/// then drops every idle connection and sends the step once more on a new
/// one (each step is written to be safe to send twice), so a server
/// restart costs no error while the server is back; a server that is down
/// is `Error::Store`, and the body does not run.
///
/// **Transactions.** [`in_transaction`](PostgresStore::in_transaction)
/// runs a call inside the caller's `sqlx::Transaction`: the claim, the
/// body's own writes and the completed record commit or roll back
/// together.
///
/// ```no_run
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use idem::Idempotency;
/// use idem::PostgresStore;
///
/// let store = PostgresStore::connect("postgres://app@db.internal/app").await?;
/// store.migrate().await?;
/// let idem = Idempotency::new(store.clone());
/// let receipt: Result<String, idem::Error> = idem
///     .call("payments", "order-1")
///     .run(|| async { Ok("charged".to_owned()) })
///     .await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    sql: Sql,
    conns: Source,
    purge_batch: u32,
    response_timeout: Duration,
}

enum Source {
    Own(Box<Conns>),
    Pool(PgPool),
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("table", &self.inner.sql.table)
            .field(
                "connections",
                &match self.inner.conns {
                    Source::Own(_) => "own",
                    Source::Pool(_) => "sqlx pool",
                },
            )
            .finish()
    }
}

/// Settings of a [`PostgresStore`]: where the records live and how many
/// connections to keep. Made by [`PostgresStore::builder`].
///
/// ```no_run
/// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
/// let store = idem::PostgresStore::builder()
///     .schema("billing")
///     .table("payment_idempotency")
///     .max_connections(20)
///     .connect("postgres://app@db.internal/app")
///     .await?;
/// store.migrate().await?; // creates billing.payment_idempotency
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct PostgresStoreBuilder {
    schema: String,
    table: String,
    max_connections: u32,
    acquire_timeout: Duration,
    response_timeout: Duration,
    purge_batch: u32,
}

impl Default for PostgresStoreBuilder {
    fn default() -> Self {
        PostgresStoreBuilder {
            schema: DEFAULT_SCHEMA.to_owned(),
            table: DEFAULT_TABLE.to_owned(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            purge_batch: DEFAULT_PURGE_BATCH,
        }
    }
}

impl PostgresStoreBuilder {
    /// The schema of the records table (default `public`); `migrate`
    /// creates it if missing. ASCII letters, digits and `_`.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let builder = idem::PostgresStore::builder().schema("idem");
    /// # Ok(()) }
    /// ```
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// The records table (default `idem_records`). `migrate` also creates
    /// `<table>_migrations`, the function `<table>_claim` and the index
    /// `<table>_expires_at` beside it. ASCII letters, digits and `_`, at
    /// most 52 bytes.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let builder = idem::PostgresStore::builder().table("checkout_idem");
    /// # Ok(()) }
    /// ```
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// How many connections [`connect`](Self::connect) opens at most
    /// (default 10). Ignored by [`from_pool`](Self::from_pool), whose pool
    /// has its own limit.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let builder = idem::PostgresStore::builder().max_connections(32);
    /// # Ok(()) }
    /// ```
    pub fn max_connections(mut self, max: u32) -> Self {
        self.max_connections = max;
        self
    }

    /// How long a step waits for a connection before `Error::Store`
    /// (default 5 s).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let builder = idem::PostgresStore::builder()
    ///     .acquire_timeout(std::time::Duration::from_secs(1));
    /// # Ok(()) }
    /// ```
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// How long a step (claim, complete, release, renew) waits for the
    /// server's answer before `Error::Store`. Default:
    /// [`DEFAULT_RESPONSE_TIMEOUT`] (5 s). The connection is closed after a
    /// timeout; whether the step took effect is unknown (a claim then ends
    /// with its lease; a completion that did land is replayed).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let store = idem::PostgresStore::builder()
    ///     .response_timeout(std::time::Duration::from_secs(2))
    ///     .connect("postgres://app@db.internal/app")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// How many rows one statement of
    /// [`purge_expired`](PostgresStore::purge_expired) deletes (default
    /// 5,000): small batches keep locks and WAL bursts short.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let builder = idem::PostgresStore::builder().purge_batch(1_000);
    /// # Ok(()) }
    /// ```
    pub fn purge_batch(mut self, rows: u32) -> Self {
        self.purge_batch = rows.max(1);
        self
    }

    /// Connects to `url` with connections of the store's own (see
    /// [`PostgresStore`] for why), opening one at once so that a wrong URL
    /// fails here.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let store = idem::PostgresStore::builder()
    ///     .connect("postgres://app@localhost/app")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(self, url: &str) -> Result<PostgresStore, StoreError> {
        let options: PgConnectOptions = url.parse().map_err(|err| StoreError::new(BACKEND, err))?;
        self.connect_with(options).await
    }

    /// As [`connect`](Self::connect), with sqlx's connect options.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let options: sqlx::postgres::PgConnectOptions = "postgres://app@localhost/app"
    ///     .parse()
    ///     .map_err(|err| idem::StoreError::new("postgres", err))?;
    /// let store = idem::PostgresStore::builder()
    ///     .connect_with(options.application_name("checkout"))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_with(
        self,
        options: PgConnectOptions,
    ) -> Result<PostgresStore, StoreError> {
        let sql = Sql::new(&self.schema, &self.table)?;
        let conns = Conns::new(options, self.max_connections, self.acquire_timeout);
        conns.acquire().await?.keep();
        Ok(self.build(sql, Source::Own(Box::new(conns))))
    }

    /// A store on the caller's sqlx pool. Each step is still one statement,
    /// but the pool pings connections (see [`PostgresStore`]); prefer
    /// [`connect`](Self::connect) where round trips matter, or build the
    /// pool with `test_before_acquire(false)`.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), idem::StoreError> {
    /// let pool = sqlx::PgPool::connect_lazy("postgres://app@localhost/app")
    ///     .map_err(|err| idem::StoreError::new("postgres", err))?;
    /// let store = idem::PostgresStore::builder().schema("idem").from_pool(pool)?;
    /// # Ok(()) }
    /// ```
    pub fn from_pool(self, pool: PgPool) -> Result<PostgresStore, StoreError> {
        let sql = Sql::new(&self.schema, &self.table)?;
        Ok(self.build(sql, Source::Pool(pool)))
    }

    fn build(self, sql: Sql, conns: Source) -> PostgresStore {
        PostgresStore {
            inner: Arc::new(Inner {
                sql,
                conns,
                purge_batch: self.purge_batch,
                response_timeout: self.response_timeout,
            }),
        }
    }
}

/// What a statement is sent for.
#[derive(Clone, Copy, PartialEq)]
enum Want {
    Row,
    RowsAffected,
}

enum Out {
    Row(Box<PgRow>),
    Rows(u64),
}

impl Out {
    fn row(self) -> PgRow {
        match self {
            Out::Row(row) => *row,
            Out::Rows(_) => unreachable!("asked for a row"),
        }
    }

    fn fence(self) -> Fence {
        match self {
            Out::Rows(0) => Fence::Lost,
            Out::Rows(_) => Fence::Held,
            Out::Row(_) => unreachable!("asked for a count"),
        }
    }
}

type PgQuery<'q> = Query<'q, Postgres, PgArguments>;

async fn send_on<'q, 'c, E>(query: PgQuery<'q>, executor: E, want: Want) -> Result<Out, sqlx::Error>
where
    E: sqlx::Executor<'c, Database = Postgres>,
    'q: 'c,
{
    match want {
        Want::Row => Ok(Out::Row(Box::new(query.fetch_one(executor).await?))),
        Want::RowsAffected => Ok(Out::Rows(query.execute(executor).await?.rows_affected())),
    }
}

impl PostgresStore {
    /// Connects to `url` with default settings (table `public.idem_records`,
    /// up to 10 connections of the store's own).
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::PostgresStore::connect("postgres://app@localhost/app").await?;
    /// store.migrate().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder().connect(url).await
    }

    /// A store on the caller's sqlx pool, table `public.idem_records`.
    /// Every step pays the pool's pings (see [`PostgresStore`]).
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sqlx::postgres::PgPoolOptions;
    /// let pool = PgPoolOptions::new()
    ///     // The release ping stays; this removes the one before each step.
    ///     .test_before_acquire(false)
    ///     .connect("postgres://app@localhost/app")
    ///     .await?;
    /// let store = idem::PostgresStore::from_pool(pool);
    /// store.migrate().await?;
    /// # Ok(()) }
    /// ```
    pub fn from_pool(pool: PgPool) -> Self {
        Self::builder()
            .from_pool(pool)
            .expect("the default names are valid")
    }

    /// Settings beyond the defaults: schema, table, connections.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::PostgresStore::builder()
    ///     .table("checkout_idempotency")
    ///     .connect("postgres://app@localhost/app")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn builder() -> PostgresStoreBuilder {
        PostgresStoreBuilder::default()
    }

    /// The schema-qualified, quoted records table, e.g.
    /// `"public"."idem_records"`, for your own queries and dashboards.
    ///
    /// ```no_run
    /// # async fn f(store: idem::PostgresStore) {
    /// let sql = format!("SELECT count(*) FROM {}", store.table());
    /// # }
    /// ```
    pub fn table(&self) -> &str {
        &self.inner.sql.table
    }

    /// Creates or upgrades the schema, table, index and claim function.
    /// Versioned (in `<table>_migrations`), so running it again, or from
    /// several replicas at once, is harmless: a transaction-scoped advisory
    /// lock makes concurrent runs take turns.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
    /// let store = idem::PostgresStore::connect("postgres://app@localhost/app").await?;
    /// store.migrate().await?;
    /// store.migrate().await?; // nothing left to do
    /// # Ok(()) }
    /// ```
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let err = |err| StoreError::new(BACKEND, err);
        match &self.inner.conns {
            Source::Own(conns) => {
                let mut conn = conns.connect().await?;
                self.migrate_on(&mut conn).await.map_err(err)?;
                let _ = sqlx::Connection::close(conn).await;
                Ok(())
            }
            Source::Pool(pool) => {
                let mut conn = pool.acquire().await.map_err(err)?;
                self.migrate_on(&mut conn).await.map_err(err)
            }
        }
    }

    async fn migrate_on(&self, conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        let sql = &self.inner.sql;
        let mut tx = conn.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(format!("idem migrate {}", sql.table))
            .execute(&mut *tx)
            .await?;
        sqlx::raw_sql(&format!(
            "CREATE SCHEMA IF NOT EXISTS \"{}\"; \
             CREATE TABLE IF NOT EXISTS {} (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
            sql.schema_name, sql.versions
        ))
        .execute(&mut *tx)
        .await?;
        let done: i32 = sqlx::query_scalar(&format!(
            "SELECT coalesce(max(version), 0) FROM {}",
            sql.versions
        ))
        .fetch_one(&mut *tx)
        .await?;
        for (version, step) in (1..).zip(MIGRATIONS) {
            if version <= done {
                continue;
            }
            sqlx::raw_sql(&sql.migration(step))
                .execute(&mut *tx)
                .await?;
            sqlx::query(&format!(
                "INSERT INTO {} (version) VALUES ($1)",
                sql.versions
            ))
            .bind(version)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await
    }

    /// Deletes expired records, claims and steps, in statements of at most
    /// [`purge_batch`](PostgresStoreBuilder::purge_batch) rows (rows locked
    /// by a running claim are skipped), and returns how many it deleted.
    /// Expired rows are already ignored by every step; this only reclaims
    /// space. Run it every few minutes from one place, e.g. a tokio task:
    ///
    /// ```no_run
    /// # async fn f(store: idem::PostgresStore) {
    /// tokio::spawn(async move {
    ///     let mut every = tokio::time::interval(std::time::Duration::from_secs(300));
    ///     loop {
    ///         every.tick().await;
    ///         match store.purge_expired().await {
    ///             Ok(n) => tracing::debug!(n, "idem: purged expired records"),
    ///             Err(err) => tracing::warn!(%err, "idem: purge failed"),
    ///         }
    ///     }
    /// });
    /// # }
    /// ```
    pub async fn purge_expired(&self) -> Result<u64, StoreError> {
        let batch = i64::from(self.inner.purge_batch);
        let mut total = 0;
        loop {
            let deleted = self
                .send(Want::RowsAffected, |_| {
                    sqlx::query(&self.inner.sql.purge).bind(batch)
                })
                .await?;
            let Out::Rows(n) = deleted else {
                unreachable!()
            };
            total += n;
            if n < batch as u64 {
                break;
            }
        }
        loop {
            let deleted = self
                .send(Want::RowsAffected, |_| {
                    sqlx::query(&self.inner.sql.steps.purge).bind(batch)
                })
                .await?;
            let Out::Rows(n) = deleted else {
                unreachable!()
            };
            total += n;
            if n < batch as u64 {
                return Ok(total);
            }
        }
    }

    /// Closes the store's idle connections (or the caller's pool, for a
    /// store made with `from_pool`). Steps after this open new ones.
    ///
    /// ```no_run
    /// # async fn f(store: idem::PostgresStore) {
    /// store.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        match &self.inner.conns {
            Source::Own(conns) => conns.close().await,
            Source::Pool(pool) => pool.close().await,
        }
    }

    /// Sends one statement. `build(again)` makes it; `again` is true when
    /// it is sent a second time after a lost connection.
    async fn send<'q>(
        &self,
        want: Want,
        build: impl Fn(bool) -> PgQuery<'q>,
    ) -> Result<Out, StoreError> {
        let err = |err| self.inner.sql.store_error(err);
        let conns = match &self.inner.conns {
            Source::Pool(pool) => {
                return self
                    .timed(send_on(build(false), pool, want))
                    .await?
                    .map_err(err);
            }
            Source::Own(conns) => conns,
        };
        let mut leased = conns.acquire().await?;
        // A timeout drops `leased`, closing a connection in an unknown state.
        match self
            .timed(send_on(build(false), leased.conn(), want))
            .await?
        {
            Ok(out) => {
                leased.keep();
                Ok(out)
            }
            // The connection died (an idle one found dead, a backend killed,
            // a server restarted): the steps are safe to repeat, so send it
            // once more on a new connection.
            Err(first) if lost_connection(&first) => {
                drop(leased);
                conns.drop_idle();
                tracing::debug!(error = %first, "idem: a PostgreSQL connection was lost; sending again on a new one");
                let mut leased = conns.acquire().await?;
                let out = self
                    .timed(send_on(build(true), leased.conn(), want))
                    .await?
                    .map_err(err)?;
                leased.keep();
                Ok(out)
            }
            // The statement failed on a live connection: close it all the
            // same, its state (an aborted transaction?) is not worth
            // reasoning about.
            Err(other) => Err(err(other)),
        }
    }

    /// A fenced step's answer. When it found no claim of ours, one more
    /// statement (on that rare path only) tells a takeover from an expiry.
    async fn fence(&self, out: Out, key: &RecordKey) -> Result<Fence, StoreError> {
        if out.fence().is_held() {
            return Ok(Fence::Held);
        }
        let sql = &self.inner.sql;
        let row = self
            .send(Want::Row, |_| sql.live_query(key.as_bytes()))
            .await?
            .row();
        let live: bool = row.try_get(0).map_err(|err| sql.store_error(err))?;
        Ok(if live { Fence::Lost } else { Fence::Expired })
    }

    /// `statement`, failed with `Error::Store` if the server does not
    /// answer within the response timeout.
    async fn timed<T>(&self, statement: impl Future<Output = T>) -> Result<T, StoreError> {
        let limit = self.inner.response_timeout;
        tokio::time::timeout(limit, statement).await.map_err(|_| {
            StoreError::new(
                BACKEND,
                format!(
                    "PostgreSQL did not answer within {limit:?} (response_timeout): the server is stalled or unreachable; whether the step took effect is unknown, and its claim, if any, ends with its lease"
                ),
            )
        })
    }
}

impl Sql {
    fn claim_query<'q>(&'q self, key: &'q [u8], claim: &'q ClaimBytes) -> PgQuery<'q> {
        sqlx::query(&self.claim)
            .bind(key)
            .bind(&claim.token[..])
            .bind(&claim.fingerprint[..])
            .bind(claim.lease_us)
            .bind(claim.site)
    }

    fn complete_query<'q>(
        &'q self,
        text: &'q str,
        key: &'q [u8],
        token: &'q [u8],
        record: &'q [u8],
        ttl: Duration,
    ) -> PgQuery<'q> {
        sqlx::query(text)
            .bind(key)
            .bind(token)
            .bind(record)
            .bind(micros(ttl))
    }

    fn release_query<'q>(&'q self, text: &'q str, key: &'q [u8], token: &'q [u8]) -> PgQuery<'q> {
        sqlx::query(text).bind(key).bind(token)
    }

    fn live_query<'q>(&'q self, key: &'q [u8]) -> PgQuery<'q> {
        sqlx::query(&self.live).bind(key)
    }

    fn renew_query<'q>(&'q self, key: &'q [u8], token: &'q [u8], lease: Duration) -> PgQuery<'q> {
        sqlx::query(&self.renew)
            .bind(key)
            .bind(token)
            .bind(micros(lease))
    }
}

struct ClaimBytes {
    token: [u8; 16],
    fingerprint: [u8; 32],
    lease_us: i64,
    site: &'static str,
}

impl From<&Claim> for ClaimBytes {
    fn from(claim: &Claim) -> Self {
        ClaimBytes {
            token: claim.token.to_bytes(),
            fingerprint: *claim.fingerprint.as_bytes(),
            lease_us: micros(claim.lease),
            site: claim.site,
        }
    }
}

/// Reads the claim function's row.
fn claim_outcome(row: &PgRow) -> Result<ClaimOutcome, StoreError> {
    let read = || -> Result<ClaimOutcome, Box<dyn std::error::Error + Send + Sync>> {
        let outcome: i32 = row.try_get(0)?;
        let remaining = || -> Result<Duration, sqlx::Error> {
            let us: i64 = row.try_get(3)?;
            Ok(Duration::from_micros(us.max(0) as u64))
        };
        let fingerprint = || -> Result<Fingerprint, Box<dyn std::error::Error + Send + Sync>> {
            let bytes: Vec<u8> = row.try_get(1)?;
            let bytes: [u8; 32] = bytes
                .try_into()
                .map_err(|_| "a stored fingerprint is not 32 bytes")?;
            Ok(Fingerprint::from_bytes(bytes))
        };
        Ok(match outcome {
            sql::WON | sql::TOOK_OVER => ClaimOutcome::Won {
                took_over: outcome == sql::TOOK_OVER,
                steps: steps::parse(row.try_get(4)?)?,
            },
            sql::IN_PROGRESS => ClaimOutcome::InProgress {
                fingerprint: fingerprint()?,
                retry_after: remaining()?,
            },
            sql::COMPLETED => ClaimOutcome::Completed {
                fingerprint: fingerprint()?,
                record: Bytes::from(row.try_get::<Vec<u8>, _>(2)?),
                expires_in: remaining()?,
            },
            other => return Err(format!("unknown claim outcome {other}").into()),
        })
    };
    read().map_err(|err| StoreError::new(BACKEND, err))
}

#[async_trait]
impl Store for PostgresStore {
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        let sql = &self.inner.sql;
        let bytes = ClaimBytes::from(claim);
        // The claim function answers Won again for our own token, so
        // sending it twice is safe.
        let row = self
            .send(Want::Row, |_| sql.claim_query(key.as_bytes(), &bytes))
            .await?
            .row();
        claim_outcome(&row)
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        let sql = &self.inner.sql;
        let token = token.to_bytes();
        let out = self
            .send(Want::RowsAffected, |again| {
                let text = if again {
                    &sql.complete_again
                } else {
                    &sql.complete
                };
                sql.complete_query(text, key.as_bytes(), &token, record, ttl)
            })
            .await?;
        self.fence(out, key).await
    }

    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        let sql = &self.inner.sql;
        let token = token.to_bytes();
        let out = self
            .send(Want::RowsAffected, |_| {
                sql.release_query(&sql.release, key.as_bytes(), &token)
            })
            .await?;
        self.fence(out, key).await
    }

    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        let sql = &self.inner.sql;
        let token = token.to_bytes();
        let out = self
            .send(Want::RowsAffected, |_| {
                sql.renew_query(key.as_bytes(), &token, lease)
            })
            .await?;
        self.fence(out, key).await
    }

    async fn save_step(
        &self,
        key: &RecordKey,
        token: Token,
        step: StepId,
        value: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        let sql = &self.inner.sql.steps;
        let token = token.to_bytes();
        // Sent again after a lost connection: the first save may have
        // landed, and saving the same value again changes nothing.
        let out = self
            .send(Want::RowsAffected, |_| {
                sqlx::query(&sql.save)
                    .bind(&key.as_bytes()[..])
                    .bind(&token[..])
                    .bind(&step.as_bytes()[..])
                    .bind(value)
                    .bind(micros(ttl))
            })
            .await?;
        self.fence(out, key).await
    }

    fn records_steps(&self) -> bool {
        true
    }

    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        let sql = &self.inner.sql;
        self.send(Want::RowsAffected, |_| {
            sqlx::query(&sql.forget).bind(&key.as_bytes()[..])
        })
        .await?;
        Ok(())
    }
}
