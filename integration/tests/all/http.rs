//! The HTTP layer and extractor over real HTTP: the example's payments app (and a few small
//! routers) served on an ephemeral loopback port, spoken to with hyper's
//! client.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::support::http::app::{self, Options};
use crate::support::http::{Answer, Server, order, payments, quick, serve};
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::routing::post;
use bytes::Bytes;
use idem::http::IdempotencyLayer;
use idem::{Idempotency, MemoryStore};
use serde_json::json;

#[tokio::test]
async fn same_key_and_body_twice_replays_the_first_answer() {
    let (server, payments) = payments(quick()).await;
    let first = server.pay(None, Some(r#""order-1""#), &order(1200)).await;
    let again = server.pay(None, Some(r#""order-1""#), &order(1200)).await;

    assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.body);
    assert!(!first.replayed());
    assert_eq!(again.status, first.status);
    assert_eq!(again.body, first.body);
    assert!(again.replayed());
    assert_eq!(again.headers["content-type"], first.headers["content-type"]);
    assert_eq!(again.headers["location"], first.headers["location"]);
    assert_eq!(payments.handler_runs(), 1);
    assert_eq!(payments.service_runs(), 1);
    assert_eq!(payments.gateway().requests(), 1);

    let receipt = first.json();
    assert!(receipt["id"].as_str().unwrap().starts_with("pay_"));
    assert_eq!(receipt["amount_cents"], 1200);
    let location = first.headers["location"].to_str().unwrap();
    let read = server.send(Method::GET, location, &[], "").await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.json(), receipt);

    // A bare token is the same key as the structured-field string.
    let bare = server.pay(None, Some("order-1"), &order(1200)).await;
    assert!(bare.replayed());
    assert_eq!(bare.body, first.body);
}

#[tokio::test]
async fn a_fresh_key_is_a_fresh_payment() {
    let (server, payments) = payments(quick()).await;
    let one = server.pay(None, Some(r#""a""#), &order(1200)).await;
    let two = server.pay(None, Some(r#""b""#), &order(1200)).await;
    assert_eq!(
        (one.status, two.status),
        (StatusCode::CREATED, StatusCode::CREATED)
    );
    assert_ne!(one.json()["id"], two.json()["id"]);
    assert!(!two.replayed());
    assert_eq!(payments.service_runs(), 2);
}

#[tokio::test]
async fn same_key_with_another_body_is_422_and_nothing_runs() {
    let (server, payments) = payments(quick()).await;
    let first = server.pay(None, Some(r#""order-1""#), &order(1200)).await;
    assert_eq!(first.status, StatusCode::CREATED);

    let other = server.pay(None, Some(r#""order-1""#), &order(999)).await;
    other.assert_problem(422, "fingerprint-mismatch");
    assert!(!other.replayed());
    assert_eq!(payments.handler_runs(), 1);
    assert_eq!(payments.service_runs(), 1);
    assert_eq!(payments.gateway().requests(), 1);
}

#[tokio::test]
async fn missing_empty_and_long_keys_are_400() {
    let (server, payments) = payments(quick()).await;

    server
        .pay(None, None, &order(1200))
        .await
        .assert_problem(400, "missing-key");
    let long = format!("\"{}\"", "k".repeat(300));
    server
        .pay(None, Some(&long), &order(1200))
        .await
        .assert_problem(400, "invalid-key");
    let long_bare = "k".repeat(300);
    server
        .pay(None, Some(&long_bare), &order(1200))
        .await
        .assert_problem(400, "invalid-key");
    server
        .pay(None, Some(r#""""#), &order(1200))
        .await
        .assert_problem(400, "invalid-key");
    server
        .pay(None, Some(""), &order(1200))
        .await
        .assert_problem(400, "invalid-key");
    server
        .pay(None, Some(r#""open"#), &order(1200))
        .await
        .assert_problem(400, "invalid-key");
    let two_keys = server
        .send(
            Method::POST,
            "/payments",
            &[("idempotency-key", "\"a\""), ("idempotency-key", "\"b\"")],
            &order(1200).to_string(),
        )
        .await;
    two_keys.assert_problem(400, "invalid-key");

    // 255 bytes is the longest key accepted.
    let longest = "k".repeat(255);
    assert_eq!(
        server.pay(None, Some(&longest), &order(1200)).await.status,
        StatusCode::CREATED
    );
    assert_eq!(payments.handler_runs(), 1);
}

/// Two keys folded into one field, as a proxy joins two headers, are a
/// list: 400, never a call under the first key (issue 37: with a
/// parameter on the first key, `"k-1";v=1, "k-2"` ran as `k-1`).
#[tokio::test]
async fn two_keys_in_one_header_are_400_and_nothing_runs() {
    let (server, payments) = payments(quick()).await;
    for folded in [
        r#""k-1";v=1, "k-2""#,
        "k-1;v=1, k-2",
        r#""k-1", "k-2""#,
        "k-1, k-2",
        r#""k-1";v=1,"k-2";v=2"#,
    ] {
        let answer = server.pay(None, Some(folded), &order(1200)).await;
        answer.assert_problem(400, "invalid-key");
        let detail = answer.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(detail.contains("exactly one key"), "{folded}: {detail}");
    }
    assert_eq!(payments.handler_runs(), 0);
    // One key with parameters is still one key.
    let one = server.pay(None, Some(r#""k-1";v=1"#), &order(1200)).await;
    assert_eq!(one.status, StatusCode::CREATED);
    let again = server.pay(None, Some(r#""k-1""#), &order(1200)).await;
    assert!(again.replayed());
    assert_eq!(payments.handler_runs(), 1);
}

/// Fires `n` identical POSTs at once.
async fn burst(server: &Arc<Server>, n: usize, key: &'static str) -> Vec<Answer> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let server = Arc::clone(server);
            tokio::spawn(async move { server.pay(None, Some(key), &order(4200)).await })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_posts_run_once_and_the_rest_get_409() {
    let (server, payments) = payments(Options {
        gateway_delay: Duration::from_millis(800),
        ..Options::default()
    })
    .await;
    let server = Arc::new(server);
    let answers = burst(&server, 50, r#""burst-1""#).await;

    let mut ids = BTreeSet::new();
    let (mut created, mut conflicts) = (0, 0);
    for answer in &answers {
        if answer.status.is_success() {
            created += 1;
            ids.insert(answer.json()["id"].as_str().unwrap().to_owned());
        } else {
            answer.assert_problem(409, "in-progress");
            assert!(answer.retry_after() >= 1);
            conflicts += 1;
        }
    }
    assert_eq!(
        ids.len(),
        1,
        "exactly one receipt id among {created} 2xx answers"
    );
    assert_eq!(created + conflicts, 50);
    assert!(conflicts > 0, "the burst overlapped the first request");
    assert_eq!(payments.service_runs(), 1);
    assert_eq!(payments.gateway().requests(), 1);

    // Once done, the key replays.
    let later = server.pay(None, Some(r#""burst-1""#), &order(4200)).await;
    assert!(later.replayed());
    assert_eq!(later.json()["id"].as_str().unwrap(), ids.first().unwrap());
}

/// SPEC §7: a 409's `Retry-After` estimates when the first request ends.
/// Before any run of the route has ended there is no run time to go by:
/// the duplicate is told the layer's first estimate (1 s), not the
/// holder's whole lease (30 s by default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routes_first_request_gets_its_duplicate_a_short_retry_after() {
    let started = Arc::new(tokio::sync::Notify::new());
    let finish = Arc::new(tokio::sync::Notify::new());
    let handler = {
        let (started, finish) = (Arc::clone(&started), Arc::clone(&finish));
        move || {
            let (started, finish) = (Arc::clone(&started), Arc::clone(&finish));
            async move {
                started.notify_one();
                finish.notified().await;
                StatusCode::CREATED
            }
        }
    };
    let router = Router::new()
        .route("/slow", post(handler))
        .layer(IdempotencyLayer::new(Idempotency::new(MemoryStore::new())));
    let server = Arc::new(serve(router).await);
    let first = tokio::spawn({
        let server = Arc::clone(&server);
        async move { server.post("/slow", r#""first-1""#, "tea").await }
    });
    started.notified().await;

    let duplicate = server.post("/slow", r#""first-1""#, "tea").await;
    duplicate.assert_problem(409, "in-progress");
    assert_eq!(duplicate.retry_after(), 1, "{:?}", duplicate.headers);
    finish.notify_one();
    assert_eq!(first.await.unwrap().status, StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_posts_with_wait_all_get_the_same_201() {
    let (server, payments) = payments(Options {
        gateway_delay: Duration::from_millis(300),
        wait: Duration::from_secs(20),
        ..Options::default()
    })
    .await;
    let server = Arc::new(server);
    let answers = burst(&server, 50, r#""burst-2""#).await;

    let first = answers.iter().find(|a| !a.replayed()).expect("one ran");
    for answer in &answers {
        assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
        assert_eq!(answer.body, first.body);
    }
    assert_eq!(answers.iter().filter(|a| !a.replayed()).count(), 1);
    assert_eq!(payments.service_runs(), 1);
}

#[tokio::test]
async fn a_gateway_outage_is_not_stored_and_the_retry_charges_with_the_same_gateway_key() {
    let (server, payments) = payments(quick()).await;
    payments.gateway().fail_next(1);

    let failed = server.pay(None, Some(r#""order-5xx""#), &order(1200)).await;
    assert_eq!(failed.status, StatusCode::BAD_GATEWAY);
    assert_eq!(failed.headers["content-type"], "application/problem+json");

    let retried = server.pay(None, Some(r#""order-5xx""#), &order(1200)).await;
    assert_eq!(retried.status, StatusCode::CREATED);
    assert!(!retried.replayed());
    assert_eq!(payments.service_runs(), 2);
    assert_eq!(payments.gateway().requests(), 2);
    // Both attempts sent the gateway one key, derived with child_key.
    let keys = payments.gateway().keys();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].len(), 64);

    assert!(
        server
            .pay(None, Some(r#""order-5xx""#), &order(1200))
            .await
            .replayed()
    );
    assert_eq!(payments.service_runs(), 2);
}

#[tokio::test]
async fn a_decline_is_a_4xx_stored_and_replayed() {
    let (server, payments) = payments(quick()).await;
    let big = order(app::DECLINE_ABOVE_CENTS + 1);
    let declined = server.pay(None, Some(r#""order-big""#), &big).await;
    assert_eq!(declined.status, StatusCode::PAYMENT_REQUIRED);
    assert_eq!(declined.headers["content-type"], "application/problem+json");
    assert!(!declined.replayed());

    let again = server.pay(None, Some(r#""order-big""#), &big).await;
    assert_eq!(again.status, StatusCode::PAYMENT_REQUIRED);
    assert_eq!(again.body, declined.body);
    assert_eq!(again.headers["content-type"], "application/problem+json");
    assert!(again.replayed());
    assert_eq!(payments.handler_runs(), 1);
    assert_eq!(payments.gateway().requests(), 1);
}

#[tokio::test]
async fn two_principals_with_one_key_do_not_see_each_other() {
    let (server, payments) = payments(quick()).await;
    let alice = server
        .pay(Some("alice"), Some(r#""k-1""#), &order(1000))
        .await;
    let bob = server
        .pay(Some("bob"), Some(r#""k-1""#), &order(2000))
        .await;
    assert_eq!(
        (alice.status, bob.status),
        (StatusCode::CREATED, StatusCode::CREATED)
    );
    assert!(!bob.replayed());
    assert_ne!(alice.json()["id"], bob.json()["id"]);
    assert_eq!(bob.json()["amount_cents"], 2000);

    // The anonymous principal is a third one.
    let anonymous = server.pay(None, Some(r#""k-1""#), &order(1000)).await;
    assert!(!anonymous.replayed());
    assert_ne!(anonymous.json()["id"], alice.json()["id"]);

    let alice_again = server
        .pay(Some("alice"), Some(r#""k-1""#), &order(1000))
        .await;
    assert!(alice_again.replayed());
    assert_eq!(alice_again.body, alice.body);
    assert_eq!(payments.service_runs(), 3);
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_and_nothing_is_stored() {
    let (server, payments) = payments(Options {
        max_body_bytes: 1024,
        ..quick()
    })
    .await;
    let padded = json!({ "amount_cents": 1200, "currency": "EUR", "note": "x".repeat(2000) });
    let refused = server.pay(None, Some(r#""order-fat""#), &padded).await;
    refused.assert_problem(413, "body-too-large");
    assert_eq!(payments.handler_runs(), 0);

    // Nothing was claimed or stored: the key is still free.
    let fine = server.pay(None, Some(r#""order-fat""#), &order(1200)).await;
    assert_eq!(fine.status, StatusCode::CREATED);
    assert!(!fine.replayed());
}

#[tokio::test]
async fn malformed_json_is_refused_unstored_and_the_fixed_retry_runs() {
    let (server, payments) = payments(quick()).await;
    let headers = [
        ("content-type", "application/json"),
        ("idempotency-key", "\"bad-json\""),
    ];
    let first = server.send(Method::POST, "/payments", &headers, "{").await;
    assert_eq!(first.status, StatusCode::BAD_REQUEST, "{:?}", first.body);
    let again = server.send(Method::POST, "/payments", &headers, "{").await;
    assert_eq!(again.status, first.status);
    assert!(
        !again.replayed(),
        "a refusal before the handler ran is not pinned"
    );
    assert_eq!(payments.handler_runs(), 0);
    // Another body under the key is no mismatch: nothing was recorded.
    let fixed = server
        .send(Method::POST, "/payments", &headers, &order(300).to_string())
        .await;
    assert_eq!(fixed.status, StatusCode::CREATED, "{:?}", fixed.body);
    assert_eq!(payments.service_runs(), 1);
}

#[tokio::test]
async fn reads_pass_through_untouched() {
    let (server, _) = payments(quick()).await;
    let missing = server
        .send(
            Method::GET,
            "/payments/pay_0",
            &[("idempotency-key", "\"x\"")],
            "",
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let again = server
        .send(
            Method::GET,
            "/payments/pay_0",
            &[("idempotency-key", "\"x\"")],
            "",
        )
        .await;
    assert!(!again.replayed());
}

/// After its stored answer's TTL, a duplicate within the layer's
/// tombstone is 410 `expired` through the real layer, and the handler
/// does not run; another body under the key is still 422.
#[tokio::test]
async fn a_duplicate_after_the_ttl_within_the_tombstone_is_410_expired() {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let layer = layer()
        .ttl(Duration::from_millis(200))
        .tombstone(Duration::from_secs(60));
    let router = Router::new()
        .route(
            "/jobs",
            post(move || {
                let calls = Arc::clone(&counted);
                async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    (StatusCode::CREATED, "job created")
                }
            }),
        )
        .layer(layer);
    let server = serve(router).await;
    let key = [("idempotency-key", "\"job-1\"")];
    let first = server.send(Method::POST, "/jobs", &key, r#"{"n":1}"#).await;
    assert_eq!(first.status, StatusCode::CREATED);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let late = server.send(Method::POST, "/jobs", &key, r#"{"n":1}"#).await;
    late.assert_problem(410, "expired");
    assert!(!late.replayed());
    let other = server.send(Method::POST, "/jobs", &key, r#"{"n":2}"#).await;
    other.assert_problem(422, "fingerprint-mismatch");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// A router whose handler answers 500 on its first call and 201 after.
fn flaky(layer: IdempotencyLayer, calls: Arc<AtomicU32>) -> Router {
    Router::new()
        .route(
            "/jobs",
            post(move || {
                let calls = Arc::clone(&calls);
                async move {
                    match calls.fetch_add(1, Ordering::SeqCst) {
                        0 => (StatusCode::INTERNAL_SERVER_ERROR, "boom"),
                        _ => (StatusCode::CREATED, "job created"),
                    }
                }
            }),
        )
        .layer(layer)
}

fn layer() -> IdempotencyLayer {
    IdempotencyLayer::new(Idempotency::new(MemoryStore::new()))
}

#[tokio::test]
async fn a_handler_answering_500_is_not_stored_and_the_retry_runs() {
    let calls = Arc::new(AtomicU32::new(0));
    let server = serve(flaky(layer(), Arc::clone(&calls))).await;
    let key = [("idempotency-key", "\"job-1\"")];

    let failed = server.send(Method::POST, "/jobs", &key, "{}").await;
    assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(failed.body, "boom");
    let retried = server.send(Method::POST, "/jobs", &key, "{}").await;
    assert_eq!(retried.status, StatusCode::CREATED);
    assert!(!retried.replayed());
    let replayed = server.send(Method::POST, "/jobs", &key, "{}").await;
    assert_eq!(replayed.body, "job created");
    assert!(replayed.replayed());
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn stored_statuses_methods_and_optional_keys_are_configurable() {
    // Store every status, 500 included.
    let calls = Arc::new(AtomicU32::new(0));
    let server = serve(flaky(layer().store_status(|_| true), Arc::clone(&calls))).await;
    let key = [("idempotency-key", "\"job-1\"")];
    assert_eq!(
        server.send(Method::POST, "/jobs", &key, "").await.status,
        500
    );
    let again = server.send(Method::POST, "/jobs", &key, "").await;
    assert_eq!((again.status.as_u16(), again.replayed()), (500, true));
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // Keyless requests pass through when the key is optional; POST is not
    // handled when the methods leave it out.
    let calls = Arc::new(AtomicU32::new(1));
    let server = serve(flaky(layer().key_required(false), Arc::clone(&calls))).await;
    assert_eq!(
        server.send(Method::POST, "/jobs", &[], "").await.status,
        201
    );
    assert_eq!(
        server.send(Method::POST, "/jobs", &[], "").await.status,
        201
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let server = serve(flaky(
        layer().methods([Method::PUT]),
        Arc::new(AtomicU32::new(1)),
    ))
    .await;
    assert!(
        !server
            .send(Method::POST, "/jobs", &key, "")
            .await
            .replayed()
    );
    assert!(
        !server
            .send(Method::POST, "/jobs", &key, "")
            .await
            .replayed()
    );
}

#[tokio::test]
async fn only_the_chosen_headers_are_replayed() {
    let router = Router::new()
        .route(
            "/things",
            post(|| async {
                (
                    StatusCode::CREATED,
                    [
                        ("location", "/things/1"),
                        ("x-trace", "t-1"),
                        ("x-cost", "3"),
                    ],
                    "thing",
                )
            }),
        )
        .layer(layer().stored_headers([
            axum::http::header::LOCATION,
            axum::http::HeaderName::from_static("x-cost"),
        ]));
    let server = serve(router).await;
    let key = [("idempotency-key", "\"t\"")];
    let first = server.send(Method::POST, "/things", &key, "").await;
    assert_eq!(first.headers["x-trace"], "t-1");
    let again = server.send(Method::POST, "/things", &key, "").await;
    assert!(again.replayed());
    assert_eq!(again.headers["location"], "/things/1");
    assert_eq!(again.headers["x-cost"], "3");
    assert!(again.headers.get("x-trace").is_none());
}

#[tokio::test]
async fn the_scope_is_the_matched_route_and_the_fingerprint_the_target_and_body() {
    let router = Router::new()
        .route("/items/{id}", axum::routing::patch(|| async { "patched" }))
        .layer(layer());
    let server = serve(router).await;
    let key = [("idempotency-key", "\"p\"")];
    assert!(
        !server
            .send(Method::PATCH, "/items/1", &key, "{}")
            .await
            .replayed()
    );
    assert!(
        server
            .send(Method::PATCH, "/items/1", &key, "{}")
            .await
            .replayed()
    );
    // Same route, same key, another item: the key was used for another
    // request.
    server
        .send(Method::PATCH, "/items/2", &key, "{}")
        .await
        .assert_problem(422, "fingerprint-mismatch");
}

#[tokio::test]
async fn a_streamed_body_over_the_limit_is_413_before_anything_runs() {
    use tower::ServiceExt;

    let calls = Arc::new(AtomicU32::new(0));
    let router = flaky(layer().max_body_bytes(100), Arc::clone(&calls));
    // No Content-Length: the limit is found while reading.
    let chunks = (0..10).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 30])));
    let request = Request::post("/jobs")
        .header("idempotency-key", "\"s\"")
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .unwrap();
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn handlers_behind_the_layer_get_stable_child_keys() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let router = Router::new()
        .route(
            "/charges",
            post(move || {
                let calls = Arc::clone(&counter);
                async move {
                    let key = idem::child_key("gateway").expect("inside the layer's call");
                    let status = match calls.fetch_add(1, Ordering::SeqCst) {
                        0 => StatusCode::SERVICE_UNAVAILABLE,
                        _ => StatusCode::CREATED,
                    };
                    (status, key)
                }
            }),
        )
        .layer(layer());
    let server = serve(router).await;
    let send = |key: &'static str| {
        let server = &server;
        async move {
            server
                .send(Method::POST, "/charges", &[("idempotency-key", key)], "")
                .await
        }
    };
    let failed = send("\"c-1\"").await;
    let retried = send("\"c-1\"").await;
    let other = send("\"c-2\"").await;
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(retried.status, StatusCode::CREATED);
    assert_eq!(
        failed.body, retried.body,
        "a retry sends the same downstream key"
    );
    assert_ne!(other.body, retried.body);
    assert_eq!(retried.body.len(), 64);
}
