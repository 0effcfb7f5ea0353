//! The SIGKILL chaos test of whole endpoints (SPEC §7, issue 47): an
//! orders API behind the real layer, in a server process of its own on
//! PostgreSQL or MySQL, takes 200 orders from 8 clients that retry each
//! order with its key until it is answered. The server is SIGKILLed 6
//! times and restarted on the same port: 3 kills land in the window after
//! the handler's insert and before its record completes (the handler
//! prints `wrote REF` and sleeps), 3 at random moments.
//!
//! - With the transactional mode, the insert and the record commit
//!   together: every order exists exactly once, and every client's answer
//!   names it.
//! - Without it (the handler inserts on the pool, the layer completes the
//!   record after), each kill in the window leaves an order without its
//!   record, and the retry (once the 1 s lease lapses) inserts it again.
//!
//! The server is this test binary, run as `chaos_server` with
//! `IDEM_HTTP_TX_CHAOS` set.

use crate::http_tx::HttpTx;
use crate::support::http::Server;
use crate::support::pg_server::ports;
use crate::support::sql::tx::Order;
use crate::support::sql::{self, Knobs, SqlServer};
use crate::support::sql_mysql::MySqlServer as My;
use crate::support::sql_pg::Pg;
use crate::support::test_name;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use idem::Idempotency;
use idem::http::{IdempotencyLayer, Transaction};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const ENV: &str = "IDEM_HTTP_TX_CHAOS";
const ORDERS: usize = 200;
const CLIENTS: usize = 8;
const KILLS: u32 = 6;
/// How long the handler sleeps after its insert: the window.
const WINDOW: Duration = Duration::from_millis(60);
/// How long one run may take before it is a failure.
const STALL: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Spec {
    mysql: bool,
    place: String,
    orders: String,
    transactional: bool,
    port: u16,
}

/// The server process (a no-op unless `IDEM_HTTP_TX_CHAOS` is set).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_server() {
    if let Ok(spec) = std::env::var(ENV) {
        let spec: Spec = serde_json::from_str(&spec).unwrap();
        match spec.mysql {
            false => serve::<Pg>(spec).await,
            true => serve::<My>(spec).await,
        }
    }
}

struct Shop<S: SqlServer> {
    orders: String,
    pool: sqlx::Pool<S::Db>,
}

/// Serves the orders API until killed: on the store's own connections
/// (`connect`), so a transaction's connection is one of the store's.
async fn serve<S: HttpTx>(spec: Spec) {
    let store = S::connect_with(&spec.place, Knobs::default(), sql::options::<S>().await)
        .await
        .unwrap();
    let pool = sqlx::Pool::<S::Db>::connect(&S::url().await).await.unwrap();
    let shop = Arc::new(Shop::<S> {
        orders: spec.orders.clone(),
        pool,
    });
    let layer =
        IdempotencyLayer::new(Idempotency::new(store.clone())).lease(Duration::from_secs(1));
    let app = if spec.transactional {
        Router::new()
            .route("/orders", post(in_transaction::<S>))
            .layer(layer.transactional(store))
    } else {
        Router::new()
            .route("/orders", post(on_the_pool::<S>))
            .layer(layer)
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", spec.port))
        .await
        .unwrap();
    println!("listening");
    axum::serve(listener, app.with_state(shop)).await.unwrap();
}

/// Inserts the order in the request's transaction.
async fn in_transaction<S: HttpTx>(
    State(shop): State<Arc<Shop<S>>>,
    tx: Transaction<S::Conn>,
    Json(order): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let reference = order["ref"].as_str().unwrap();
    let order = S::insert(
        &mut *tx.conn().await.unwrap(),
        &shop.orders,
        reference,
        "tea",
    )
    .await;
    created(reference, order).await
}

/// Inserts the order on a pool connection, committed at once.
async fn on_the_pool<S: HttpTx>(
    State(shop): State<Arc<Shop<S>>>,
    Json(order): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let reference = order["ref"].as_str().unwrap();
    let order = S::insert_on_pool(&shop.pool, &shop.orders, reference).await;
    created(reference, order).await
}

/// Says the order is written, then waits in the window before answering.
async fn created(reference: &str, order: Order) -> (StatusCode, Json<Value>) {
    println!("wrote {reference}");
    tokio::time::sleep(WINDOW).await;
    (StatusCode::CREATED, Json(json!({ "id": order.id })))
}

/// The server process, its stdout read line by line.
struct Process {
    child: Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Process {
    async fn start(spec: &Spec) -> Process {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                test_name(module_path!(), "chaos_server").as_str(),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ENV, serde_json::to_string(spec).unwrap())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut process = Process { child, lines };
        process.wait_for(|line| line.ends_with("listening")).await;
        process
    }

    /// Reads lines until one that `wanted` accepts.
    async fn wait_for(&mut self, wanted: impl Fn(&str) -> bool) {
        let found = tokio::time::timeout(STALL, async {
            while let Some(line) = self.lines.next_line().await.unwrap() {
                if wanted(&line) {
                    return true;
                }
            }
            false
        });
        assert!(found.await.unwrap(), "the server ended or stalled");
    }

    async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }
}

/// A small pseudo-random source: kill points need no more.
fn jitter(seed: &mut u64, range: std::ops::Range<u64>) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    range.start + *seed % (range.end - range.start)
}

/// Sends order `reference` with its key until it is answered 201 (or its
/// replay); any other answer, or none, is retried.
async fn order_until_answered(server: &Server, reference: &str) -> i64 {
    let key = format!("\"{reference}\"");
    let body = json!({ "ref": reference }).to_string();
    let headers = [
        ("content-type", "application/json"),
        ("idempotency-key", key.as_str()),
    ];
    let deadline = Instant::now() + STALL;
    loop {
        assert!(
            Instant::now() < deadline,
            "order {reference} never answered"
        );
        if let Some(answer) = server
            .try_send(Method::POST, "/orders", &headers, &body)
            .await
            && answer.status == StatusCode::CREATED
        {
            return answer.json()["id"].as_i64().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a run found: orders per reference, and each client's answer.
#[derive(Debug)]
#[allow(dead_code, reason = "read through Debug in the test's output")]
struct Tally {
    transactional: bool,
    kills_in_window: u32,
    duplicates: usize,
    lost: usize,
    /// Answers naming an order that is not in the table.
    answers_not_found: usize,
}

async fn chaos<S: HttpTx>(transactional: bool) -> Tally {
    let place = S::unique("http_tx_chaos");
    let store = sql::store_at::<S>(&place).await;
    let orders = S::orders_table(&place);
    S::execute(&S::create_orders(&orders)).await;
    drop(store);
    let port = ports::reserve();
    let spec = Spec {
        mysql: S::NAME == "MySqlStore",
        place,
        orders: orders.clone(),
        transactional,
        port: port.port,
    };
    let server = Arc::new(crate::support::http::client_for(&format!(
        "http://127.0.0.1:{}",
        port.port
    )));
    let next = Arc::new(AtomicU64::new(0));
    let mut process = Process::start(&spec).await;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (server, next) = (Arc::clone(&server), Arc::clone(&next));
            tokio::spawn(async move {
                let mut answers = Vec::new();
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed) as usize;
                    if n >= ORDERS {
                        return answers;
                    }
                    let reference = format!("o-{n}");
                    let id = order_until_answered(&server, &reference).await;
                    answers.push((reference, id));
                }
            })
        })
        .collect();
    let mut seed = idem::store::Token::random().to_u128() as u64 | 1;
    let mut kills_in_window = 0;
    for kill in 0..KILLS {
        if kill % 2 == 0 {
            let writes = jitter(&mut seed, 3..12);
            for _ in 0..writes {
                process.wait_for(|line| line.contains("wrote ")).await;
            }
            kills_in_window += 1;
        } else {
            tokio::time::sleep(Duration::from_millis(jitter(&mut seed, 50..400))).await;
        }
        process.kill().await;
        process = Process::start(&spec).await;
    }
    let mut answers = BTreeMap::new();
    for client in clients {
        answers.extend(client.await.unwrap());
    }
    process.kill().await;
    tally::<S>(&orders, transactional, kills_in_window, &answers).await
}

/// Counts the orders of each reference against what the clients were told.
async fn tally<S: HttpTx>(
    orders: &str,
    transactional: bool,
    kills_in_window: u32,
    answers: &BTreeMap<String, i64>,
) -> Tally {
    let rows = S::orders_by_key(orders).await;
    let mut by_key: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (key, id) in rows {
        by_key.entry(key).or_default().push(id);
    }
    assert_eq!(answers.len(), ORDERS);
    Tally {
        transactional,
        kills_in_window,
        duplicates: by_key.values().map(|ids| ids.len().saturating_sub(1)).sum(),
        lost: answers
            .keys()
            .filter(|key| !by_key.contains_key(*key))
            .count(),
        answers_not_found: answers
            .iter()
            .filter(|(key, id)| !by_key.get(*key).is_some_and(|ids| ids.contains(id)))
            .count(),
    }
}

async fn with_and_without<S: HttpTx>() {
    let with = chaos::<S>(true).await;
    let without = chaos::<S>(false).await;
    eprintln!("{}: {with:?}\n{}: {without:?}", S::NAME, S::NAME);
    assert_eq!(
        (with.duplicates, with.lost, with.answers_not_found),
        (0, 0, 0),
        "{with:?}"
    );
    assert!(
        without.duplicates >= 1,
        "no duplicate without the mode: {without:?}"
    );
    assert_eq!(without.lost, 0, "{without:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_200_orders_6_kills_0_duplicates_only_with_the_mode() {
    with_and_without::<Pg>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_200_orders_6_kills_0_duplicates_only_with_the_mode() {
    with_and_without::<My>().await;
}
