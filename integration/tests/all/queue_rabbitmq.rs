//! The `rabbitmq_worker` example on a real RabbitMQ (127.0.0.1:5672 or
//! `AMQP_URL`): 300 orders, 10% published twice, one SIGKILL of the worker
//! mid-way and a restart; afterwards every order is billed exactly once.

use crate::support::pg_server;
use crate::support::queue_worker;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lapin::options::{BasicPublishOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use queue_worker::Process;
use sqlx::Connection as _;
use sqlx::postgres::PgConnection;

const ORDERS: usize = 300;

fn worker(queue: &str, effects: &str, schema: &str, amqp: &str, db: &str) -> Process {
    Process::spawn(
        Command::new(queue_worker::example("rabbitmq_worker"))
            .env("AMQP_URL", amqp)
            .env("DATABASE_URL", db)
            .env("IDEM_QUEUE", queue)
            .env("IDEM_EFFECTS_TABLE", effects)
            .env("IDEM_SCHEMA", schema)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
}

/// Messages ready in `queue` (not counting deliveries a consumer holds).
async fn ready(channel: &lapin::Channel, queue: &str) -> u32 {
    channel
        .queue_declare(
            queue,
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap()
        .message_count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_order_is_billed_once_through_redelivery_and_a_kill() {
    let amqp = std::env::var("AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
    let db = pg_server::url().await;
    let id = format!("{:08x}", idem::store::Token::random().to_u128() as u32);
    let (queue, effects, schema) = (
        format!("idem.orders.{id}"),
        format!("rmq_effects_{id}"),
        format!("idem_r_{id}"),
    );
    let connection = Connection::connect(&amqp, ConnectionProperties::default())
        .await
        .expect("RabbitMQ is not reachable: install and start rabbitmq-server (Debian: apt-get install rabbitmq-server) or set AMQP_URL");
    let channel = connection.create_channel().await.unwrap();
    channel
        .queue_declare(
            queue.as_str(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    let mut pg = PgConnection::connect(&db).await.unwrap();
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut pg)
        .await
        .unwrap();

    let mut published = 0;
    for i in 0..ORDERS {
        let body = format!(r#"{{"order_id": "order-{i}", "amount_cents": {i}}}"#);
        for _ in 0..if i % 10 == 0 { 2 } else { 1 } {
            channel
                .basic_publish(
                    "",
                    queue.as_str(),
                    BasicPublishOptions::default(),
                    body.as_bytes(),
                    BasicProperties::default(),
                )
                .await
                .unwrap()
                .await
                .unwrap();
            published += 1;
        }
    }

    let mut child = worker(&queue, &effects, &schema, &amqp, &db);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut killed = false;
    loop {
        let ready_now = ready(&channel, &queue).await;
        let billed: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {effects}"))
            .fetch_one(&mut pg)
            .await
            .unwrap_or(0);
        if !killed && billed > (ORDERS / 3) as i64 {
            child.kill();
            child = worker(&queue, &effects, &schema, &amqp, &db);
            killed = true;
        }
        // Nothing ready and every order billed: stop the worker. Any
        // delivery it had not acked goes back to the queue, so an empty
        // queue after the stop means every message was answered.
        if killed && ready_now == 0 && billed >= ORDERS as i64 {
            child.kill();
            tokio::time::sleep(Duration::from_millis(300)).await;
            if ready(&channel, &queue).await == 0 {
                break;
            }
            child = worker(&queue, &effects, &schema, &amqp, &db);
        }
        assert!(
            Instant::now() < deadline,
            "the queue did not drain: {ready_now} left, {billed} billed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (rows, distinct): (i64, i64) = sqlx::query_as(&format!(
        "SELECT count(*), count(DISTINCT order_id) FROM {effects}"
    ))
    .fetch_one(&mut pg)
    .await
    .unwrap();
    println!(
        "rabbitmq: {published} messages ({ORDERS} orders), 1 kill, {rows} effect rows, {} duplicate effects",
        rows - distinct
    );
    assert_eq!((rows, distinct), (ORDERS as i64, ORDERS as i64));

    let _ = channel
        .queue_delete(queue.as_str(), QueueDeleteOptions::default())
        .await;
    let _ = sqlx::query(&format!("DROP TABLE {effects}"))
        .execute(&mut pg)
        .await;
    let _ = sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut pg)
        .await;
}
