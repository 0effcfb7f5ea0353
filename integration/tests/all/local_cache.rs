//! The opt-in local replay cache: hits cost no store round trip, records
//! are never served past the store's expiry, in-progress states are never
//! cached. The whole conformance suite also runs with the cache on.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem::{Error, Idempotency, MemoryStore};

idem_conformance::suite!(async {
    Idempotency::builder(MemoryStore::new())
        .local_cache(10_000)
        .build()
});

/// A memory store that counts the claims that reach it.
fn counting() -> idem_conformance::SharedStore {
    idem_conformance::SharedStore::new(Arc::new(MemoryStore::new()))
}

#[tokio::test]
async fn hits_cost_no_round_trip_and_expire_with_the_record() {
    let store = counting();
    let claims = store.claims.clone();
    let idem = Idempotency::builder(store).local_cache(100).build();
    let runs = AtomicUsize::new(0);
    let call = || {
        idem.call("cache", "k")
            .ttl(Duration::from_millis(300))
            .lease(Duration::from_millis(300))
            .run(|| async { Ok::<_, Error>(runs.fetch_add(1, Ordering::SeqCst)) })
    };
    assert_eq!(call().await.unwrap(), 0);
    assert_eq!(claims.load(Ordering::SeqCst), 1);
    for _ in 0..10 {
        assert_eq!(call().await.unwrap(), 0);
    }
    assert_eq!(
        claims.load(Ordering::SeqCst),
        1,
        "cached replays reached the store"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(call().await.unwrap(), 1, "a record was served past its TTL");
    assert_eq!(claims.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn records_replayed_from_the_store_are_cached_with_the_store_expiry() {
    let store = counting();
    let claims = store.claims.clone();
    // Another replica completed the record; this one has an empty cache.
    let writer = Idempotency::new(store.clone());
    let short = Duration::from_millis(300);
    let _: u8 = writer
        .call("cache", "k")
        .ttl(short)
        .lease(short)
        .run(|| async { Ok::<_, Error>(1) })
        .await
        .unwrap();
    let reader = Idempotency::builder(store).local_cache(100).build();
    let before = claims.load(Ordering::SeqCst);
    // The reader asks for a TTL of a day, but the store said 300 ms.
    let read = || {
        reader
            .call("cache", "k")
            .ttl(Duration::from_secs(86_400))
            .run(|| async { Ok::<_, Error>(2u8) })
    };
    assert_eq!(read().await.unwrap(), 1);
    assert_eq!(read().await.unwrap(), 1);
    assert_eq!(claims.load(Ordering::SeqCst), before + 1);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(read().await.unwrap(), 2, "served past the store's expiry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_progress_is_never_cached() {
    let idem = Idempotency::builder(MemoryStore::new())
        .local_cache(100)
        .build();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let holder = {
        let idem = idem.clone();
        tokio::spawn(async move {
            idem.call("cache", "busy")
                .run(|| async {
                    tx.send(()).unwrap();
                    release_rx.await.unwrap();
                    Ok::<_, Error>(7u8)
                })
                .await
        })
    };
    rx.await.unwrap();
    let busy: Result<u8, Error> = idem.call("cache", "busy").run(|| async { Ok(0) }).await;
    assert!(matches!(busy, Err(Error::InProgress { .. })));
    release_tx.send(()).unwrap();
    assert_eq!(holder.await.unwrap().unwrap(), 7);
    let replay: Result<u8, Error> = idem.call("cache", "busy").run(|| async { Ok(0) }).await;
    assert_eq!(replay.unwrap(), 7);
}

#[tokio::test]
async fn a_cached_record_still_checks_the_fingerprint() {
    let idem = Idempotency::builder(MemoryStore::new())
        .local_cache(100)
        .build();
    let _: u8 = idem
        .call("cache", "fp")
        .fingerprint(&1)
        .run(|| async { Ok::<_, Error>(1) })
        .await
        .unwrap();
    let other: Result<u8, Error> = idem
        .call("cache", "fp")
        .fingerprint(&2)
        .run(|| async { Ok(2) })
        .await;
    assert!(matches!(other, Err(Error::FingerprintMismatch { .. })));
}
