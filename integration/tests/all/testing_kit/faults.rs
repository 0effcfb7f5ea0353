//! Each injected store fault (`idem::testing::FaultyStore`) is the
//! documented error and fails closed; a failed completion is sent again
//! while the lease lasts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use idem::testing::{FaultyStore, Op};
use idem::{Idempotency, MemoryStore};

/// A handle over a `FaultyStore`, and a counter of body runs.
fn faulty() -> (FaultyStore, Idempotency, Arc<AtomicU32>) {
    let store = FaultyStore::new(MemoryStore::new());
    let idem = Idempotency::new(store.clone());
    (store, idem, Arc::new(AtomicU32::new(0)))
}

async fn charge(idem: &Idempotency, runs: &Arc<AtomicU32>) -> Result<u32, idem::Error> {
    let runs = Arc::clone(runs);
    idem.call("payments", "order-1")
        .lease(Duration::from_secs(1))
        .run(|| async move { Ok(runs.fetch_add(1, Ordering::SeqCst) + 1) })
        .await
}

fn is_injected(result: &Result<u32, idem::Error>) -> bool {
    matches!(result, Err(idem::Error::Store(err)) if err.backend() == "faulty")
}

#[tokio::test]
async fn a_failed_claim_is_a_store_error_and_the_body_does_not_run() {
    let (store, idem, runs) = faulty();
    store.fail_next(Op::Claim, 2);
    assert!(is_injected(&charge(&idem, &runs).await));
    assert!(is_injected(&charge(&idem, &runs).await));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_claim_whose_answer_is_lost_does_not_run_the_body_and_lapses() {
    let (store, idem, runs) = faulty();
    store.lose_answer_next(Op::Claim, 1);
    assert!(is_injected(&charge(&idem, &runs).await));
    // The claim was applied: a retry meanwhile finds it held and does not
    // run the body.
    assert!(matches!(
        charge(&idem, &runs).await,
        Err(idem::Error::InProgress { .. })
    ));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    // The runtime ends a claim whose answer was lost (after 250 ms, well
    // inside the 1 s lease) by letting it lapse: the retry takes it over
    // and runs once.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1);
}

/// A takeover whose answer is lost must not free the key: the runtime's
/// cleanup of a claim that may have been applied would otherwise delete
/// the takeover, the vanished holder's evidence with it, and the next call
/// would run as fresh, without asking its reconcile (a second effect).
#[tokio::test(start_paused = true)]
async fn a_takeover_whose_answer_is_lost_keeps_the_evidence() {
    use idem::key::RecordKey;
    use idem::store::{Claim, Token};
    let (store, idem, runs) = faulty();
    let key = RecordKey::new("payments", "order-1");
    let holder = Claim::new(
        Token::random(),
        idem::fingerprint::Fingerprint::NONE,
        Duration::from_secs(1),
        "t",
    );
    idem::Store::claim(&store, &key, &holder).await.unwrap();
    tokio::time::advance(Duration::from_secs(2)).await;
    let reconciles = Arc::new(AtomicU32::new(0));
    let retry = || {
        let (runs, reconciles) = (Arc::clone(&runs), Arc::clone(&reconciles));
        idem.call("payments", "order-1")
            .lease(Duration::from_secs(1))
            .reconcile(move || async move {
                reconciles.fetch_add(1, Ordering::SeqCst);
                Ok(Some(7))
            })
            .run(|| async move { Ok(runs.fetch_add(1, Ordering::SeqCst) + 100) })
    };
    store.lose_answer_next(Op::Claim, 1);
    assert!(is_injected(&retry().await));
    // Past the runtime's cleanup of a claim whose answer was lost.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(retry().await.unwrap(), 7, "the next call ran as fresh");
    assert_eq!(reconciles.load(Ordering::SeqCst), 1);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_failed_completion_is_sent_again_and_the_call_returns_its_result() {
    let (store, idem, runs) = faulty();
    store.fail_next(Op::Complete, 2);
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1);
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1, "replayed");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_completion_failing_for_its_whole_lease_keeps_the_claim_so_no_retry_runs_until_it_ends() {
    let (store, idem, runs) = faulty();
    store.fail_next(Op::Complete, u32::MAX);
    let started = tokio::time::Instant::now();
    assert!(is_injected(&charge(&idem, &runs).await));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "sent again within the 1 s lease only: {:?}",
        started.elapsed()
    );
    store.fail_next(Op::Complete, 0);
    assert!(matches!(
        charge(&idem, &runs).await,
        Err(idem::Error::InProgress { .. })
    ));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(charge(&idem, &runs).await.unwrap(), 2);
}

#[tokio::test]
async fn a_completion_whose_answer_is_lost_is_sent_again_and_knows_its_own_record() {
    let (store, idem, runs) = faulty();
    store.lose_answer_next(Op::Complete, 1);
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1);
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1, "replayed");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_failed_step_save_ends_the_call_with_a_store_error_and_releases_it() {
    let (store, idem, runs) = faulty();
    let stepped = |idem: Idempotency, runs: Arc<AtomicU32>| async move {
        idem.call("payments", "order-1")
            .run(|| async move {
                idem::step("debit", || async {
                    Ok::<_, idem::Error>(runs.fetch_add(1, Ordering::SeqCst) + 1)
                })
                .await
            })
            .await
    };
    store.fail_next(Op::SaveStep, 1);
    let first: Result<u32, idem::Error> = stepped(idem.clone(), Arc::clone(&runs)).await;
    assert!(is_injected(&first), "{first:?}");
    // Released: the retry runs the step again (its value was not saved).
    assert_eq!(stepped(idem, Arc::clone(&runs)).await.unwrap(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_failed_release_keeps_the_claim_so_no_retry_runs_until_the_lease_ends() {
    let (store, idem, runs) = faulty();
    let failing = |idem: Idempotency, runs: Arc<AtomicU32>| async move {
        idem.call("payments", "order-1")
            .lease(Duration::from_secs(1))
            .run(|| async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Err::<u32, _>(idem::Error::InvalidKey("declined".into()))
            })
            .await
    };
    store.fail_next(Op::Release, 1);
    let first = failing(idem.clone(), Arc::clone(&runs)).await;
    assert!(
        matches!(first, Err(idem::Error::InvalidKey(_))),
        "{first:?}"
    );
    assert!(matches!(
        charge(&idem, &runs).await,
        Err(idem::Error::InProgress { .. })
    ));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(charge(&idem, &runs).await.unwrap(), 2);
}

#[tokio::test(start_paused = true)]
async fn failed_renewals_let_the_lease_end_and_the_result_is_not_stored() {
    let (store, idem, runs) = faulty();
    store.fail_next(Op::Renew, u32::MAX);
    let slow = idem
        .call("payments", "order-1")
        .lease(Duration::from_secs(1))
        .run(|| async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            Ok::<_, idem::Error>(1u32)
        })
        .await;
    assert!(
        matches!(
            slow,
            Err(idem::Error::LeaseLost {
                taken_over: false,
                ..
            })
        ),
        "{slow:?}"
    );
    store.fail_next(Op::Renew, 0);
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_delayed_claim_answers_after_its_delay() {
    let (store, idem, runs) = faulty();
    store.delay(Op::Claim, Duration::from_secs(5));
    let started = tokio::time::Instant::now();
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1);
    // The paused clock moved by exactly the delay: no real time passed.
    assert_eq!(started.elapsed(), Duration::from_secs(5));
}
