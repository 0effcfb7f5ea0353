//! The client half over real HTTP on loopback, both sides ours:
//! `idem::client::IdempotencyMiddleware` in a reqwest client, idem's axum
//! layer on the server (the payments example's app, or small routers), and
//! a proxy that loses responses. Attempts are counted where they arrive.

use crate::support;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::support::client::app::{self, Options, Payments};
use crate::support::client::lossy_proxy::LossyProxy;
use crate::support::client::{Recorder, client, is_uuid_v4_string, quick, serve};
use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use bytes::Bytes;
use http_body_util::StreamBody;
use hyper::body::Frame;
use idem::client::DeadlineExceeded;
use idem::http::IdempotencyLayer;
use idem::{Idempotency, MemoryStore};
use reqwest::Method;
use serde_json::Value;

const JSON: (&str, &str) = ("content-type", "application/json");
const ORDER: &str = r#"{"amount_cents":1200,"currency":"EUR"}"#;

/// The payments example's app on loopback, recorded; its address.
async fn payments(options: Options) -> (std::net::SocketAddr, Payments, Recorder) {
    let payments = Payments::new(Idempotency::new(MemoryStore::new()), &options);
    let recorder = Recorder::default();
    let addr = serve(recorder.around(app::router(payments.clone(), &options))).await;
    (addr, payments, recorder)
}

/// Small routes behind idem's layer, recorded: `/created` answers 201 with
/// the body it got, `/unavailable` 503, `/busy` 503 with `Retry-After: 1`,
/// `/forever` 503 with `Retry-After: 18446744073709551615` (u64::MAX), `/flaky` 503 on its first run and 201 after, `/slow` after 30 s.
async fn routes() -> (String, Recorder) {
    let flaky_runs = Arc::new(AtomicU32::new(0));
    let router = Router::new()
        .route(
            "/created",
            post(|body: Bytes| async { (StatusCode::CREATED, body) }),
        )
        .route(
            "/unavailable",
            post(|| async { StatusCode::SERVICE_UNAVAILABLE }),
        )
        .route(
            "/busy",
            post(|| async { (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "1")]) }),
        )
        .route(
            "/forever",
            post(|| async {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [("retry-after", "18446744073709551615")],
                )
            }),
        )
        .route(
            "/flaky",
            post(move || async move {
                match flaky_runs.fetch_add(1, Ordering::SeqCst) {
                    0 => StatusCode::SERVICE_UNAVAILABLE,
                    _ => StatusCode::CREATED,
                }
            }),
        )
        .route(
            "/slow",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                StatusCode::CREATED
            }),
        )
        .layer(IdempotencyLayer::new(Idempotency::new(MemoryStore::new())));
    let recorder = Recorder::default();
    let addr = serve(recorder.around(router)).await;
    (format!("http://{addr}"), recorder)
}

fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}: {body:?}"))
}

fn replayed(headers: &reqwest::header::HeaderMap) -> bool {
    headers
        .get("idempotent-replayed")
        .is_some_and(|value| value == "true")
}

#[tokio::test]
async fn a_lost_response_is_retried_with_the_same_key_and_answered_from_the_first_run() {
    let (server, payments, recorder) = payments(Options {
        gateway_delay: Duration::from_millis(5),
        ..Options::default()
    })
    .await;
    let proxy = LossyProxy::start(server).await;
    proxy.lose_next(1);
    let client = client(quick());

    let answer = client
        .post(format!("http://{}/payments", proxy.addr))
        .header(JSON.0, JSON.1)
        .body(ORDER)
        .send()
        .await
        .unwrap();

    assert_eq!(proxy.lost(), 1, "the first response was not lost");
    assert_eq!(answer.status(), StatusCode::CREATED);
    assert!(
        replayed(answer.headers()),
        "the retry ran instead of replaying"
    );
    let receipt = json(&answer.bytes().await.unwrap());
    assert_eq!(payments.handler_runs(), 1);
    assert_eq!(payments.service_runs(), 1);
    assert_eq!(payments.gateway().requests(), 1);
    // The receipt the caller got is the one the server keeps.
    let read = client
        .get(format!(
            "http://{server}/payments/{}",
            receipt["id"].as_str().unwrap()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(json(&read.bytes().await.unwrap()), receipt);

    let posts: Vec<_> = recorder
        .arrivals()
        .into_iter()
        .filter(|arrival| arrival.method == "POST")
        .collect();
    assert_eq!(posts.len(), 2, "{posts:?}");
    let key = posts[0].key.as_deref().expect("a key was added");
    assert!(is_uuid_v4_string(key), "{key}");
    assert_eq!(
        posts[1].key.as_deref(),
        Some(key),
        "the retry changed its key"
    );
    assert!(posts.iter().all(|post| post.body == ORDER.as_bytes()));
}

#[tokio::test]
async fn a_client_timeout_shorter_than_the_handler_gets_409_then_the_stored_answer() {
    let (server, payments, recorder) = payments(Options {
        gateway_delay: Duration::from_millis(1000),
        ..Options::default()
    })
    .await;
    let client = client(quick().max_retries(6));
    let url = format!("http://{server}/payments");
    // One run first, so the server's Retry-After estimates from it (about
    // 1 s) rather than the whole lease.
    let warm = client
        .post(&url)
        .header(JSON.0, JSON.1)
        .body(ORDER)
        .send()
        .await
        .unwrap();
    assert_eq!(warm.status(), StatusCode::CREATED);

    let key = format!("\"{}\"", idem::client::new_key());
    let answer = client
        .post(&url)
        .header("idempotency-key", &key)
        .header(JSON.0, JSON.1)
        .body(ORDER)
        .timeout(Duration::from_millis(200))
        .send()
        .await
        .unwrap();

    assert_eq!(answer.status(), StatusCode::CREATED);
    assert!(replayed(answer.headers()));
    assert_eq!(json(&answer.bytes().await.unwrap())["amount_cents"], 1200);
    assert_eq!(payments.handler_runs(), 2, "warm-up and one run of the key");
    assert_eq!(payments.gateway().requests(), 2);
    let attempts = recorder.with_key(&key);
    let statuses: Vec<_> = attempts.iter().map(|attempt| attempt.status).collect();
    assert!(attempts.len() >= 3, "{statuses:?}");
    assert!(
        statuses.contains(&Some(409)),
        "no attempt met the first still running: {statuses:?}"
    );
    assert_eq!(statuses.last(), Some(&Some(201)), "{statuses:?}");
}

#[tokio::test]
async fn two_logical_requests_get_two_keys_and_only_unsafe_methods_get_one() {
    let (base, recorder) = routes().await;
    let client = client(quick());
    for _ in 0..2 {
        let answer = client
            .post(format!("{base}/created"))
            .body("tea")
            .send()
            .await;
        assert_eq!(answer.unwrap().status(), StatusCode::CREATED);
    }
    let answer = client
        .patch(format!("{base}/created"))
        .body("tea")
        .send()
        .await;
    assert_eq!(answer.unwrap().status(), StatusCode::METHOD_NOT_ALLOWED);
    let answer = client
        .put(format!("{base}/created"))
        .body("tea")
        .send()
        .await;
    assert_eq!(answer.unwrap().status(), StatusCode::METHOD_NOT_ALLOWED);

    let keys: Vec<_> = recorder.arrivals().into_iter().map(|a| a.key).collect();
    assert_eq!(keys.len(), 4);
    let (first, second, patch) = (
        keys[0].clone().unwrap(),
        keys[1].clone().unwrap(),
        keys[2].clone().expect("PATCH gets a key"),
    );
    assert!(
        [&first, &second, &patch]
            .iter()
            .all(|k| is_uuid_v4_string(k))
    );
    assert_ne!(first, second, "two logical requests shared a key");
    assert_ne!(second, patch);
    assert_eq!(keys[3], None, "PUT is not in the default methods");

    // `.methods` chooses them.
    let (base, recorder) = routes().await;
    let client = support::client::client(quick().methods([Method::PUT]));
    let _ = client.put(format!("{base}/created")).send().await.unwrap();
    let _ = client.post(format!("{base}/created")).send().await.unwrap();
    let keys: Vec<_> = recorder.arrivals().into_iter().map(|a| a.key).collect();
    assert!(
        keys[0].as_deref().is_some_and(is_uuid_v4_string),
        "{keys:?}"
    );
    assert_eq!(keys[1], None, "{keys:?}");
}

#[tokio::test]
async fn a_callers_own_key_is_kept_across_retries() {
    let (base, recorder) = routes().await;
    let client = client(quick());
    let answer = client
        .post(format!("{base}/flaky"))
        .header("idempotency-key", "\"outbox-row-17\"")
        .body("tea")
        .send()
        .await
        .unwrap();

    assert_eq!(answer.status(), StatusCode::CREATED);
    let arrivals = recorder.arrivals();
    let seen: Vec<_> = arrivals
        .iter()
        .map(|a| (a.key.as_deref(), a.status, &a.body[..]))
        .collect();
    assert_eq!(
        seen,
        [
            (Some("\"outbox-row-17\""), Some(503), &b"tea"[..]),
            (Some("\"outbox-row-17\""), Some(201), &b"tea"[..]),
        ]
    );
}

#[tokio::test]
async fn a_422_is_returned_at_once() {
    let (server, payments, recorder) = payments(Options {
        gateway_delay: Duration::from_millis(5),
        ..Options::default()
    })
    .await;
    let client = client(quick());
    let url = format!("http://{server}/payments");
    let key = format!("\"{}\"", idem::client::new_key());
    let first = client
        .post(&url)
        .header("idempotency-key", &key)
        .header(JSON.0, JSON.1)
        .body(ORDER)
        .send()
        .await;
    assert_eq!(first.unwrap().status(), StatusCode::CREATED);

    let other = client
        .post(&url)
        .header("idempotency-key", &key)
        .header(JSON.0, JSON.1)
        .body(r#"{"amount_cents":999,"currency":"EUR"}"#)
        .send()
        .await
        .unwrap();

    assert_eq!(other.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(recorder.with_key(&key).len(), 2, "the 422 was retried");
    assert_eq!(payments.handler_runs(), 1);
}

#[tokio::test]
async fn a_streaming_body_is_sent_once() {
    let (base, recorder) = routes().await;
    let client = client(quick());
    let chunks = ["te", "a"].map(|chunk| Ok::<_, Infallible>(Frame::data(Bytes::from(chunk))));
    let body = reqwest::Body::wrap(StreamBody::new(futures::stream::iter(chunks)));

    let answer = client
        .post(format!("{base}/unavailable"))
        .body(body)
        .send()
        .await
        .unwrap();

    assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    let arrivals = recorder.arrivals();
    assert_eq!(arrivals.len(), 1, "{arrivals:?}");
    assert_eq!(&arrivals[0].body[..], b"tea");
    assert!(arrivals[0].key.as_deref().is_some_and(is_uuid_v4_string));
}

#[tokio::test]
async fn the_retry_budget_is_honoured() {
    for retries in [0, 2] {
        let (base, recorder) = routes().await;
        let client = client(quick().max_retries(retries));
        let answer = client
            .post(format!("{base}/unavailable"))
            .body("tea")
            .send()
            .await
            .unwrap();

        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        let arrivals = recorder.arrivals();
        assert_eq!(arrivals.len() as u32, retries + 1, "{arrivals:?}");
        assert!(
            arrivals
                .iter()
                .all(|a| a.key == arrivals[0].key && a.body == "tea")
        );
    }
}

#[tokio::test]
async fn no_retry_starts_when_its_wait_would_end_past_the_deadline() {
    let (base, recorder) = routes().await;
    // `/busy` asks for 1 s each time: attempts at about 0 s and 1 s; the
    // third would start at about 2 s, past the deadline of 1.5 s.
    let client = client(
        quick()
            .max_retries(10)
            .deadline(Duration::from_millis(1500)),
    );
    let answer = client
        .post(format!("{base}/busy"))
        .body("tea")
        .send()
        .await
        .unwrap();

    assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.headers()["retry-after"], "1");
    assert_eq!(recorder.arrivals().len(), 2, "{:?}", recorder.arrivals());
}

/// A `Retry-After` of u64::MAX seconds, honoured in full: no clock can
/// add it, so its wait ends past the deadline and the 503 is the answer,
/// at once, without a panic (it overflowed `Instant + Duration`).
#[tokio::test]
async fn a_retry_after_no_clock_can_hold_is_answered_within_the_deadline() {
    let (base, recorder) = routes().await;
    let client = client(
        quick()
            .max_retry_after(Duration::MAX)
            .deadline(Duration::from_secs(2)),
    );
    let started = std::time::Instant::now();
    let answer = tokio::spawn(async move {
        client
            .post(format!("{base}/forever"))
            .body("tea")
            .send()
            .await
    })
    .await
    .expect("the client did not panic")
    .expect("an answer");

    assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.headers()["retry-after"], "18446744073709551615");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(recorder.arrivals().len(), 1, "{:?}", recorder.arrivals());
}

/// A deadline too far off for the clock is no deadline, not a panic.
#[tokio::test]
async fn a_deadline_no_clock_can_hold_bounds_nothing() {
    let (base, recorder) = routes().await;
    let client = client(quick().deadline(Duration::MAX));
    let answer = tokio::spawn(async move {
        client
            .post(format!("{base}/flaky"))
            .body("tea")
            .send()
            .await
    })
    .await
    .expect("the client did not panic")
    .expect("an answer");

    assert_eq!(answer.status(), StatusCode::CREATED);
    assert_eq!(recorder.arrivals().len(), 2, "{:?}", recorder.arrivals());
}

#[tokio::test]
async fn an_attempt_running_at_the_deadline_is_cut_short() {
    let (base, recorder) = routes().await;
    let client = client(quick().deadline(Duration::from_millis(300)));
    let err = client
        .post(format!("{base}/slow"))
        .body("tea")
        .send()
        .await
        .unwrap_err();

    let reqwest_middleware::Error::Middleware(err) = err else {
        panic!("not the middleware's error: {err:?}");
    };
    let exceeded = err
        .downcast_ref::<DeadlineExceeded>()
        .expect("DeadlineExceeded");
    assert_eq!(exceeded.attempts(), 1);
    assert_eq!(recorder.arrivals().len(), 1);
}

#[tokio::test]
async fn connection_errors_are_retried_up_to_the_budget() {
    // A port nothing listens on: every attempt fails to connect.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let attempts = Arc::new(AtomicU32::new(0));
    let counted = attempts.clone();
    let client = reqwest_middleware::ClientBuilder::new(
        reqwest::Client::builder().no_proxy().build().unwrap(),
    )
    .with(quick().max_retries(2))
    .with(CountAttempts(counted))
    .build();

    let err = client
        .post(format!("http://{addr}/x"))
        .body("tea")
        .send()
        .await
        .unwrap_err();

    assert!(err.is_connect(), "{err:?}");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
}

/// A middleware after ours that counts what reaches the network.
struct CountAttempts(Arc<AtomicU32>);

#[async_trait::async_trait]
impl reqwest_middleware::Middleware for CountAttempts {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut axum::http::Extensions,
        next: reqwest_middleware::Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        self.0.fetch_add(1, Ordering::SeqCst);
        next.run(request, extensions).await
    }
}
