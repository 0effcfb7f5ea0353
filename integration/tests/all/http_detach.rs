//! Nothing runs twice when a caller gives up: the layer runs the inner
//! service on a task of its own, so a client that times out or disconnects
//! never cancels it; its answer is stored for the retry. On every store,
//! over real HTTP; with graceful shutdown draining what is still running.

use crate::support;
use crate::support::pg_server;
use crate::support::redis_server;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::support::http::{a_client_that_gives_up_gets_the_first_answer, order, pay_and_give_up};
use axum::Router;
use axum::http::{Method, StatusCode};
use axum::routing::post;
use idem::http::IdempotencyLayer;
use idem::{Idempotency, MemoryStore, PostgresStore, RedisStore, SqliteStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_a_client_that_gives_up_gets_the_first_answer() {
    a_client_that_gives_up_gets_the_first_answer(Idempotency::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_a_client_that_gives_up_gets_the_first_answer() {
    let store = RedisStore::connect(&redis_server::url().await)
        .await
        .expect("connect to Redis");
    a_client_that_gives_up_gets_the_first_answer(Idempotency::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_client_that_gives_up_gets_the_first_answer() {
    let store = PostgresStore::builder()
        .schema(pg_server::unique_schema("detach"))
        .connect(&pg_server::url().await)
        .await
        .expect("connect to PostgreSQL");
    store.migrate().await.expect("migrate");
    a_client_that_gives_up_gets_the_first_answer(Idempotency::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_client_that_gives_up_gets_the_first_answer() {
    let path = std::env::temp_dir().join(format!("idem-detach-{}.db", support::http::unique()));
    let store = SqliteStore::open(&path).await.unwrap();
    a_client_that_gives_up_gets_the_first_answer(Idempotency::new(store)).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// Shutdown begins while a request whose client left is still running:
/// the server stops taking requests, `drain` waits for the request, its
/// record is stored, and all of it ends well within the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_drains_requests_still_running() {
    let idem = Idempotency::new(MemoryStore::new());
    let options = support::http::Options {
        gateway_delay: Duration::from_millis(500),
        ..support::http::Options::default()
    };
    let payments = support::http::app::Payments::new(idem.clone(), &options);
    let router = support::http::app::router(payments.clone(), &options);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });
    let client = support::http::Server {
        base,
        client: hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http(),
    };
    let key = format!("\"shutdown-{}\"", support::http::unique());
    pay_and_give_up(&client, &key, &order(99), Duration::from_millis(100)).await;

    let began = Instant::now();
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    let still_running = idem.drain(Duration::from_secs(5)).await;
    let took = began.elapsed();
    assert_eq!(still_running, 0);
    assert!(took < Duration::from_secs(5), "drained in {took:?}");
    assert_eq!(payments.service_runs(), 1);

    // The record is stored: a new server on the same store replays it.
    let (after, payments_after) = support::http::payments_on(idem, options).await;
    let replay = after.pay(Some("dave"), Some(&key), &order(99)).await;
    assert!(replay.replayed(), "{:?}", replay.body);
    assert_eq!(replay.json()["amount_cents"], 99);
    assert_eq!(payments_after.service_runs(), 0);
}

/// A handler that panics: the claim is released as its task unwinds, the
/// client gets a 500 problem, and the retry runs.
#[tokio::test]
async fn a_panicking_handler_answers_500_and_the_retry_runs() {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let router = Router::new()
        .route(
            "/orders",
            post(move || async move {
                if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("the first run fails");
                }
                (StatusCode::CREATED, "order 1")
            }),
        )
        .layer(IdempotencyLayer::new(Idempotency::new(MemoryStore::new())));
    let server = support::http::serve(router).await;
    let send = || {
        server.send(
            Method::POST,
            "/orders",
            &[("idempotency-key", "\"p-1\"")],
            "{}",
        )
    };
    let first = send().await;
    first.assert_problem(500, "handler-panicked");
    // The release is handed to the runtime as the task unwinds.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let retry = send().await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(!retry.replayed());
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}
