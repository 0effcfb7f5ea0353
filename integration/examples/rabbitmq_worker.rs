//! The billing consumer of `jetstream_worker`, behind a RabbitMQ queue with
//! manual acks.
//!
//! Run: `cargo run -p idem-integration --example rabbitmq_worker`
//!
//! Environment: `AMQP_URL` (default `amqp://guest:guest@127.0.0.1:5672/%2f`),
//! `IDEM_QUEUE` (default `orders.placed`, declared durable if absent), and
//! the billing settings of `examples/billing/mod.rs` (`DATABASE_URL`,
//! `IDEM_EFFECTS_TABLE`, `IDEM_SCHEMA`, `IDEM_MODE`).
//!
//! RabbitMQ has no delayed negative ack: a retry waits its delay, then
//! requeues; a poison message is rejected without requeue, so a
//! dead-letter exchange on the queue receives it.

#[path = "billing/mod.rs"]
mod billing;

use billing::{BoxError, OrderPlaced, Worker, disposition, env};
use futures::StreamExt;
use idem::queue::Disposition;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions, BasicRejectOptions,
    QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let amqp_url = env("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f");
    let queue = env("IDEM_QUEUE", "orders.placed");
    let worker = Worker::from_env().await?;

    let connection = Connection::connect(&amqp_url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    channel.basic_qos(8, BasicQosOptions::default()).await?;
    channel
        .queue_declare(
            queue.as_str(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    let mut deliveries = channel
        .basic_consume(
            queue.as_str(),
            "billing",
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    println!(
        "billing worker {} ready on queue {queue} (transactional: {})",
        std::process::id(),
        worker.transactional
    );

    while let Some(delivery) = deliveries.next().await {
        let delivery = delivery?;
        let Ok(order) = serde_json::from_slice::<OrderPlaced>(&delivery.data) else {
            delivery
                .reject(BasicRejectOptions { requeue: false })
                .await?;
            continue;
        };
        let out = worker.bill(&order).await;
        // Each answer says whether the broker took it; a lost ack means a
        // redelivery, which the idempotent handler absorbs.
        let _answered = match disposition(&out) {
            Disposition::Ack => delivery.ack(BasicAckOptions::default()).await?,
            Disposition::Retry { after } => {
                tokio::time::sleep(after.min(std::time::Duration::from_secs(5))).await;
                let requeue = BasicNackOptions {
                    requeue: true,
                    ..Default::default()
                };
                delivery.nack(requeue).await?
            }
            Disposition::Reject => {
                eprintln!("poison message for order {}", order.order_id);
                delivery
                    .reject(BasicRejectOptions { requeue: false })
                    .await?
            }
        };
    }
    Ok(())
}
