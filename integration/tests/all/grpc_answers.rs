//! idem's own answers through the tonic layer over real HTTP/2 (SPEC
//! §14): a tombstoned key, a store that is down, and a handler whose
//! client cancelled, drained on graceful shutdown.

use std::time::{Duration, Instant};

use idem::grpc::IdempotencyLayer;
use idem::{Idempotency, MemoryStore};
use tonic::Code;
use tonic_types::StatusExt;

use crate::support::grpc::{self, CHARGE, ChargeRequest, order};

fn reason(status: &tonic::Status) -> String {
    status
        .get_details_error_info()
        .map(|info| format!("{}/{}", info.domain, info.reason))
        .unwrap_or_default()
}

#[tokio::test]
async fn a_duplicate_after_the_ttl_within_the_tombstone_is_failed_precondition() {
    let layer = IdempotencyLayer::new(Idempotency::new(MemoryStore::new()))
        .message::<ChargeRequest>(CHARGE)
        .ttl(Duration::from_secs(1))
        .tombstone(Duration::from_secs(3600));
    let (addr, runs) = grpc::serve(layer).await;
    let mut client = grpc::connect(addr).await;
    client.charge(Some("k-late"), order("o-1")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let status = client
        .charge(Some("k-late"), order("o-1"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert_eq!(reason(&status), "idemkit/IDEMPOTENCY_KEY_EXPIRED");
    assert!(status.get_details_retry_info().is_none(), "not to retry");
    assert_eq!(runs.started(), 1, "the handler does not run again");
    // Another message under the tombstoned key is still a reused key.
    let status = client
        .charge(Some("k-late"), order("o-2"))
        .await
        .unwrap_err();
    assert_eq!(reason(&status), "idemkit/IDEMPOTENCY_KEY_REUSED");
    assert_eq!(runs.started(), 1);
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn a_store_that_is_down_is_unavailable_with_retry_info_and_nothing_runs() {
    use crate::support::tcp_gate::TcpGate;

    let gate = TcpGate::open("127.0.0.1:6379".into()).await;
    let store = idem::RedisStore::builder()
        .connection_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_millis(500))
        .connect(&format!("redis://{}", gate.addr))
        .await
        .expect("Redis on 127.0.0.1:6379 (install and start redis-server)");
    let layer = IdempotencyLayer::new(Idempotency::new(store)).message::<ChargeRequest>(CHARGE);
    let (addr, runs) = grpc::serve(layer).await;
    let mut client = grpc::connect(addr).await;
    let key = format!("k-down-{}", std::process::id());
    gate.close().await;
    let began = Instant::now();
    let status = client.charge(Some(&key), order("o-1")).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(reason(&status), "idemkit/IDEMPOTENCY_STORE_UNAVAILABLE");
    let delay = status.get_details_retry_info().and_then(|r| r.retry_delay);
    assert!(delay.is_some(), "a RetryInfo delay: {status:?}");
    assert_eq!(runs.started(), 0, "fail closed: no claim, no run");
    assert!(began.elapsed() < Duration::from_secs(10));
    // The store is back: the retry runs, once.
    gate.reopen().await;
    let mut answer = client.charge(Some(&key), order("o-1")).await;
    for _ in 0..20 {
        if answer.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        answer = client.charge(Some(&key), order("o-1")).await;
    }
    assert_eq!(answer.unwrap().get_ref().run, 1);
    assert_eq!(runs.started(), 1);
}

/// The client cancels mid-handler, then the server shuts down: `drain`
/// waits for the handler, which finishes, and its answer is stored for
/// the retry (served here by a new server on the same store).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_runs_to_completion_and_shutdown_drains_it() {
    let idem = Idempotency::new(MemoryStore::new());
    let layer = || IdempotencyLayer::new(idem.clone()).message::<ChargeRequest>(CHARGE);
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let (addr, runs, server) = grpc::serve_until(layer(), stopped).await;
    let mut client = grpc::connect(addr).await;
    let call = tokio::spawn(async move { client.charge(Some("k-gone"), order("sleep:600")).await });
    while runs.started() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    call.abort(); // the client goes away: its stream is reset
    assert!(call.await.unwrap_err().is_cancelled());
    assert_eq!(runs.finished(), 0, "still running");

    let began = Instant::now();
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    assert_eq!(idem.drain(Duration::from_secs(5)).await, 0);
    assert!(began.elapsed() < Duration::from_secs(5));
    assert_eq!((runs.started(), runs.finished()), (1, 1));

    let (addr, runs_after) = grpc::serve(layer()).await;
    let mut client = grpc::connect(addr).await;
    let retry = client
        .charge(Some("k-gone"), order("sleep:600"))
        .await
        .unwrap();
    assert_eq!(retry.get_ref().run, 1);
    assert_eq!(retry.metadata().get("idempotent-replayed").unwrap(), "true");
    assert_eq!(runs_after.started(), 0);
}
