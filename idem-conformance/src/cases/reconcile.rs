//! Reconcile (SPEC §13): asked instead of the body only when a call takes
//! over the claim of a holder that vanished; the store says which claims
//! are such takeovers (`ClaimOutcome::Won::took_over`).

use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Fence, Retention};
use idem::{Error, Idempotency, Store};

use crate::support::{AppError, Counter, new_claim, scope};

const LEASE: Duration = Duration::from_millis(300);

/// A holder that claims `key` and vanishes: its claim's lease runs out
/// and nobody releases it.
async fn vanished_holder(store: &dyn Store, key: &RecordKey) -> Claim {
    let holder = new_claim(Fingerprint::NONE, LEASE);
    let won = store.claim(key, &holder).await.unwrap();
    assert!(matches!(won, ClaimOutcome::Won { .. }), "{won:?}");
    tokio::time::sleep(LEASE * 2).await;
    holder
}

/// A takeover after a lapsed lease asks the reconcile once; its `Some`
/// is stored and returned, the body never runs, duplicates replay it, and
/// the vanished holder's late completion is fenced out.
pub async fn a_takeover_reconciles_once_and_skips_the_body(idem: Idempotency) {
    let scope = scope("reconcile");
    let key = RecordKey::new(&scope, &"k");
    let holder = vanished_holder(idem.store().as_ref(), &key).await;
    let (reconciles, runs) = (Counter::default(), Counter::default());
    let call = || {
        idem.call(&scope, "k")
            .reconcile(|| async {
                reconciles.bump();
                Ok(Some("booked before the crash".to_owned()))
            })
            .run(|| async {
                runs.bump();
                Ok::<_, Error>("charged again".to_owned())
            })
    };
    assert_eq!(call().await.unwrap(), "booked before the crash");
    assert_eq!(call().await.unwrap(), "booked before the crash");
    assert_eq!((reconciles.get(), runs.get()), (1, 0));
    let late = idem
        .store()
        .complete(
            &key,
            holder.token,
            b"late",
            Retention::new(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!(late, Fence::Lost, "the vanished holder completed over us");
    let replay: Result<String, Error> = idem
        .call(&scope, "k")
        .run(|| async { panic!("must replay") })
        .await;
    assert_eq!(replay.unwrap(), "booked before the crash");
}

/// A reconcile answering `None` runs the body once; one answering `Err`
/// is the body's error would be, but the takeover stands: the claim is
/// not released (a fresh claim would run the body without asking) but
/// lapses, so the next call takes it over and asks the reconcile again.
pub async fn a_reconcile_that_finds_nothing_runs_the_body(idem: Idempotency) {
    let scope = scope("reconcile-none");
    let store = idem.store().as_ref();
    let (reconciles, runs) = (Counter::default(), Counter::default());
    vanished_holder(store, &RecordKey::new(&scope, &"none")).await;
    let out: Result<u32, AppError> = idem
        .call(&scope, "none")
        .reconcile(|| async {
            reconciles.bump();
            Ok(None)
        })
        .run(|| async { Ok(runs.bump() as u32) })
        .await;
    assert_eq!(out.unwrap(), 1);
    assert_eq!(reconciles.get(), 1);
    vanished_holder(store, &RecordKey::new(&scope, &"err")).await;
    let call = || {
        idem.call(&scope, "err")
            .reconcile(|| async {
                reconciles.bump();
                Err(AppError::Timeout)
            })
            .run(|| async { Ok::<_, AppError>(runs.bump() as u32) })
    };
    assert_eq!(call().await.unwrap_err(), AppError::Timeout);
    assert_eq!((reconciles.get(), runs.get()), (2, 1));
    assert_eq!(call().await.unwrap_err(), AppError::Timeout);
    assert_eq!(
        (reconciles.get(), runs.get()),
        (3, 1),
        "after a failed reconcile, the next call must ask again, not run the body"
    );
}

/// A call that is not a takeover never reconciles: a fresh key, a replay,
/// a key whose claim was released, a key whose record expired.
pub async fn a_normal_call_never_reconciles(idem: Idempotency) {
    let scope = scope("no-reconcile");
    let (reconciles, runs) = (Counter::default(), Counter::default());
    let call = |key: &'static str, ttl: Duration, fail: bool| {
        let runs = &runs;
        idem.call(&scope, key)
            .ttl(ttl)
            .lease(LEASE.min(ttl))
            .reconcile(|| async {
                reconciles.bump();
                Ok(Some(0))
            })
            .run(move || async move {
                let run = runs.bump();
                if fail {
                    Err(AppError::Timeout)
                } else {
                    Ok(run)
                }
            })
    };
    let long = Duration::from_secs(60);
    assert_eq!(call("fresh", long, false).await.unwrap(), 1);
    assert_eq!(call("fresh", long, false).await.unwrap(), 1);
    assert!(call("released", long, true).await.is_err());
    assert_eq!(call("released", long, false).await.unwrap(), 3);
    assert_eq!(call("expired", LEASE, false).await.unwrap(), 4);
    tokio::time::sleep(LEASE * 2).await;
    assert_eq!(call("expired", LEASE, false).await.unwrap(), 5);
    assert_eq!(reconciles.get(), 0);
}

/// At the trait: a won claim is `took_over` exactly when it replaced
/// another caller's lapsed in-progress claim, not a lapsed completed
/// record, a released claim or a free key.
pub async fn takeover_is_reported_only_for_a_lapsed_claim(idem: Idempotency) {
    let store = idem.store().as_ref();
    let scope = scope("took-over");
    let took_over = |outcome: ClaimOutcome| match outcome {
        ClaimOutcome::Won { took_over, .. } => took_over,
        other => panic!("expected a won claim, got {other:?}"),
    };
    let lapsed = RecordKey::new(&scope, &"lapsed");
    vanished_holder(store, &lapsed).await;
    let claim = new_claim(Fingerprint::NONE, LEASE);
    assert!(took_over(store.claim(&lapsed, &claim).await.unwrap()));

    let expired = RecordKey::new(&scope, &"expired");
    let first = new_claim(Fingerprint::NONE, LEASE);
    assert!(!took_over(store.claim(&expired, &first).await.unwrap()));
    let done = store
        .complete(&expired, first.token, b"r", Retention::new(LEASE))
        .await;
    assert_eq!(done.unwrap(), Fence::Held);
    tokio::time::sleep(LEASE * 2).await;
    let claim = new_claim(Fingerprint::NONE, LEASE);
    assert!(!took_over(store.claim(&expired, &claim).await.unwrap()));

    let released = RecordKey::new(&scope, &"released");
    let first = new_claim(Fingerprint::NONE, LEASE);
    assert!(!took_over(store.claim(&released, &first).await.unwrap()));
    assert_eq!(
        store.release(&released, first.token).await.unwrap(),
        Fence::Held
    );
    let claim = new_claim(Fingerprint::NONE, LEASE);
    assert!(!took_over(store.claim(&released, &claim).await.unwrap()));
}
