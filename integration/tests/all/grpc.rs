//! The tonic layer (`idem::grpc`, SPEC §14) over real HTTP/2 on loopback:
//! a tonic server with the layer, a tonic client, a memory or SQLite store.

use std::time::Duration;

use idem::grpc::IdempotencyLayer;
use idem::{Idempotency, MemoryStore};
use tonic::Code;
use tonic_types::StatusExt;

use crate::support::grpc::{self, CHARGE, ChargeRequest, order};

fn layer() -> IdempotencyLayer {
    IdempotencyLayer::new(Idempotency::new(MemoryStore::new()))
        .message::<ChargeRequest>(CHARGE)
        .stored_metadata([http::HeaderName::from_static("x-run")])
}

fn reason(status: &tonic::Status) -> String {
    status
        .get_details_error_info()
        .map(|info| format!("{}/{}", info.domain, info.reason))
        .unwrap_or_default()
}

#[tokio::test]
async fn the_same_key_twice_runs_once_and_replays_status_message_and_metadata() {
    let (addr, runs) = grpc::serve(layer()).await;
    let mut client = grpc::connect(addr).await;
    let first = client.charge(Some("k-1"), order("o-1")).await.unwrap();
    let again = client.charge(Some("k-1"), order("o-1")).await.unwrap();
    assert_eq!(runs.started(), 1);
    assert_eq!(first.get_ref(), again.get_ref());
    assert_eq!(first.metadata().get("x-run"), again.metadata().get("x-run"));
    assert_eq!(first.metadata().get("idempotent-replayed"), None);
    assert_eq!(again.metadata().get("idempotent-replayed").unwrap(), "true");
    // Without a key, or on another key: runs.
    client.charge(None, order("o-1")).await.unwrap();
    client.charge(Some("k-2"), order("o-1")).await.unwrap();
    assert_eq!(runs.started(), 3);
}

#[tokio::test]
async fn twenty_concurrent_duplicates_run_once_the_rest_aborted_with_retry_info() {
    let (addr, runs) = grpc::serve(layer()).await;
    let client = grpc::connect(addr).await;
    let calls = (0..20).map(|_| {
        let mut client = client.clone();
        tokio::spawn(async move { client.charge(Some("k-race"), order("sleep:400")).await })
    });
    let answers = futures::future::join_all(calls).await;
    let (mut ok, mut aborted) = (0, 0);
    for answer in answers {
        match answer.unwrap() {
            Ok(_) => ok += 1,
            Err(status) => {
                assert_eq!(status.code(), Code::Aborted, "{status:?}");
                assert_eq!(reason(&status), "idemkit/IDEMPOTENCY_IN_PROGRESS");
                let delay = status.get_details_retry_info().and_then(|r| r.retry_delay);
                assert!(delay.is_some(), "a RetryInfo delay: {status:?}");
                aborted += 1;
            }
        }
    }
    assert_eq!((ok, aborted), (1, 19));
    assert_eq!(runs.started(), 1);
}

#[tokio::test]
async fn concurrent_duplicates_that_wait_get_the_first_answer() {
    let (addr, runs) = grpc::serve(layer().wait(Duration::from_secs(5))).await;
    let client = grpc::connect(addr).await;
    let calls = (0..20).map(|_| {
        let mut client = client.clone();
        tokio::spawn(async move { client.charge(Some("k-wait"), order("sleep:300")).await })
    });
    for answer in futures::future::join_all(calls).await {
        assert_eq!(answer.unwrap().unwrap().get_ref().run, 1);
    }
    assert_eq!(runs.started(), 1);
}

#[tokio::test]
async fn the_same_key_with_another_message_is_invalid_argument_key_reused() {
    let (addr, runs) = grpc::serve(layer()).await;
    let mut client = grpc::connect(addr).await;
    client.charge(Some("k-1"), order("o-1")).await.unwrap();
    let status = client.charge(Some("k-1"), order("o-2")).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(reason(&status), "idemkit/IDEMPOTENCY_KEY_REUSED");
    assert_eq!(runs.started(), 1);
}

#[tokio::test]
async fn a_map_encoded_in_two_orders_is_one_request() {
    let (addr, runs) = grpc::serve(layer()).await;
    let mut client = grpc::connect(addr).await;
    let labels = [("a", "1"), ("b", "2"), ("c", "3")];
    let reversed = [("c", "3"), ("b", "2"), ("a", "1")];
    let first = client.charge_wire("k-map", "o-1", &labels).await.unwrap();
    let again = client.charge_wire("k-map", "o-1", &reversed).await.unwrap();
    assert_eq!(runs.started(), 1);
    assert_eq!(again.metadata().get("idempotent-replayed").unwrap(), "true");
    assert_eq!(first.get_ref(), again.get_ref());
    // Registered by bytes only, the two orders are two messages.
    let bytes_layer = IdempotencyLayer::new(Idempotency::new(MemoryStore::new())).unary(CHARGE);
    let (addr, runs) = grpc::serve(bytes_layer).await;
    let mut client = grpc::connect(addr).await;
    client.charge_wire("k-map", "o-1", &labels).await.unwrap();
    let status = client
        .charge_wire("k-map", "o-1", &reversed)
        .await
        .unwrap_err();
    assert_eq!(reason(&status), "idemkit/IDEMPOTENCY_KEY_REUSED");
    assert_eq!(runs.started(), 1);
}

#[tokio::test]
async fn a_deadline_that_passes_mid_handler_then_a_retry_gets_the_stored_answer() {
    let (addr, runs) = grpc::serve(layer().wait(Duration::from_secs(5))).await;
    let mut client = grpc::connect(addr).await;
    let mut request = tonic::Request::new(order("sleep:500"));
    request.set_timeout(Duration::from_millis(100));
    let status = client
        .charge_request(Some("k-late"), request)
        .await
        .unwrap_err();
    assert!(
        matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{status:?}"
    );
    let retry = client
        .charge(Some("k-late"), order("sleep:500"))
        .await
        .unwrap();
    assert_eq!(retry.get_ref().run, 1);
    assert_eq!(runs.started(), 1);
    assert_eq!(runs.finished(), 1);
}

#[tokio::test]
async fn unavailable_is_released_and_not_found_is_stored() {
    let (addr, runs) = grpc::serve(layer()).await;
    let mut client = grpc::connect(addr).await;
    let first = client
        .charge(Some("k-u"), order("unavailable"))
        .await
        .unwrap_err();
    let again = client
        .charge(Some("k-u"), order("unavailable"))
        .await
        .unwrap_err();
    assert_eq!(
        (first.code(), again.code()),
        (Code::Unavailable, Code::Unavailable)
    );
    assert_eq!(runs.started(), 2, "released: the retry ran");
    assert_ne!(first.message(), again.message());

    let first = client
        .charge(Some("k-n"), order("not-found"))
        .await
        .unwrap_err();
    let again = client
        .charge(Some("k-n"), order("not-found"))
        .await
        .unwrap_err();
    assert_eq!(
        (first.code(), again.code()),
        (Code::NotFound, Code::NotFound)
    );
    assert_eq!(first.message(), again.message());
    assert_eq!(again.metadata().get("idempotent-replayed").unwrap(), "true");
    assert_eq!(runs.started(), 3, "stored: replayed without a run");
}

#[tokio::test]
async fn a_missing_or_malformed_key_is_invalid_argument_where_required() {
    let layer = IdempotencyLayer::new(Idempotency::new(MemoryStore::new())).required(CHARGE);
    let (addr, runs) = grpc::serve(layer).await;
    let mut client = grpc::connect(addr).await;
    let status = client.charge(None, order("o-1")).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(reason(&status), "idemkit/IDEMPOTENCY_KEY_MISSING");
    let long = "k".repeat(256);
    let status = client.charge(Some(&long), order("o-1")).await.unwrap_err();
    assert_eq!(reason(&status), "idemkit/IDEMPOTENCY_KEY_INVALID");
    assert_eq!(runs.started(), 0);
}

#[tokio::test]
async fn streaming_methods_pass_through_untouched() {
    // `Watch` is not registered: the layer never reads its messages.
    let (addr, runs) = grpc::serve(layer()).await;
    let mut client = grpc::connect(addr).await;
    assert_eq!(client.watch("k-s", 3).await.unwrap(), vec![1, 2, 3]);
    assert_eq!(client.watch("k-s", 3).await.unwrap(), vec![1, 2, 3]);
    assert_eq!(runs.started(), 2, "a stream is never claimed");
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn on_sqlite_the_answer_is_replayed_from_the_file() {
    let dir = std::env::temp_dir().join(format!("idem-grpc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("grpc.db");
    let _ = std::fs::remove_file(&path);
    let store = idem::SqliteStore::open(&path).await.unwrap();
    let layer = IdempotencyLayer::new(Idempotency::new(store)).message::<ChargeRequest>(CHARGE);
    let (addr, runs) = grpc::serve(layer).await;
    let mut client = grpc::connect(addr).await;
    let first = client.charge(Some("k-sql"), order("o-1")).await.unwrap();
    let again = client.charge(Some("k-sql"), order("o-1")).await.unwrap();
    assert_eq!(first.get_ref(), again.get_ref());
    assert_eq!(runs.started(), 1);
}

fn client_layer() -> idem::grpc::client::RetryLayer {
    idem::grpc::client::RetryLayer::new()
        .unary(CHARGE)
        .backoff(Duration::from_millis(10), Duration::from_millis(50))
}

#[tokio::test]
async fn the_client_keeps_its_key_when_the_first_answer_is_lost() {
    let (addr, runs) = grpc::serve_dropping_first(layer()).await;
    let mut client = grpc::connect_with(addr, client_layer()).await;
    // No key of the caller's: the client layer makes one, once.
    let answer = client.charge(None, order("o-1")).await.unwrap();
    assert_eq!(answer.get_ref().run, 1);
    assert_eq!(
        answer.metadata().get("idempotent-replayed").unwrap(),
        "true"
    );
    assert_eq!(runs.started(), 1, "the server ran once");
}

#[tokio::test]
async fn the_client_never_retries_invalid_argument_and_retries_unavailable() {
    // No server layer: every attempt that reaches the handler runs it.
    let bare = IdempotencyLayer::new(Idempotency::new(MemoryStore::new()));
    let (addr, runs) = grpc::serve(bare).await;
    let mut client = grpc::connect_with(addr, client_layer().max_retries(2)).await;
    let status = client.charge(None, order("invalid")).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(runs.started(), 1, "never retried");
    let status = client.charge(None, order("unavailable")).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(runs.started(), 1 + 3, "two retries after the first attempt");
}

#[tokio::test]
async fn the_client_waits_out_aborted_and_gets_the_first_answer() {
    let (addr, runs) = grpc::serve(layer()).await;
    let mut plain = grpc::connect(addr).await;
    let mut retrying = grpc::connect_with(
        addr,
        client_layer()
            .max_retry_after(Duration::from_millis(100))
            .max_retries(20),
    )
    .await;
    let first = tokio::spawn(async move { plain.charge(Some("k-c"), order("sleep:300")).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = retrying
        .charge(Some("k-c"), order("sleep:300"))
        .await
        .unwrap();
    assert_eq!(first.await.unwrap().unwrap().get_ref(), second.get_ref());
    assert_eq!(runs.started(), 1);
}
