//! A billing consumer on NATS JetStream: each `orders.placed` message bills
//! its order exactly once, however often the broker delivers it, even when
//! the worker is killed mid-way.
//!
//! Run (several copies may run at once; each runs until killed):
//! `cargo run --example jetstream_worker --features postgres`
//!
//! Environment: `NATS_URL` (default `nats://127.0.0.1:4222`),
//! `DATABASE_URL` (default the loopback PostgreSQL `test` database),
//! `IDEM_STREAM` (default `ORDERS`, created if absent), `IDEM_SUBJECT`
//! (default `orders.placed`), `IDEM_CONSUMER` (default `billing`, a durable
//! pull consumer, created if absent), `IDEM_EFFECTS_TABLE` (default
//! `billing_effects`), `IDEM_SCHEMA` (where idem keeps its records, default
//! `public`), `IDEM_ACK_WAIT_MS` (default 30000) and `IDEM_MODE`:
//! `transactional` (default: the effect and the record commit together) or
//! `plain` (the effect, then the record: a crash in between can double it).
//!
//! A message is JSON `{"order_id": "<str>", "amount_cents": <int>}`, keyed
//! by its business id, `order_id`, never by the broker's delivery id.

use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer::pull};
use futures::StreamExt;
use idem::queue::{Disposition, with_heartbeat};
use idem::{Idempotency, PostgresStore};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

#[derive(Debug, Serialize, Deserialize)]
struct OrderPlaced {
    order_id: String,
    amount_cents: i64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Billed {
    order_id: String,
    amount_cents: i64,
}

/// The handler's errors: idem's own, or the database's (released, so the
/// redelivery runs again).
#[derive(Debug)]
enum BillingError {
    Idem(idem::Error),
    Db(sqlx::Error),
}

impl From<idem::Error> for BillingError {
    fn from(err: idem::Error) -> Self {
        BillingError::Idem(err)
    }
}

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

struct Worker {
    idem: Idempotency,
    store: PostgresStore,
    pool: PgPool,
    effects: String,
    transactional: bool,
}

impl Worker {
    /// Bills one order; the effect is one row in the effects table.
    async fn bill(&self, order: &OrderPlaced) -> Result<Billed, BillingError> {
        let call = self
            .idem
            .call("billing", &order.order_id)
            .fingerprint(order);
        let insert = format!(
            "INSERT INTO {} (order_id, amount_cents) VALUES ($1, $2)",
            self.effects
        );
        let billed = || Billed {
            order_id: order.order_id.clone(),
            amount_cents: order.amount_cents,
        };
        if !self.transactional {
            return call
                .run(|| async {
                    sqlx::query(&insert)
                        .bind(&order.order_id)
                        .bind(order.amount_cents)
                        .execute(&self.pool)
                        .await
                        .map_err(BillingError::Db)?;
                    Ok(billed())
                })
                .await;
        }
        let mut tx = self.pool.begin().await.map_err(BillingError::Db)?;
        let out = self
            .store
            .in_transaction(&mut tx, call)
            .run(async |conn| {
                sqlx::query(&insert)
                    .bind(&order.order_id)
                    .bind(order.amount_cents)
                    .execute(&mut *conn)
                    .await
                    .map_err(BillingError::Db)?;
                Ok(billed())
            })
            .await;
        match out {
            Ok(billed) => {
                tx.commit().await.map_err(BillingError::Db)?;
                Ok(billed)
            }
            Err(err) => {
                let _ = tx.rollback().await;
                Err(err)
            }
        }
    }
}

fn disposition(out: &Result<Billed, BillingError>) -> Disposition {
    match out {
        Ok(_) => Disposition::Ack,
        Err(BillingError::Idem(err)) => Disposition::of_error(err),
        Err(BillingError::Db(err)) => {
            eprintln!("database error, message retried: {err}");
            Disposition::Retry {
                after: Duration::from_secs(1),
            }
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let nats_url = env("NATS_URL", "nats://127.0.0.1:4222");
    let db_url = env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test");
    let stream_name = env("IDEM_STREAM", "ORDERS");
    let subject = env("IDEM_SUBJECT", "orders.placed");
    let consumer_name = env("IDEM_CONSUMER", "billing");
    let effects = env("IDEM_EFFECTS_TABLE", "billing_effects");
    let schema = env("IDEM_SCHEMA", "public");
    let ack_wait = Duration::from_millis(env("IDEM_ACK_WAIT_MS", "30000").parse()?);
    let transactional = env("IDEM_MODE", "transactional") != "plain";

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
    let worker = Worker {
        idem: Idempotency::new(store.clone()),
        store,
        pool,
        effects,
        transactional,
    };

    let js = jetstream::new(async_nats::connect(&nats_url).await?);
    let stream = js
        .get_or_create_stream(jetstream::stream::Config {
            name: stream_name,
            subjects: vec![subject],
            ..Default::default()
        })
        .await?;
    let consumer = stream
        .get_or_create_consumer(
            &consumer_name,
            pull::Config {
                durable_name: Some(consumer_name.clone()),
                ack_wait,
                ..Default::default()
            },
        )
        .await?;
    println!(
        "billing worker {} ready (transactional: {transactional})",
        std::process::id()
    );

    let mut messages = consumer.messages().await?;
    while let Some(message) = messages.next().await {
        let message = message?;
        let Ok(order) = serde_json::from_slice::<OrderPlaced>(&message.payload) else {
            message.ack_with(AckKind::Term).await?;
            continue;
        };
        // While the body runs, the call renews its claim and this keeps the
        // message: an in-progress ack every third of the ack wait.
        let out = with_heartbeat(worker.bill(&order), ack_wait / 3, || async {
            let _ = message.ack_with(AckKind::Progress).await;
        })
        .await;
        match disposition(&out) {
            Disposition::Ack => message.double_ack().await?,
            Disposition::Retry { after } => message.ack_with(AckKind::Nak(Some(after))).await?,
            Disposition::Reject => {
                eprintln!(
                    "poison message for order {}: {:?}",
                    order.order_id,
                    out.err()
                );
                message.ack_with(AckKind::Term).await?
            }
        }
    }
    Ok(())
}
