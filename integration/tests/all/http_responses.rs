//! What the layer stores and replays, over real HTTP: encoded bodies with
//! compression inside and outside the layer, streamed and endless
//! responses, responses too large to store, the statuses that release a
//! key, a burst behind a failing handler, the fingerprint of JSON bodies
//! (by value; records fingerprinted by bytes still replay) and of other
//! bodies, and the key's syntax.

use std::convert::Infallible;
use std::io::Read as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::support::http::{Answer, Server, order, payments, quick, serve};
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use axum::response::IntoResponse as _;
use axum::response::sse::{Event, Sse};
use axum::routing::post;
use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::{BodyExt, Full};
use idem::http::IdempotencyLayer;
use idem::{Idempotency, MemoryStore};
use tokio::sync::Semaphore;
use tower_http::compression::CompressionLayer;

fn layer() -> IdempotencyLayer {
    IdempotencyLayer::new(Idempotency::new(MemoryStore::new()))
}

/// Counts the handler's runs.
#[derive(Clone, Default)]
struct Runs(Arc<AtomicU32>);

impl Runs {
    fn hit(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn count(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A JSON report worth compressing, marked not to be cached by anyone.
fn report_route(runs: Runs) -> Router {
    Router::new().route(
        "/reports",
        post(move || {
            let runs = runs.clone();
            async move {
                runs.hit();
                let rows: Vec<String> = (0..200).map(|i| format!("{{\"row\":{i}}}")).collect();
                (
                    StatusCode::CREATED,
                    [
                        (header::CONTENT_TYPE, "application/json"),
                        (header::CACHE_CONTROL, "no-store"),
                    ],
                    format!("[{}]", rows.join(",")),
                )
            }
        }),
    )
}

fn gunzip(bytes: &[u8]) -> String {
    let mut out = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut out)
        .expect("a gzip body");
    out
}

/// `POST /reports` under `key`, with `Accept-Encoding: accept` if given.
async fn report(server: &Server, key: &str, accept: Option<&str>) -> Answer {
    let mut headers = vec![("idempotency-key", key)];
    headers.extend(accept.map(|accept| ("accept-encoding", accept)));
    server.send(Method::POST, "/reports", &headers, "{}").await
}

#[tokio::test]
async fn compression_inside_the_layer_replays_the_encoded_body_with_its_headers() {
    let runs = Runs::default();
    let router = report_route(runs.clone())
        .layer(CompressionLayer::new())
        .layer(layer());
    let server = serve(router).await;
    let first = report(&server, "\"r-1\"", Some("gzip")).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(first.headers["content-encoding"], "gzip");
    let plain = gunzip(&first.body);
    assert!(plain.starts_with("[{\"row\":0}"), "{plain}");

    let again = report(&server, "\"r-1\"", Some("gzip")).await;
    assert!(again.replayed());
    assert_eq!(again.headers["content-encoding"], "gzip");
    assert_eq!(again.headers["vary"], first.headers["vary"]);
    assert_eq!(again.headers["cache-control"], "no-store");
    assert_eq!(gunzip(&again.body), plain);

    // No Accept-Encoding accepts any coding (RFC 9110): the encoded replay,
    // labelled so the client can decode it.
    let any = report(&server, "\"r-1\"", None).await;
    assert!(any.replayed());
    assert_eq!(any.headers["content-encoding"], "gzip");
    assert_eq!(gunzip(&any.body), plain);

    // A client that refuses gzip is told so, not sent bytes it cannot read.
    let identity = report(&server, "\"r-1\"", Some("identity")).await;
    identity.assert_problem(406, "encoding-not-acceptable");
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn compression_outside_the_layer_encodes_each_replay_for_its_client() {
    let runs = Runs::default();
    let router = report_route(runs.clone())
        .layer(layer())
        .layer(CompressionLayer::new());
    let server = serve(router).await;

    let first = report(&server, "\"r-2\"", Some("gzip")).await;
    assert_eq!(first.headers["content-encoding"], "gzip");
    let plain = gunzip(&first.body);

    let gzipped = report(&server, "\"r-2\"", Some("gzip")).await;
    assert!(gzipped.replayed());
    assert_eq!(gzipped.headers["content-encoding"], "gzip");
    assert_eq!(gunzip(&gzipped.body), plain);

    let identity = report(&server, "\"r-2\"", Some("identity")).await;
    assert!(identity.replayed());
    assert!(identity.headers.get("content-encoding").is_none());
    assert_eq!(identity.body, plain);
    assert_eq!(identity.headers["cache-control"], "no-store");
    assert_eq!(runs.count(), 1);
}

/// A route whose body is sent in two parts: the second only once the test
/// adds a permit to `gate`.
fn gated_route(runs: Runs, gate: Arc<Semaphore>, sse: bool) -> Router {
    Router::new().route(
        "/stream",
        post(move || {
            let (runs, gate) = (runs.clone(), Arc::clone(&gate));
            async move {
                runs.hit();
                let parts = futures::stream::iter(["part one;", "part two."]).then(move |part| {
                    let gate = Arc::clone(&gate);
                    async move {
                        if part == "part two." {
                            gate.acquire().await.unwrap().forget();
                        }
                        part
                    }
                });
                if sse {
                    let events = parts.map(|part| Ok::<_, Infallible>(Event::default().data(part)));
                    Sse::new(events).into_response()
                } else {
                    let chunks = parts.map(|part| Ok::<_, Infallible>(Bytes::from(part)));
                    (
                        [(header::CONTENT_TYPE, "text/plain")],
                        Body::from_stream(chunks),
                    )
                        .into_response()
                }
            }
        }),
    )
}

/// Sends a POST and returns the response with its body unread.
async fn open(
    server: &Server,
    path: &str,
    key: &str,
) -> axum::http::Response<hyper::body::Incoming> {
    let request = Request::post(format!("{}{path}", server.base))
        .header("idempotency-key", key)
        .body(Full::new(Bytes::new()))
        .unwrap();
    server.client.request(request).await.unwrap()
}

/// The next data frame of a body.
async fn next_data(body: &mut hyper::body::Incoming) -> Option<Bytes> {
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            return Some(data);
        }
    }
    None
}

#[tokio::test]
async fn a_streamed_body_reaches_the_client_before_it_ends_and_is_stored_whole() {
    let (runs, gate) = (Runs::default(), Arc::new(Semaphore::new(0)));
    let server = serve(gated_route(runs.clone(), Arc::clone(&gate), false).layer(layer())).await;

    let response = open(&server, "/stream", "\"s-1\"").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("idempotent-stored").is_none());
    let mut body = response.into_body();
    // The second part cannot have been produced yet: the gate is shut.
    assert_eq!(next_data(&mut body).await.unwrap(), "part one;");
    assert_eq!(gate.available_permits(), 0);
    gate.add_permits(1);
    assert_eq!(next_data(&mut body).await.unwrap(), "part two.");
    assert_eq!(next_data(&mut body).await, None);

    let again = server.post("/stream", "\"s-1\"", "").await;
    assert!(again.replayed());
    assert_eq!(again.body, "part one;part two.");
    assert_eq!(again.headers["content-type"], "text/plain");
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn a_client_gone_mid_stream_still_gets_the_whole_answer_on_retry() {
    let (runs, gate) = (Runs::default(), Arc::new(Semaphore::new(0)));
    let router = gated_route(runs.clone(), Arc::clone(&gate), false)
        .layer(layer().wait(Duration::from_secs(10)));
    let server = serve(router).await;

    let response = open(&server, "/stream", "\"s-2\"").await;
    let mut body = response.into_body();
    assert_eq!(next_data(&mut body).await.unwrap(), "part one;");
    drop(body); // the client goes away mid-stream
    gate.add_permits(1);

    // The retry waits for the detached attempt, which read the body to its
    // end and stored it.
    let retry = server.post("/stream", "\"s-2\"", "").await;
    assert_eq!(retry.status, StatusCode::OK, "{:?}", retry.body);
    assert!(retry.replayed());
    assert_eq!(retry.body, "part one;part two.");
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn server_sent_events_stream_uncaptured_and_settle_the_key() {
    let (runs, gate) = (Runs::default(), Arc::new(Semaphore::new(0)));
    let server = serve(gated_route(runs.clone(), Arc::clone(&gate), true).layer(layer())).await;

    let response = open(&server, "/stream", "\"e-1\"").await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["idempotent-stored"], "false");
    let mut body = response.into_body();
    let first = next_data(&mut body).await.unwrap();
    assert_eq!(first, "data: part one;\n\n");
    assert_eq!(gate.available_permits(), 0, "the stream has not ended");

    // While it streams, and after: the key is settled, nothing runs again.
    let during = server.post("/stream", "\"e-1\"", "").await;
    during.assert_problem(500, "not-stored");
    gate.add_permits(1);
    assert_eq!(next_data(&mut body).await.unwrap(), "data: part two.\n\n");
    assert_eq!(next_data(&mut body).await, None);
    let after = server.post("/stream", "\"e-1\"", "").await;
    after.assert_problem(500, "not-stored");
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn routes_can_be_exempted_from_capture() {
    let (runs, gate) = (Runs::default(), Arc::new(Semaphore::new(1)));
    let router = gated_route(runs.clone(), gate, false)
        .layer(layer().capture(|route, _| route != "/stream"));
    let server = serve(router).await;
    let key = [("idempotency-key", "\"x-1\"")];
    let first = server.send(Method::POST, "/stream", &key, "").await;
    assert_eq!(first.body, "part one;part two.");
    assert_eq!(first.headers["idempotent-stored"], "false");
    let again = server.send(Method::POST, "/stream", &key, "").await;
    again.assert_problem(500, "not-stored");
    assert_eq!(runs.count(), 1);
}

/// A route answering `size` bytes, of known length or streamed in 64 KiB
/// chunks of unknown total.
fn sized_route(runs: Runs, size: usize, streamed: bool) -> Router {
    Router::new().route(
        "/exports",
        post(move || {
            let runs = runs.clone();
            async move {
                runs.hit();
                let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
                if streamed {
                    let chunks: Vec<Result<Bytes, Infallible>> = bytes
                        .chunks(64 << 10)
                        .map(|c| Ok(Bytes::copy_from_slice(c)))
                        .collect();
                    Body::from_stream(futures::stream::iter(chunks))
                } else {
                    Body::from(bytes)
                }
            }
        }),
    )
}

fn expected(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i % 251) as u8).collect()
}

#[tokio::test]
async fn a_3_mib_response_is_sent_whole_not_stored_and_never_runs_twice() {
    const SIZE: usize = 3 << 20;
    for streamed in [false, true] {
        let runs = Runs::default();
        let server = serve(sized_route(runs.clone(), SIZE, streamed).layer(layer())).await;
        let key = [("idempotency-key", "\"big\"")];

        let first = server.send(Method::POST, "/exports", &key, "").await;
        assert_eq!(first.status, StatusCode::OK);
        assert_eq!(first.body.len(), SIZE);
        assert!(first.body == expected(SIZE), "streamed {streamed}");
        // Known up front only when the length is.
        let marked = first.headers.get("idempotent-stored").is_some();
        assert_eq!(marked, !streamed);

        let again = server.send(Method::POST, "/exports", &key, "").await;
        again.assert_problem(500, "not-stored");
        assert!(
            again.json()["detail"]
                .as_str()
                .unwrap()
                .contains("will not be processed again")
        );
        assert_eq!(runs.count(), 1, "streamed {streamed}");
    }
}

#[tokio::test]
async fn binary_and_control_byte_bodies_replay_exactly_without_blowing_up() {
    // 300 KiB of control bytes: valid UTF-8, six bytes each as JSON text,
    // which overflowed the 1 MiB record before.
    let runs = Runs::default();
    let counted = runs.clone();
    let router = Router::new()
        .route(
            "/blobs",
            post(move || {
                let runs = counted.clone();
                async move {
                    runs.hit();
                    vec![0x01u8; 300 << 10]
                }
            }),
        )
        .layer(layer());
    let server = serve(router).await;
    let key = [("idempotency-key", "\"blob\"")];
    let first = server.send(Method::POST, "/blobs", &key, "").await;
    assert!(first.headers.get("idempotent-stored").is_none());
    let again = server.send(Method::POST, "/blobs", &key, "").await;
    assert!(again.replayed());
    assert_eq!(again.body, first.body);
    assert_eq!(again.body.len(), 300 << 10);

    let router = sized_route(runs.clone(), 200 << 10, true).layer(layer());
    let server = serve(router).await;
    let first = server.send(Method::POST, "/exports", &key, "").await;
    let again = server.send(Method::POST, "/exports", &key, "").await;
    assert!(again.replayed());
    assert!(again.body == expected(200 << 10) && again.body == first.body);
    assert_eq!(runs.count(), 2);
}

#[tokio::test]
async fn a_415_is_not_pinned_and_the_fixed_retry_runs() {
    let (server, payments) = payments(quick()).await;
    let key = ("idempotency-key", "\"no-type\"");
    let body = order(1500).to_string();

    let refused = server.send(Method::POST, "/payments", &[key], &body).await;
    assert_eq!(refused.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let fixed = server
        .send(
            Method::POST,
            "/payments",
            &[key, ("content-type", "application/json")],
            &body,
        )
        .await;
    assert_eq!(fixed.status, StatusCode::CREATED, "{:?}", fixed.body);
    assert!(!fixed.replayed());
    let again = server
        .send(
            Method::POST,
            "/payments",
            &[key, ("content-type", "application/json")],
            &body,
        )
        .await;
    assert!(again.replayed());
    assert_eq!(again.body, fixed.body);
    assert_eq!(payments.service_runs(), 1);
}

#[tokio::test]
async fn refusals_release_the_key_and_final_answers_are_stored() {
    let runs = Runs::default();
    let counted = runs.clone();
    let router = Router::new()
        .route(
            "/answers",
            post(move |body: String| {
                let runs = counted.clone();
                async move {
                    runs.hit();
                    let status = body.parse::<u16>().unwrap();
                    (
                        StatusCode::from_u16(status).unwrap(),
                        format!("answered {status}"),
                    )
                }
            }),
        )
        .layer(layer().share_keys_across_callers());
    let server = serve(router).await;
    for (status, stored) in [
        (400, false),
        (401, false),
        (403, false),
        (404, false),
        (422, false),
        (429, false),
        (503, false),
        (200, true),
        (303, true),
        (402, true),
        (410, true),
    ] {
        let key = format!("\"status-{status}\"");
        let headers = [("idempotency-key", key.as_str())];
        let body = status.to_string();
        let first = server.send(Method::POST, "/answers", &headers, &body).await;
        assert_eq!(first.status.as_u16(), status);
        let again = server.send(Method::POST, "/answers", &headers, &body).await;
        assert_eq!(again.status.as_u16(), status);
        assert_eq!(again.replayed(), stored, "{status}");
        assert_eq!(again.body, format!("answered {status}"));
    }
    // Two runs for each released status, one for each stored one.
    assert_eq!(runs.count(), 7 * 2 + 4);
}

/// Counts the requests that reach the server, before the layer.
async fn count_arrival(
    arrivals: Arc<AtomicU32>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    arrivals.fetch_add(1, Ordering::SeqCst);
    next.run(request).await
}

/// `POST /charges` behind `idem`, answering `failure` half a second after
/// `arrived` requests have reached the server (counted before the layer),
/// so every duplicate is waiting on the first attempt when it fails.
fn failing_once_arrived(
    runs: Runs,
    idem: IdempotencyLayer,
    arrived: u32,
    failure: (StatusCode, String),
) -> Router {
    let arrivals = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&arrivals);
    Router::new()
        .route(
            "/charges",
            post(move || {
                let (runs, arrivals, failure) =
                    (runs.clone(), Arc::clone(&counted), failure.clone());
                async move {
                    runs.hit();
                    while arrivals.load(Ordering::SeqCst) < arrived {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    failure
                }
            }),
        )
        .layer(idem)
        .layer(axum::middleware::from_fn(move |request, next| {
            count_arrival(Arc::clone(&arrivals), request, next)
        }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_waiting_duplicates_of_a_failing_request_run_it_once() {
    const BURST: u32 = 50;
    let runs = Runs::default();
    let failure = (StatusCode::INTERNAL_SERVER_ERROR, "gateway down".to_owned());
    let idem = layer().wait(Duration::from_secs(30));
    let router = failing_once_arrived(runs.clone(), idem, BURST, failure);
    let server = Arc::new(serve(router).await);
    let answers: Vec<Answer> = futures::future::join_all((0..BURST).map(|_| {
        let server = Arc::clone(&server);
        async move { server.post("/charges", "\"burst\"", "{}").await }
    }))
    .await;

    assert_eq!(runs.count(), 1, "the handler ran once for the burst");
    for answer in &answers {
        assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(answer.body, "gateway down");
    }
    let replayed = answers.iter().filter(|a| a.replayed()).count();
    assert_eq!(replayed, BURST as usize - 1);

    // A later retry is a new attempt.
    let later = server.post("/charges", "\"burst\"", "{}").await;
    assert_eq!(later.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(!later.replayed());
    assert_eq!(runs.count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_duplicate_of_a_failure_too_large_to_keep_gets_409() {
    let runs = Runs::default();
    let failure = (StatusCode::BAD_GATEWAY, "x".repeat(2048));
    let idem = layer()
        .wait(Duration::from_secs(30))
        .max_response_bytes(1024);
    let router = failing_once_arrived(runs.clone(), idem, 2, failure);
    let server = serve(router).await;
    let key = [("idempotency-key", "\"too-big\"")];
    let (one, two) = tokio::join!(
        server.send(Method::POST, "/charges", &key, ""),
        server.send(Method::POST, "/charges", &key, ""),
    );
    let (first, second) = if one.status == StatusCode::BAD_GATEWAY {
        (one, two)
    } else {
        (two, one)
    };
    assert_eq!(first.status, StatusCode::BAD_GATEWAY);
    assert_eq!(first.body.len(), 2048);
    second.assert_problem(409, "attempt-failed");
    assert_eq!(runs.count(), 1);
}

/// An `/orders` router behind `idem`, counting its handler's runs.
async fn orders(idem: IdempotencyLayer, runs: &Runs) -> Server {
    let counted = runs.clone();
    let router = Router::new()
        .route(
            "/orders",
            post(move || {
                let runs = counted.clone();
                async move {
                    runs.hit();
                    (StatusCode::CREATED, "order 1")
                }
            }),
        )
        .layer(idem);
    serve(router).await
}

const JSON: (&str, &str) = ("content-type", "application/json");

#[tokio::test]
async fn a_json_body_is_one_request_whatever_its_key_order_and_spacing() {
    for exact in [false, true] {
        let runs = Runs::default();
        let server = orders(
            if exact {
                layer().exact_bytes()
            } else {
                layer()
            },
            &runs,
        )
        .await;
        let key = [("idempotency-key", "\"o-1\""), JSON];
        let first = server
            .send(Method::POST, "/orders", &key, r#"{"sku":"tea","qty":2}"#)
            .await;
        assert_eq!(first.status, StatusCode::CREATED);
        let reordered = "{ \"qty\": 2,\n \"sku\": \"tea\" }";
        let reordered = server.send(Method::POST, "/orders", &key, reordered).await;
        if exact {
            reordered.assert_problem(422, "fingerprint-mismatch");
        } else {
            assert!(reordered.replayed(), "{:?}", reordered.status);
        }
        let changed = server
            .send(Method::POST, "/orders", &key, r#"{"sku":"tea","qty":3}"#)
            .await;
        changed.assert_problem(422, "fingerprint-mismatch");
        assert_eq!(runs.count(), 1);
    }
}

/// A body that is not sent as JSON is compared byte for byte, even when
/// it parses as JSON.
#[tokio::test]
async fn a_body_not_sent_as_json_is_fingerprinted_by_its_bytes() {
    let runs = Runs::default();
    let server = orders(layer(), &runs).await;
    let key = [
        ("idempotency-key", "\"o-2\""),
        ("content-type", "text/plain"),
    ];
    let first = server
        .send(Method::POST, "/orders", &key, r#"{"a":1,"b":2}"#)
        .await;
    assert_eq!(first.status, StatusCode::CREATED);
    let same = server
        .send(Method::POST, "/orders", &key, r#"{"a":1,"b":2}"#)
        .await;
    assert!(same.replayed());
    let reordered = server
        .send(Method::POST, "/orders", &key, r#"{"b":2,"a":1}"#)
        .await;
    reordered.assert_problem(422, "fingerprint-mismatch");
    assert_eq!(runs.count(), 1);
}

/// Records whose fingerprint is the JSON body's bytes (written with
/// `exact_bytes`, or before JSON was canonical by default) still replay
/// the same bytes behind the default layer; other bytes are refused,
/// never run again.
#[tokio::test]
async fn a_record_fingerprinted_by_its_bytes_still_replays() {
    let idem = Idempotency::new(MemoryStore::new());
    let runs = Runs::default();
    let before = orders(IdempotencyLayer::new(idem.clone()).exact_bytes(), &runs).await;
    let after = orders(IdempotencyLayer::new(idem), &runs).await;
    let key = [("idempotency-key", "\"o-3\""), JSON];
    let body = r#"{"sku":"tea","qty":2}"#;
    let first = before.send(Method::POST, "/orders", &key, body).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let again = after.send(Method::POST, "/orders", &key, body).await;
    assert!(again.replayed(), "{:?}", again.status);
    assert_eq!(again.body, first.body);
    let reordered = after
        .send(Method::POST, "/orders", &key, r#"{"qty":2,"sku":"tea"}"#)
        .await;
    reordered.assert_problem(422, "fingerprint-mismatch");
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn keys_are_strings_or_tokens_not_other_structured_field_items() {
    let (server, payments) = payments(quick()).await;
    for key in ["42", "-7", "3.5", ":cHJldGVuZA==:", "?1"] {
        server
            .pay(None, Some(key), &order(100))
            .await
            .assert_problem(400, "invalid-key");
    }
    assert_eq!(payments.handler_runs(), 0);
    let quoted = server.pay(None, Some("\"42\""), &order(100)).await;
    assert_eq!(quoted.status, StatusCode::CREATED);
    let bare = server.pay(None, Some("k-42"), &order(100)).await;
    assert_eq!(bare.status, StatusCode::CREATED);
    assert_eq!(payments.service_runs(), 2);
}

#[tokio::test]
async fn a_response_within_the_limit_but_over_the_record_limit_still_settles_the_key() {
    let runs = Runs::default();
    let idem = Idempotency::builder(MemoryStore::new())
        .max_record_bytes(8 << 10)
        .build();
    let router = sized_route(runs.clone(), 64 << 10, false).layer(IdempotencyLayer::new(idem));
    let server = serve(router).await;
    let key = [("idempotency-key", "\"rec\"")];
    let first = server.send(Method::POST, "/exports", &key, "").await;
    assert_eq!(first.status, StatusCode::OK);
    assert!(first.body == expected(64 << 10));
    let again = server.send(Method::POST, "/exports", &key, "").await;
    again.assert_problem(500, "not-stored");
    assert_eq!(runs.count(), 1);
}
