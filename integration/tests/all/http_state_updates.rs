//! State updates through the layer (SPEC §7, issue #51): `PUT
//! /orders/7/status` keyed by the resource, with `mismatch = "rerun"`,
//! over real HTTP, the handler publishing one message per real change on
//! NATS JetStream (`NATS_URL`, else 127.0.0.1:4222).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_nats::jetstream;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use axum::routing::put;
use idem::http::IdempotencyLayer;
use idem::{Idempotency, MemoryStore};

use crate::support::http::{Server, serve, unique};

#[derive(Clone)]
struct Orders {
    runs: Arc<AtomicUsize>,
    nats: jetstream::Context,
    subject: String,
}

/// The seeds' handler: writes the status, stamps `update_time`, publishes
/// the change (awaiting JetStream's ack) and would clear a cache.
async fn set_status(
    State(orders): State<Orders>,
    Path(id): Path<u64>,
    body: String,
) -> (StatusCode, String) {
    let run = orders.runs.fetch_add(1, Ordering::SeqCst) + 1;
    let message = format!("order {id}: {body}");
    let ack = orders
        .nats
        .publish(orders.subject.clone(), message.into())
        .await
        .expect("publish");
    ack.await.expect("JetStream acknowledges the message");
    (StatusCode::OK, format!("update {run}: {body}"))
}

async fn messages(nats: &jetstream::Context, stream: &str) -> u64 {
    let mut stream = nats.get_stream(stream).await.expect("the stream");
    stream.info().await.expect("stream info").state.messages
}

async fn put_status(server: &Server, body: &str) -> crate::support::http::Answer {
    server
        .send(
            Method::PUT,
            "/orders/7/status",
            &[("content-type", "application/json")],
            body,
        )
        .await
}

#[tokio::test]
async fn a_state_update_runs_and_publishes_once_per_real_change() {
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let client = async_nats::connect(&url)
        .await
        .expect("NATS at NATS_URL or 127.0.0.1:4222");
    let nats = jetstream::new(client);
    let id = unique();
    let (stream, subject) = (format!("IDEM_STATUS_{id}"), format!("idem.status.{id}"));
    nats.create_stream(jetstream::stream::Config {
        name: stream.clone(),
        subjects: vec![subject.clone()],
        ..Default::default()
    })
    .await
    .expect("a stream");
    let orders = Orders {
        runs: Arc::default(),
        nats: nats.clone(),
        subject,
    };
    let router = Router::new()
        .route("/orders/{id}/status", put(set_status))
        .with_state(orders.clone())
        .layer(
            IdempotencyLayer::new(Idempotency::new(MemoryStore::new()))
                .state_updates([Method::PUT])
                .wait(Duration::from_secs(5)),
        );
    let server = serve(router).await;

    let first = put_status(&server, r#"{"status":"paid"}"#).await;
    assert_eq!(first.status, StatusCode::OK);
    assert!(!first.replayed());
    let again = put_status(&server, r#"{"status":"paid"}"#).await;
    assert_eq!((again.status, &again.body), (StatusCode::OK, &first.body));
    assert!(again.replayed(), "the same update again is replayed");
    assert_eq!(orders.runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        messages(&nats, &stream).await,
        1,
        "one message for one change"
    );

    let shipped = put_status(&server, r#"{"status":"shipped"}"#).await;
    assert_eq!(shipped.status, StatusCode::OK);
    assert!(!shipped.replayed());
    assert_eq!(&shipped.body[..], br#"update 2: {"status":"shipped"}"#);
    assert_eq!(orders.runs.load(Ordering::SeqCst), 2);
    assert_eq!(
        messages(&nats, &stream).await,
        2,
        "a second message for the change"
    );

    // Another order is another resource; POST is not handled at all.
    let other = server
        .send(Method::PUT, "/orders/8/status", &[], r#"{"status":"paid"}"#)
        .await;
    assert!(!other.replayed());
    assert_eq!(orders.runs.load(Ordering::SeqCst), 3);
    nats.delete_stream(&stream)
        .await
        .expect("the stream is deleted");
}
