//! Leases and expiry: renewal, takeover with fencing, a lapsed claim, a
//! dropped call, a record's TTL.

use std::time::Duration;

use idem::{Error, Idempotency};

use crate::support::{Counter, scope};

/// A record lives its `ttl`, judged by the store's clock; then the key
/// runs again.
pub async fn ttl_expiry_runs_again(idem: Idempotency) {
    let scope = scope("ttl");
    let runs = Counter::default();
    let call = || {
        idem.call(&scope, "k")
            .ttl(Duration::from_millis(400))
            .lease(Duration::from_millis(400))
            .run(|| async { Ok::<_, Error>(runs.bump()) })
    };
    assert_eq!(call().await.unwrap(), 1);
    assert_eq!(call().await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(
        call().await.unwrap(),
        2,
        "an expired record must run the body again"
    );
}

/// A holder that stalls whole (as a paused process would: its thread
/// blocked, and its renewal with it, on a borrowed store renewed in the
/// body's task) loses its lease; a second caller takes over and
/// completes; the first caller's late completion is refused and does not
/// overwrite.
pub async fn lease_expiry_allows_takeover_and_fences_the_late_holder(idem: Idempotency) {
    let scope = scope("takeover");
    let lease = Duration::from_millis(300);
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let stalled = {
        let (idem, scope) = (idem.clone(), scope.clone());
        tokio::spawn(async move {
            let store = idem.store().clone();
            idem.call(&scope, "k")
                .lease(lease)
                .on(store.as_ref())
                .run(|| async {
                    started_tx.send(()).unwrap();
                    // Blocks this worker: no renewal can run.
                    std::thread::sleep(lease * 4);
                    Ok::<_, Error>("first".to_owned())
                })
                .await
        })
    };
    started_rx.await.unwrap();
    tokio::time::sleep(lease * 2).await;
    let second: Result<String, Error> = idem
        .call(&scope, "k")
        .lease(lease)
        .run(|| async { Ok("second".into()) })
        .await;
    assert_eq!(second.unwrap(), "second");
    let first = stalled.await.unwrap();
    // Whether the second caller had claimed before the first's
    // completion arrived depends on scheduling (`taken_over` says which;
    // `fencing_at_the_store` pins both answers); either way it is refused.
    assert!(matches!(first, Err(Error::LeaseLost { .. })), "{first:?}");
    let replay: Result<String, Error> = idem
        .call(&scope, "k")
        .run(|| async { panic!("must replay") })
        .await;
    assert_eq!(
        replay.unwrap(),
        "second",
        "the late holder overwrote the record"
    );
}

/// A holder that stalls past its lease while nobody else calls is told its
/// claim expired, not that it was taken over; the key runs again.
pub async fn a_lapsed_claim_is_lost_as_expired(idem: Idempotency) {
    let scope = scope("lapsed");
    let lease = Duration::from_millis(300);
    let store = idem.store().clone();
    let first: Result<String, Error> = idem
        .call(&scope, "k")
        .lease(lease)
        .on(store.as_ref())
        .run(|| async {
            // Blocks this worker: no renewal can run.
            std::thread::sleep(lease * 3);
            Ok("first".to_owned())
        })
        .await;
    let err = first.unwrap_err();
    assert!(
        matches!(
            err,
            Error::LeaseLost {
                taken_over: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("the claim expired"), "{err}");
    let again: Result<String, Error> = idem
        .call(&scope, "k")
        .run(|| async { Ok("again".to_owned()) })
        .await;
    assert_eq!(again.unwrap(), "again");
}

/// A body running five leases long keeps its claim: duplicates get
/// `InProgress` throughout.
pub async fn renewal_keeps_a_long_body_claimed(idem: Idempotency) {
    let scope = scope("renewal");
    let lease = Duration::from_millis(300);
    let runs = Counter::default();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let long = {
        let (idem, scope, runs) = (idem.clone(), scope.clone(), runs.clone());
        tokio::spawn(async move {
            idem.call(&scope, "k")
                .lease(lease)
                .run(|| async {
                    runs.bump();
                    started_tx.send(()).unwrap();
                    tokio::time::sleep(lease * 5).await;
                    Ok::<_, Error>(1)
                })
                .await
        })
    };
    started_rx.await.unwrap();
    for _ in 0..4 {
        tokio::time::sleep(lease).await;
        let dup: Result<u8, Error> = idem
            .call(&scope, "k")
            .lease(lease)
            .run(|| async { Ok(runs.bump() as u8) })
            .await;
        assert!(
            matches!(dup, Err(Error::InProgress { .. })),
            "claim was lost: {dup:?}"
        );
    }
    assert_eq!(long.await.unwrap().unwrap(), 1);
    assert_eq!(runs.get(), 1);
}

/// A call dropped mid-body releases its claim at once, long before its
/// lease ends.
pub async fn dropped_call_releases_its_claim(idem: Idempotency) {
    let scope = scope("dropped");
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let abandoned = {
        let (idem, scope) = (idem.clone(), scope.clone());
        tokio::spawn(async move {
            idem.call(&scope, "k")
                .lease(Duration::from_secs(60))
                .run(|| async {
                    started_tx.send(()).unwrap();
                    std::future::pending::<()>().await;
                    Ok::<_, Error>(0u8)
                })
                .await
        })
    };
    started_rx.await.unwrap();
    abandoned.abort();
    assert!(abandoned.await.unwrap_err().is_cancelled());
    // The release runs on the runtime right after the drop; well inside a
    // second, against a lease of a minute.
    let retry: Result<u8, Error> = idem
        .call(&scope, "k")
        .wait(Duration::from_secs(2))
        .run(|| async { Ok(9) })
        .await;
    assert_eq!(retry.unwrap(), 9);
}

/// A body that blocks its thread for three leases: the lease is renewed
/// from a task of its own, so a duplicate in the middle finds the key in
/// progress instead of taking it over and running the body a second time.
pub async fn a_body_that_blocks_its_thread_keeps_its_lease(idem: Idempotency) {
    let scope = scope("blocking");
    let lease = Duration::from_millis(400);
    let runs = Counter::default();
    let holder = {
        let (idem, scope, runs) = (idem.clone(), scope.clone(), runs.clone());
        tokio::spawn(async move {
            idem.call(&scope, "k")
                .lease(lease)
                .run(|| async move {
                    runs.bump();
                    std::thread::sleep(lease * 3);
                    Ok::<u8, Error>(1)
                })
                .await
        })
    };
    tokio::time::sleep(lease * 2).await;
    let duplicate: Result<u8, Error> = idem
        .call(&scope, "k")
        .lease(lease)
        .run(|| async {
            runs.bump();
            Ok(2)
        })
        .await;
    assert!(
        matches!(duplicate, Err(Error::InProgress { .. })),
        "{duplicate:?}"
    );
    assert_eq!(holder.await.unwrap().unwrap(), 1);
    assert_eq!(runs.get(), 1);
}
