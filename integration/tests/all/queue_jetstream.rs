//! Queue handlers on a real broker: the `jetstream_worker` example under
//! redelivery, producer retries and SIGKILLs, against NATS JetStream and
//! PostgreSQL on loopback.
//!
//! 2,000 orders are published, 10% of them twice with different
//! `Nats-Msg-Id`s (a producer retry past the dedupe window), plus one
//! poison message (a seen order id with another amount). Two worker
//! processes consume; one is SIGKILLed mid-way several times and
//! restarted. When the consumer has nothing pending, the effects table must
//! hold exactly one row per order in transactional mode. The same run
//! without it is reported honestly: a kill between effect and completion
//! can double an effect. Beside it: a poison message is terminated on its
//! first delivery, and a handler slower than the ack wait keeps its
//! message (in-progress acks) and its claim.

use crate::support::pg_server;
use crate::support::queue_worker;

use std::process::{Command, Stdio};

use queue_worker::Process;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, message::PublishMessage as Publish};
use sqlx::Connection;
use sqlx::postgres::PgConnection;

const ORDERS: usize = 2_000;
const KILLS: usize = 4;

/// A NATS with JetStream: `NATS_URL`, else the loopback server, else a
/// private `nats-server -js` (killed when the test ends).
async fn nats() -> (String, Option<(Process, pg_server::ports::Reserved)>) {
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    if async_nats::connect(&url).await.is_ok() {
        return (url, None);
    }
    let reserved = pg_server::ports::reserve();
    let port = reserved.port;
    let dir = std::env::temp_dir().join(format!("idem-nats-{}", std::process::id()));
    let child = Command::new("nats-server")
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Process::from)
        .expect("no NATS answers and nats-server is not installed (Debian: apt-get install nats-server)");
    let url = format!("nats://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while async_nats::connect(&url).await.is_err() {
        assert!(Instant::now() < deadline, "nats-server did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (url, Some((child, reserved)))
}

struct Run {
    id: String,
    nats: String,
    db: String,
    transactional: bool,
}

impl Run {
    fn stream(&self) -> String {
        format!("IDEM_T_{}", self.id)
    }
    fn subject(&self) -> String {
        format!("idem.t.{}.orders", self.id)
    }
    fn effects(&self) -> String {
        format!("billing_effects_{}", self.id)
    }
    fn schema(&self) -> String {
        format!("idem_q_{}", self.id)
    }

    fn spawn_worker(&self) -> Process {
        Process::spawn(
            Command::new(queue_worker::example("jetstream_worker"))
                .env("NATS_URL", &self.nats)
                .env("DATABASE_URL", &self.db)
                .env("IDEM_STREAM", self.stream())
                .env("IDEM_SUBJECT", self.subject())
                .env("IDEM_CONSUMER", format!("billing_{}", self.id))
                .env("IDEM_EFFECTS_TABLE", self.effects())
                .env("IDEM_SCHEMA", self.schema())
                .env("IDEM_ACK_WAIT_MS", "2000")
                .env(
                    "IDEM_MODE",
                    if self.transactional {
                        "transactional"
                    } else {
                        "plain"
                    },
                )
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
    }
}

struct Figures {
    published: usize,
    kills: usize,
    /// Deliveries of all messages, redeliveries included.
    deliveries: u64,
    rows: i64,
    distinct: i64,
}

impl Figures {
    fn report(&self, mode: &str) {
        println!(
            "{mode}: {} messages published ({ORDERS} orders, {} republished, 1 poison), {} deliveries ({} redeliveries), {} kills, {} effect rows, {} duplicate effects",
            self.published,
            self.published - ORDERS - 1,
            self.deliveries,
            self.deliveries - self.published as u64,
            self.kills,
            self.rows,
            self.rows - self.distinct
        );
    }
}

async fn chaos(transactional: bool) -> Figures {
    let (nats_url, _nats_child) = nats().await;
    let run = Run {
        id: format!("{:08x}", idem::store::Token::random().to_u128() as u32),
        nats: nats_url,
        db: pg_server::url().await,
        transactional,
    };
    let mut db = PgConnection::connect(&run.db).await.unwrap();
    sqlx::query(&format!("CREATE SCHEMA {}", run.schema()))
        .execute(&mut db)
        .await
        .unwrap();

    let js = jetstream::new(async_nats::connect(&run.nats).await.unwrap());
    let stream = js
        .get_or_create_stream(jetstream::stream::Config {
            name: run.stream(),
            subjects: vec![run.subject()],
            ..Default::default()
        })
        .await
        .unwrap();
    let mut acks = Vec::new();
    let mut published = 0;
    for i in 0..ORDERS {
        let body = format!(
            r#"{{"order_id": "order-{i}", "amount_cents": {}}}"#,
            100 + i
        );
        let copies = if i % 10 == 0 { 2 } else { 1 };
        for copy in 0..copies {
            let publish = Publish::build()
                .payload(body.clone().into())
                .message_id(format!("msg-{i}-{copy}"));
            acks.push(js.send_publish(run.subject(), publish).await.unwrap());
            published += 1;
        }
    }
    // The poison message: a seen order id with another amount.
    let poison = Publish::build()
        .payload(r#"{"order_id": "order-1", "amount_cents": 1}"#.into())
        .message_id("poison");
    acks.push(js.send_publish(run.subject(), poison).await.unwrap());
    published += 1;
    for ack in acks {
        ack.await.unwrap();
    }

    let mut workers = [run.spawn_worker(), run.spawn_worker()];
    let consumer_name = format!("billing_{}", run.id);
    let mut kills = 0;
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut consumer = loop {
        if let Ok(c) = stream
            .get_consumer::<jetstream::consumer::pull::Config>(&consumer_name)
            .await
        {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "the workers never created their consumer"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let drained = loop {
        let info = consumer.info().await.unwrap().clone();
        // Kill worker 0 when 1/6, 2/6, … of the stream is acked: mid-way
        // through the work, with messages of its own in flight.
        if kills < KILLS
            && info.ack_floor.stream_sequence
                > (kills as u64 + 1) * published as u64 / (KILLS as u64 + 2)
        {
            workers[0].kill();
            workers[0] = run.spawn_worker();
            kills += 1;
        }
        if kills == KILLS && info.num_pending == 0 && info.num_ack_pending == 0 {
            break info;
        }
        assert!(
            Instant::now() < deadline,
            "the consumer did not drain: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Every delivery, redeliveries included, takes a consumer sequence
    // number.
    let deliveries = drained.delivered.consumer_sequence;
    drop(workers);

    let (rows, distinct): (i64, i64) = sqlx::query_as(&format!(
        "SELECT count(*), count(DISTINCT order_id) FROM {}",
        run.effects()
    ))
    .fetch_one(&mut db)
    .await
    .unwrap();
    let poisoned: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {} WHERE order_id = 'order-1' AND amount_cents = 1",
        run.effects()
    ))
    .fetch_one(&mut db)
    .await
    .unwrap();
    assert_eq!(poisoned, 0, "the poison message took effect");

    let _ = js.delete_stream(run.stream()).await;
    let _ = sqlx::query(&format!("DROP TABLE {}", run.effects()))
        .execute(&mut db)
        .await;
    let _ = sqlx::query(&format!("DROP SCHEMA {} CASCADE", run.schema()))
        .execute(&mut db)
        .await;
    Figures {
        published,
        kills,
        deliveries,
        rows,
        distinct,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_mode_bills_each_order_exactly_once_through_kills() {
    let f = chaos(true).await;
    f.report("transactional");
    assert_eq!(f.distinct, ORDERS as i64, "an order was never billed");
    assert_eq!(f.rows, ORDERS as i64, "an order was billed twice");
    assert_eq!(f.kills, KILLS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_mode_reports_its_duplicates() {
    let f = chaos(false).await;
    f.report("plain");
    // Every order is billed; without the transactional mode a kill between
    // the effect and the completion may bill one twice, so only an upper
    // bound holds: one extra effect per kill at most.
    assert_eq!(f.distinct, ORDERS as i64, "an order was never billed");
    assert!(
        f.rows - f.distinct <= f.kills as i64,
        "{} duplicates",
        f.rows - f.distinct
    );
}

/// A message whose order id was billed with another payload is poison: the
/// worker terminates it (`AckKind::Term`) on its first delivery; the broker
/// never redelivers it and it has no effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_message_is_terminated_not_retried() {
    let (nats_url, _nats_child) = nats().await;
    let run = Run {
        id: format!("{:08x}", idem::store::Token::random().to_u128() as u32),
        nats: nats_url,
        db: pg_server::url().await,
        transactional: true,
    };
    let mut db = PgConnection::connect(&run.db).await.unwrap();
    sqlx::query(&format!("CREATE SCHEMA {}", run.schema()))
        .execute(&mut db)
        .await
        .unwrap();
    let js = jetstream::new(async_nats::connect(&run.nats).await.unwrap());
    let stream = js
        .get_or_create_stream(jetstream::stream::Config {
            name: run.stream(),
            subjects: vec![run.subject()],
            ..Default::default()
        })
        .await
        .unwrap();
    let mut worker = run.spawn_worker();
    let drained = async |acked: u64| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut consumer) = stream
                .get_consumer::<jetstream::consumer::pull::Config>(&format!("billing_{}", run.id))
                .await
            {
                let info = consumer.info().await.unwrap().clone();
                if info.ack_floor.stream_sequence == acked
                    && info.num_pending == 0
                    && info.num_ack_pending == 0
                {
                    return info;
                }
                assert!(Instant::now() < deadline, "not drained: {info:?}");
            }
            assert!(Instant::now() < deadline, "no consumer");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    for (n, body) in [
        r#"{"order_id": "order-7", "amount_cents": 700}"#,
        r#"{"order_id": "order-7", "amount_cents": 1}"#,
    ]
    .into_iter()
    .enumerate()
    {
        js.publish(run.subject(), body.into())
            .await
            .unwrap()
            .await
            .unwrap();
        drained(n as u64 + 1).await;
    }
    // Longer than the ack wait (2 s): a nak or a lost ack would show as a
    // redelivery by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let info = drained(2).await;
    worker.kill();
    let amounts: Vec<i64> = sqlx::query_scalar(&format!(
        "SELECT amount_cents FROM {} WHERE order_id = 'order-7'",
        run.effects()
    ))
    .fetch_all(&mut db)
    .await
    .unwrap();
    let _ = js.delete_stream(run.stream()).await;
    let _ = sqlx::query(&format!("DROP TABLE {}", run.effects()))
        .execute(&mut db)
        .await;
    let _ = sqlx::query(&format!("DROP SCHEMA {} CASCADE", run.schema()))
        .execute(&mut db)
        .await;
    assert_eq!(
        info.delivered.consumer_sequence, 2,
        "each message delivered once: {info:?}"
    );
    assert_eq!(amounts, [700], "the poison message took effect");
}

/// A handler slower than the consumer's ack wait keeps its message through
/// in-progress acks (no redelivery) and keeps its claim (lease renewal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handler_keeps_its_message_and_its_claim() {
    use futures::StreamExt;
    use idem::queue::{Disposition, process, with_heartbeat};

    let (nats_url, _nats_child) = nats().await;
    let id = format!("{:08x}", idem::store::Token::random().to_u128() as u32);
    let js = jetstream::new(async_nats::connect(&nats_url).await.unwrap());
    let stream = js
        .get_or_create_stream(jetstream::stream::Config {
            name: format!("IDEM_SLOW_{id}"),
            subjects: vec![format!("idem.slow.{id}")],
            ..Default::default()
        })
        .await
        .unwrap();
    js.send_publish(
        format!("idem.slow.{id}"),
        Publish::build().payload("order-1".into()),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let ack_wait = Duration::from_secs(1);
    let consumer = stream
        .get_or_create_consumer(
            "slow",
            jetstream::consumer::pull::Config {
                durable_name: Some("slow".into()),
                ack_wait,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut messages = consumer.messages().await.unwrap();
    let message = messages.next().await.unwrap().unwrap();

    let idem = idem::Idempotency::new(idem::MemoryStore::new());
    let lease = Duration::from_millis(600);
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let slow = {
        let idem = idem.clone();
        async move {
            let call = idem.call("billing", "order-1").lease(lease);
            process(call, || {
                with_heartbeat(
                    async {
                        started_tx.send(()).unwrap();
                        tokio::time::sleep(ack_wait * 4).await;
                        Ok::<_, idem::Error>(1u8)
                    },
                    ack_wait / 4,
                    || async {
                        message
                            .ack_with(jetstream::AckKind::Progress)
                            .await
                            .unwrap();
                    },
                )
            })
            .await
            .disposition
        }
    };
    let probe = async {
        started_rx.await.unwrap();
        // Well past the ack wait and the lease: no redelivery, no takeover.
        tokio::time::sleep(ack_wait * 2).await;
        let redelivered = tokio::time::timeout(Duration::from_millis(500), messages.next()).await;
        let dup = process(idem.call("billing", "order-1").lease(lease), || async {
            Ok::<_, idem::Error>(2u8)
        })
        .await;
        (redelivered.is_err(), dup.disposition)
    };
    let (disposition, (no_redelivery, dup)) = tokio::join!(slow, probe);
    assert_eq!(disposition, Disposition::Ack);
    assert!(
        no_redelivery,
        "the broker redelivered the message to another consumer"
    );
    assert!(
        matches!(dup, Disposition::Retry { .. }),
        "the claim was lost: {dup:?}"
    );
    let _ = js.delete_stream(format!("IDEM_SLOW_{id}")).await;
}
