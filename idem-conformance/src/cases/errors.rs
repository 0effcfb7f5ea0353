//! Errors: the body's (released, stored, decided per error) and the
//! runtime's (another payload, unreadable or unstorable records).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem::{CodecError, Error, Idempotency, replay_errors, store_errors_if};

use crate::support::{AppError, Counter, Receipt, Shape, SharedStore, plant, scope};

/// An `Err` under the default policy is released: the next call runs the
/// body again.
pub async fn released_errors_run_again(idem: Idempotency) {
    let scope = scope("release");
    let runs = Counter::default();
    let fail = |runs: Counter| async move {
        runs.bump();
        Err::<u8, AppError>(AppError::Timeout)
    };
    assert_eq!(
        idem.call(&scope, "k").run(|| fail(runs.clone())).await,
        Err(AppError::Timeout)
    );
    assert_eq!(
        idem.call(&scope, "k").run(|| fail(runs.clone())).await,
        Err(AppError::Timeout)
    );
    assert_eq!(runs.get(), 2, "a released error must let the retry run");
    let ok: Result<u8, AppError> = idem.call(&scope, "k").run(|| async { Ok(5) }).await;
    assert_eq!(ok, Ok(5));
}

/// Under `replay_errors` an `Err` is stored and replayed like a value.
pub async fn replayed_errors_come_back(idem: Idempotency) {
    let scope = scope("replay");
    let runs = Counter::default();
    for _ in 0..3 {
        let out: Result<u8, AppError> = idem
            .call(&scope, "k")
            .errors(replay_errors())
            .run(|| async {
                runs.bump();
                Err(AppError::Declined("insufficient funds".into()))
            })
            .await;
        assert_eq!(out, Err(AppError::Declined("insufficient funds".into())));
    }
    assert_eq!(runs.get(), 1);
}

fn is_declined(err: &AppError) -> bool {
    matches!(err, AppError::Declined(_))
}

/// Under `store_errors_if` the predicate decides per error which are
/// stored and which released.
pub async fn error_predicate_decides_per_error(idem: Idempotency) {
    let scope = scope("predicate");
    let runs = Counter::default();
    let call = |key: &'static str, err: AppError| {
        let runs = runs.clone();
        let idem = idem.clone();
        let scope = scope.clone();
        async move {
            idem.call(&scope, key)
                .errors(store_errors_if(is_declined))
                .run(|| async move {
                    runs.bump();
                    Err::<u8, _>(err)
                })
                .await
        }
    };
    call("declined", AppError::Declined("card".into()))
        .await
        .unwrap_err();
    call("declined", AppError::Declined("card".into()))
        .await
        .unwrap_err();
    assert_eq!(runs.get(), 1, "a stored error is replayed");
    call("timeout", AppError::Timeout).await.unwrap_err();
    call("timeout", AppError::Timeout).await.unwrap_err();
    assert_eq!(runs.get(), 3, "a declined error is released and retried");
}

/// A key reused with another payload is `FingerprintMismatch`, without
/// running the body, whether the first call completed or is in progress.
pub async fn other_payload_is_refused_without_running(idem: Idempotency) {
    let scope = scope("mismatch");
    let runs = Counter::default();
    let pay = |amount: u64| {
        let (idem, scope, runs) = (idem.clone(), scope.clone(), runs.clone());
        async move {
            idem.call(&scope, "order-1")
                .fingerprint(&("alice", amount))
                .run(|| async {
                    runs.bump();
                    Ok::<_, Error>(amount)
                })
                .await
        }
    };
    assert_eq!(pay(100).await.unwrap(), 100);
    assert!(matches!(
        pay(999).await,
        Err(Error::FingerprintMismatch { .. })
    ));
    assert_eq!(pay(100).await.unwrap(), 100);
    assert_eq!(runs.get(), 1);

    // Also while the first call is still in progress.
    let scope2 = self::scope("mismatch-in-progress");
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let holder = {
        let (idem, scope2) = (idem.clone(), scope2.clone());
        tokio::spawn(async move {
            idem.call(&scope2, "k")
                .fingerprint(&1)
                .run(|| async {
                    started_tx.send(()).unwrap();
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    Ok::<_, Error>(1)
                })
                .await
        })
    };
    started_rx.await.unwrap();
    let other: Result<u8, Error> = idem
        .call(&scope2, "k")
        .fingerprint(&2)
        .wait(Duration::from_secs(5))
        .run(|| async { panic!("must not run") })
        .await;
    assert!(
        matches!(other, Err(Error::FingerprintMismatch { .. })),
        "{other:?}"
    );
    assert_eq!(holder.await.unwrap().unwrap(), 1);
}

/// Record bytes the runtime cannot read are `Error::Codec`, never a
/// rerun of the body.
pub async fn corrupt_record_is_a_codec_error(idem: Idempotency) {
    let scope = scope("corrupt");
    for (key, bytes) in [
        ("empty", &b""[..]),
        ("format", b"\x09\x00\x00"),
        ("cut", b"\x03\x00\x00\x00\x00\x00\x40abc"),
        ("pre-release format", b"\x02\x00\x00\x00\x00\x00\x02u8"),
    ] {
        plant(&idem, &scope, key, bytes).await;
        let out: Result<u8, Error> = idem
            .call(&scope, key)
            .run(|| async { panic!("must not re-run") })
            .await;
        assert!(matches!(out, Err(Error::Codec(_))), "{key}: {out:?}");
    }
}

/// A record read back as another type is `Error::Codec` naming both
/// types.
pub async fn changed_type_is_a_codec_error_with_both_names(idem: Idempotency) {
    let scope = scope("type-change");
    let old: Result<Receipt, Error> = idem
        .call(&scope, "k")
        .run(|| async {
            Ok(Receipt {
                id: 1,
                note: String::new(),
            })
        })
        .await;
    old.unwrap();
    let new: Result<Shape, Error> = idem
        .call(&scope, "k")
        .run(|| async { panic!("must not re-run") })
        .await;
    let Err(Error::Codec(err)) = new else {
        panic!("expected a codec error, got {new:?}")
    };
    let text = err.to_string();
    assert!(text.contains("Receipt") && text.contains("Shape"), "{text}");
}

/// A result too large to store, after the body ran: the caller gets its
/// value, and the key is settled so that no retry runs the body again;
/// duplicates are told the result was not stored.
pub async fn oversized_value_settles_the_key(idem: Idempotency) {
    let small = Idempotency::builder(SharedStore::new(idem.store().clone()))
        .max_record_bytes(1024)
        .build();
    let scope = scope("oversized");
    let runs = AtomicUsize::new(0);
    let big = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok::<String, Error>("x".repeat(4096))
    };
    let first = small.call(&scope, "k").run(big).await;
    assert_eq!(first.unwrap().len(), 4096);
    for _ in 0..2 {
        let retry = small.call(&scope, "k").run(big).await;
        assert!(
            matches!(retry, Err(Error::Codec(CodecError::NotStored(ref reason))) if reason.contains("1024")),
            "{retry:?}"
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the body ran once");
}
