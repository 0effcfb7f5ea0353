//! A billing consumer on NATS JetStream: each `orders.placed` message bills
//! its order exactly once, however often the broker delivers it, even when
//! the worker is killed mid-way.
//!
//! Run (several copies may run at once; each runs until killed):
//! `cargo run -p idem-integration --example jetstream_worker`
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
//! A message is JSON `{"order_id": "<str>", "amount_cents": <int>}`. The
//! handler (`examples/billing/mod.rs`) is `#[idempotent(key =
//! order.order_id, …)]`: keyed by the business id, never by the broker's
//! message id; in transactional mode it runs on a
//! `PostgresStore::tx_handle`, so its effect, one row in `billing_effects`,
//! and its record commit together. Each outcome is answered per
//! `idem::queue::Disposition`: ack, nak with a delay, or term (poison).

#[path = "billing/mod.rs"]
mod billing;

use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer::pull};
use billing::{BoxError, OrderPlaced, Worker, disposition, env};
use futures::StreamExt;
use idem::queue::{Disposition, with_heartbeat};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let nats_url = env("NATS_URL", "nats://127.0.0.1:4222");
    let stream_name = env("IDEM_STREAM", "ORDERS");
    let subject = env("IDEM_SUBJECT", "orders.placed");
    let consumer_name = env("IDEM_CONSUMER", "billing");
    let ack_wait = Duration::from_millis(env("IDEM_ACK_WAIT_MS", "30000").parse()?);
    let worker = Worker::from_env().await?;
    let transactional = worker.transactional;

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
