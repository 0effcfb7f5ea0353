//! `#[idempotent(detach)]` and `Call::detach`: a call whose caller
//! gives up (its future dropped by a timeout) runs on to completion; a
//! retry during the run waits and gets the value; the body starts once.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use idem::{Idempotency, MemoryStore, idempotent};

static IDEM: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(MemoryStore::new()));
static STARTS: AtomicU32 = AtomicU32::new(0);

#[idempotent(key = order_id, store = IDEM, wait = "5s", detach)]
async fn ship(order_id: String, parcels: u32) -> Result<String, idem::Error> {
    STARTS.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(format!("{order_id}: {parcels} parcels shipped"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_fn_dropped_by_a_timeout_still_completes() {
    let gave_up = tokio::time::timeout(Duration::from_millis(30), ship("o-1".into(), 2)).await;
    assert!(gave_up.is_err());
    // A retry during the run waits for it and gets its value.
    let retry = ship("o-1".into(), 2).await.unwrap();
    assert_eq!(retry, "o-1: 2 parcels shipped");
    assert_eq!(STARTS.load(Ordering::SeqCst), 1);
    assert_eq!(IDEM.drain(Duration::from_secs(1)).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builder_runs_detached_and_drain_waits_for_it() {
    let idem = Idempotency::new(MemoryStore::new());
    let starts = Arc::new(AtomicU32::new(0));
    let call = |starts: Arc<AtomicU32>| {
        idem.call("shipping", "o-2")
            .wait(Duration::from_secs(5))
            .detach()
            .run(move || async move {
                starts.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok::<u32, idem::Error>(42)
            })
    };
    let gave_up = tokio::time::timeout(Duration::from_millis(30), call(starts.clone())).await;
    assert!(gave_up.is_err());
    assert_eq!(idem.drain(Duration::ZERO).await, 1, "still running");
    assert_eq!(idem.drain(Duration::from_secs(5)).await, 0);
    assert_eq!(call(starts.clone()).await.unwrap(), 42);
    assert_eq!(starts.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn without_detach_a_dropped_call_releases_and_the_retry_runs_again() {
    let idem = Idempotency::new(MemoryStore::new());
    let starts = Arc::new(AtomicU32::new(0));
    let call = |starts: Arc<AtomicU32>| {
        idem.call("shipping", "o-3").run(move || async move {
            starts.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<u32, idem::Error>(7)
        })
    };
    let gave_up = tokio::time::timeout(Duration::from_millis(20), call(starts.clone())).await;
    assert!(gave_up.is_err());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(call(starts.clone()).await.unwrap(), 7);
    assert_eq!(
        starts.load(Ordering::SeqCst),
        2,
        "the contrast: the body ran again"
    );
}

#[tokio::test]
#[should_panic(expected = "the body panicked")]
async fn a_panic_in_a_detached_body_reaches_the_caller() {
    let idem = Idempotency::new(MemoryStore::new());
    let _: Result<u32, idem::Error> = idem
        .call("shipping", "o-4")
        .detach()
        .run(|| async { panic!("the body panicked") })
        .await;
}

static SHARED: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(MemoryStore::new()));

/// A `static` handle used from one runtime after another (as
/// `#[tokio::test]`s do): each runtime renews its own long bodies.
#[test]
fn a_static_handle_renews_on_every_runtime() {
    for round in 0..2 {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let lease = Duration::from_millis(150);
            let key = format!("long-{round}");
            let holder = {
                let key = key.clone();
                tokio::spawn(async move {
                    SHARED
                        .call("renewal", &key)
                        .lease(lease)
                        .run(|| async move {
                            tokio::time::sleep(lease * 4).await;
                            Ok::<u8, idem::Error>(1)
                        })
                        .await
                })
            };
            tokio::time::sleep(lease * 2).await;
            let duplicate: Result<u8, idem::Error> = SHARED
                .call("renewal", &key)
                .lease(lease)
                .run(|| async { Ok(2) })
                .await;
            assert!(
                matches!(duplicate, Err(idem::Error::InProgress { .. })),
                "round {round}: {duplicate:?}"
            );
            assert_eq!(holder.await.unwrap().unwrap(), 1);
        });
    }
}
