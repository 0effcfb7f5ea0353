//! The billing handler shared by the JetStream and RabbitMQ workers: one
//! effect row per order, keyed by the order id, in PostgreSQL.
//!
//! Environment: `DATABASE_URL` (default the loopback PostgreSQL `test`
//! database), `IDEM_EFFECTS_TABLE` (default `billing_effects`),
//! `IDEM_SCHEMA` (where idem keeps its records, default `public`) and
//! `IDEM_MODE`: `transactional` (default: the effect and the record commit
//! together) or `plain` (the effect, then the record: a crash in between
//! can double it).

use idem::postgres::TxHandle;
use idem::queue::{AsIdemError, Disposition};
use idem::{Idempotency, PostgresStore, idempotent};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct OrderPlaced {
    pub order_id: String,
    pub amount_cents: i64,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Billed {
    order_id: String,
    amount_cents: i64,
}

/// The handler's errors: idem's own, or the database's (released, so the
/// redelivery runs again).
#[derive(Debug)]
pub(crate) enum BillingError {
    Idem(idem::Error),
    Db(sqlx::Error),
}

impl From<idem::Error> for BillingError {
    fn from(err: idem::Error) -> Self {
        BillingError::Idem(err)
    }
}

/// Which of the handler's errors are idem's, for `Disposition::of_result`.
impl AsIdemError for BillingError {
    fn as_idem_error(&self) -> Option<&idem::Error> {
        match self {
            BillingError::Idem(err) => Some(err),
            BillingError::Db(_) => None,
        }
    }
}

pub(crate) fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

pub(crate) struct Worker {
    idem: Idempotency,
    store: PostgresStore,
    pool: PgPool,
    /// The statement of the effect: one row per billing.
    insert_sql: String,
    pub transactional: bool,
}

impl Worker {
    /// Bills one order; the effect is one row in the effects table.
    pub(crate) async fn bill(&self, order: &OrderPlaced) -> Result<Billed, BillingError> {
        if !self.transactional {
            return self.bill_plain(order).await;
        }
        // Claim, effect and record in one transaction: killed before the
        // commit, none of them stays, and the redelivery bills at once.
        let tx = self
            .store
            .tx_handle(self.pool.begin().await.map_err(BillingError::Db)?);
        let out = self.bill_in(&tx, order).await;
        match out {
            // A replay commits nothing new; a first run commits both.
            Ok(_) => tx.commit().await.map_err(BillingError::Db)?,
            Err(_) => {
                let _ = tx.rollback().await;
            }
        }
        out
    }

    /// The transactional mode: keyed by the business id, the order's;
    /// the effect goes through the transaction that holds the claim.
    #[idempotent(key = order.order_id, scope = "billing", fingerprint = order, store = tx)]
    async fn bill_in(&self, tx: &TxHandle, order: &OrderPlaced) -> Result<Billed, BillingError> {
        self.insert(order)
            .execute(&mut *tx.conn().await)
            .await
            .map_err(BillingError::Db)?;
        Ok(Billed::of(order))
    }

    /// The plain mode: the effect, then the record. A crash in between
    /// leaves an effect with no record, and the redelivery bills again.
    #[idempotent(key = order.order_id, scope = "billing", fingerprint = order, store = self.idem)]
    async fn bill_plain(&self, order: &OrderPlaced) -> Result<Billed, BillingError> {
        self.insert(order)
            .execute(&self.pool)
            .await
            .map_err(BillingError::Db)?;
        Ok(Billed::of(order))
    }

    fn insert<'q>(
        &'q self,
        order: &'q OrderPlaced,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        sqlx::query(self.insert_sql.as_str())
            .bind(&order.order_id)
            .bind(order.amount_cents)
    }
}

impl Billed {
    fn of(order: &OrderPlaced) -> Self {
        Billed {
            order_id: order.order_id.clone(),
            amount_cents: order.amount_cents,
        }
    }
}

/// What to tell the broker about a billed (or not) message. The handler
/// stores no error (`errors = "release"`, the default): `|_| false`.
pub(crate) fn disposition(out: &Result<Billed, BillingError>) -> Disposition {
    if let Err(BillingError::Db(err)) = out {
        eprintln!("database error, message retried: {err}");
    }
    Disposition::of_result(out, |_| false)
}

impl Worker {
    /// Connects to PostgreSQL, creates the effects table and idem's table.
    pub(crate) async fn from_env() -> Result<Worker, BoxError> {
        let db_url = env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test");
        let effects = env("IDEM_EFFECTS_TABLE", "billing_effects");
        let schema = env("IDEM_SCHEMA", "public");
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect(&db_url)
            .await?;
        sqlx::query(&format!(
            "CREATE TABLE IF NOT EXISTS {effects} (order_id TEXT, amount_cents BIGINT, applied_at TIMESTAMPTZ DEFAULT now())"
        ))
        .execute(&pool)
        .await?;
        let store = PostgresStore::builder()
            .schema(&schema)
            .connect(&db_url)
            .await?;
        store.migrate().await?;
        Ok(Worker {
            idem: Idempotency::new(store.clone()),
            store,
            pool,
            insert_sql: format!("INSERT INTO {effects} (order_id, amount_cents) VALUES ($1, $2)"),
            transactional: env("IDEM_MODE", "transactional") != "plain",
        })
    }
}
