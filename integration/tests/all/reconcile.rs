//! `#[idempotent(reconcile = …)]` at run time: on a takeover of a vanished
//! holder's claim the reconcile is asked with the fn's parameters by
//! reference, inside the call's context (`child_key` is the holder's), and
//! its `Some` is stored without running the body; a normal call never
//! reconciles.

mod run_paths;

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::ClaimOutcome;
use idem::{Idempotency, MemoryStore, idempotent};

static IDEM: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(MemoryStore::new()));
static BODY: AtomicU32 = AtomicU32::new(0);
static ASKED: AtomicU32 = AtomicU32::new(0);
const LEASE: Duration = Duration::from_millis(200);

/// The provider's answer: it booked `order` under the call's child key.
async fn booked(order: &String, cents: &u32) -> Result<Option<String>, idem::Error> {
    ASKED.fetch_add(1, Ordering::SeqCst);
    // Inside the call's context: the child key the holder sent downstream.
    let reference = idem::child_key("charge").expect("reconcile runs inside the call");
    Ok((order != "never-booked").then(|| format!("{order} {cents} {}", reference.len())))
}

#[idempotent(store = IDEM, scope = "pay", key = order, fingerprint = false, lease = "200ms", reconcile = booked)]
async fn charge(order: String, cents: u32) -> Result<String, idem::Error> {
    BODY.fetch_add(1, Ordering::SeqCst);
    Ok(format!("ran {order} {cents}"))
}

/// A holder that claimed `order` and vanished.
async fn vanished(order: &str) {
    let claim = idem_conformance::new_claim(Fingerprint::NONE, LEASE);
    let key = RecordKey::new("pay", &order);
    let won = IDEM.store().claim(&key, &claim).await.unwrap();
    assert!(matches!(won, ClaimOutcome::Won { .. }));
    tokio::time::sleep(LEASE * 2).await;
}

#[tokio::test]
async fn the_attribute_reconciles_a_takeover_only() {
    assert_eq!(charge("fresh".into(), 5).await.unwrap(), "ran fresh 5");
    assert_eq!(
        (BODY.load(Ordering::SeqCst), ASKED.load(Ordering::SeqCst)),
        (1, 0)
    );

    vanished("lost").await;
    let answer = charge("lost".into(), 7).await.unwrap();
    assert_eq!(answer, "lost 7 64");
    assert_eq!(charge("lost".into(), 7).await.unwrap(), answer, "replayed");
    assert_eq!(
        (BODY.load(Ordering::SeqCst), ASKED.load(Ordering::SeqCst)),
        (1, 1)
    );

    vanished("never-booked").await;
    assert_eq!(
        charge("never-booked".into(), 9).await.unwrap(),
        "ran never-booked 9"
    );
    assert_eq!(
        (BODY.load(Ordering::SeqCst), ASKED.load(Ordering::SeqCst)),
        (2, 2)
    );
}
