//! State updates (`mismatch = "rerun"`): a key that names a resource
//! replays the payload it last completed, runs another and replaces its
//! record, and never runs two calls at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{ClaimOutcome, Fence, Retention, StepId};
use idem::{Error, Idempotency, Mismatch};

use crate::{Counter, new_claim, scope};

/// Sets the status of order 7 to `status`, as a state update.
async fn set_status(
    idem: &Idempotency,
    scope: &str,
    status: &str,
    runs: &Counter,
) -> Result<String, Error> {
    idem.call(scope, "order-7/status")
        .mismatch(Mismatch::Rerun)
        .fingerprint(&status)
        .run(|| async {
            runs.bump();
            Ok(format!("now {status}"))
        })
        .await
}

/// The same update twice runs once; another runs and replaces the record;
/// the first again is a change from the current state, and runs; a held
/// claim of another payload is in progress, not a mismatch.
pub async fn a_rerun_replays_the_same_update_and_runs_another(idem: Idempotency) {
    let scope = scope("rerun");
    let runs = Counter::default();
    let expect = |out: Result<String, Error>, status: &str, ran: usize| {
        assert_eq!(out.unwrap(), format!("now {status}"));
        assert_eq!(runs.get(), ran, "after `{status}`: runs");
    };
    expect(set_status(&idem, &scope, "paid", &runs).await, "paid", 1);
    expect(set_status(&idem, &scope, "paid", &runs).await, "paid", 1);
    expect(
        set_status(&idem, &scope, "shipped", &runs).await,
        "shipped",
        2,
    );
    expect(
        set_status(&idem, &scope, "shipped", &runs).await,
        "shipped",
        2,
    );
    expect(set_status(&idem, &scope, "paid", &runs).await, "paid", 3);
    expect(set_status(&idem, &scope, "paid", &runs).await, "paid", 3);

    // A call that refuses still refuses the record another payload left.
    let refused: Result<String, Error> = idem
        .call(&scope, "order-7/status")
        .fingerprint(&"shipped")
        .run(|| async { Ok(String::new()) })
        .await;
    assert!(matches!(refused, Err(Error::FingerprintMismatch { .. })));

    // A held claim of another payload: the update waits its turn.
    let key = RecordKey::new(&scope, &"order-7/status");
    let holder = new_claim(
        Fingerprint::of(&"refunded").unwrap(),
        Duration::from_secs(5),
    );
    let won = idem
        .store()
        .claim(&key, &holder.with_rerun())
        .await
        .unwrap();
    assert!(matches!(won, ClaimOutcome::Won { .. }), "{won:?}");
    let busy = set_status(&idem, &scope, "cancelled", &runs).await;
    assert!(matches!(busy, Err(Error::InProgress { .. })), "{busy:?}");
    assert_eq!(runs.get(), 3);
}

/// At the store: a claim that reruns wins over a completed record of
/// another fingerprint in its one round trip, without the replaced call's
/// steps; over one of its own fingerprint it is answered the record.
pub async fn a_rerun_claim_replaces_the_record_at_the_store(idem: Idempotency) {
    let store = idem.store().as_ref();
    let key = RecordKey::new(&scope("rerun-store"), &"k");
    let (paid, shipped) = (
        Fingerprint::of(&"paid").unwrap(),
        Fingerprint::of(&"shipped").unwrap(),
    );
    let lease = Duration::from_secs(5);
    let kept = Retention::new(Duration::from_secs(60));
    let first = new_claim(paid, lease).with_rerun();
    assert!(matches!(
        store.claim(&key, &first).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    if store.records_steps() {
        let saved = store.save_step(&key, first.token, StepId::new(&"audit"), b"row 1", kept.ttl);
        assert_eq!(saved.await.unwrap(), Fence::Held);
    }
    assert_eq!(
        store
            .complete(&key, first.token, b"paid", kept)
            .await
            .unwrap(),
        Fence::Held
    );

    let same = store
        .claim(&key, &new_claim(paid, lease).with_rerun())
        .await
        .unwrap();
    assert!(
        matches!(same, ClaimOutcome::Completed { ref record, .. } if &record[..] == b"paid"),
        "{same:?}"
    );
    let refused = store.claim(&key, &new_claim(shipped, lease)).await.unwrap();
    assert!(
        matches!(refused, ClaimOutcome::Completed { .. }),
        "{refused:?}"
    );

    let second = new_claim(shipped, lease).with_rerun();
    match store.claim(&key, &second).await.unwrap() {
        ClaimOutcome::Won { steps, .. } => {
            assert!(
                steps.is_empty(),
                "the replaced call's steps leaked: {steps:?}"
            );
        }
        other => panic!("a rerun claim of another payload was answered {other:?}"),
    }
    // The replaced record's holder is long gone; the new claim holds.
    let late = store
        .complete(&key, first.token, b"stale", kept)
        .await
        .unwrap();
    assert_ne!(late, Fence::Held);
    let busy = store
        .claim(&key, &new_claim(paid, lease).with_rerun())
        .await
        .unwrap();
    assert!(matches!(busy, ClaimOutcome::InProgress { .. }), "{busy:?}");
    assert_eq!(
        store
            .complete(&key, second.token, b"shipped", kept)
            .await
            .unwrap(),
        Fence::Held
    );
    let now = store
        .claim(&key, &new_claim(shipped, lease).with_rerun())
        .await
        .unwrap();
    assert!(
        matches!(now, ClaimOutcome::Completed { ref record, .. } if &record[..] == b"shipped"),
        "{now:?}"
    );
}

/// 20 concurrent updates of one resource with 3 distinct payloads: the
/// bodies never overlap, and the record holds the last one to complete.
pub async fn concurrent_updates_run_one_at_a_time(idem: Idempotency) {
    let scope = scope("rerun-burst");
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let last = Arc::new(Mutex::new(None::<usize>));
    let runs = Counter::default();
    let calls = (0..20).map(|i| {
        let (idem, scope, runs) = (idem.clone(), scope.clone(), runs.clone());
        let (in_flight, most, last) = (in_flight.clone(), most.clone(), last.clone());
        tokio::spawn(async move {
            let status = i % 3;
            idem.call(&scope, "order-7/status")
                .mismatch(Mismatch::Rerun)
                .fingerprint(&status)
                .wait(Duration::from_secs(30))
                .run(|| async {
                    runs.bump();
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    *last.lock().unwrap() = Some(status);
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    Ok::<_, Error>(status)
                })
                .await
        })
    });
    for (i, call) in calls.collect::<Vec<_>>().into_iter().enumerate() {
        assert_eq!(call.await.unwrap().unwrap(), i % 3, "call {i}");
    }
    assert_eq!(most.load(Ordering::SeqCst), 1, "two updates ran at once");
    let ran = runs.get();
    assert!((1..=20).contains(&ran), "{ran} runs");
    let last = last.lock().unwrap().expect("one update ran");
    let again: Result<usize, Error> = idem
        .call(&scope, "order-7/status")
        .mismatch(Mismatch::Rerun)
        .fingerprint(&last)
        .run(|| async { Ok(usize::MAX) })
        .await;
    assert_eq!(again.unwrap(), last, "the record is not the last update's");
    assert_eq!(runs.get(), ran);
}
