//! Copy this file to prove your own idempotent functions: a payment with
//! two effects, crash-tested at every await point, its derived key and
//! fingerprint pinned, its store failures checked, and the inventory of
//! idempotent functions asserted. Needs `idemkit = { …, features =
//! ["testing"] }` in `[dev-dependencies]`.

use std::sync::{Arc, Mutex};

use idem::testing::{CrashPoints, FaultyStore, Op, probe, sites};
use idem::{Idempotency, MemoryStore, idempotent};

/// Your side effects: in a real service, the card processor and the
/// ledger, each a network round trip.
#[derive(Clone, Default)]
struct Effects(Arc<Mutex<Vec<String>>>);

impl Effects {
    async fn apply(&self, effect: String) -> Result<(), idem::Error> {
        tokio::task::yield_now().await; // the round trip
        self.0.lock().unwrap().push(effect);
        Ok(())
    }

    fn count(&self, prefix: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.starts_with(prefix))
            .count()
    }
}

/// The function under test. `store = idem` lets the tests hand it a
/// handle; `skip` leaves the handle and the clients out of the derived key.
#[idempotent(store = idem, skip(idem, effects), ttl = "24h")]
async fn pay(
    idem: &Idempotency,
    effects: &Effects,
    order_id: &str,
    cents: u64,
) -> Result<u64, idem::Error> {
    // Each effect in a step: a call recovered after a crash resumes after
    // the last one that finished instead of charging again.
    idem::step("charge", || {
        effects.apply(format!("charge {order_id} {cents}"))
    })
    .await?;
    idem::step("ledger", || {
        effects.apply(format!("ledger {order_id} {cents}"))
    })
    .await?;
    Ok(cents)
}

#[tokio::test]
async fn a_crash_at_any_await_point_charges_once() {
    let effects = Effects::default();
    let (call, reset, check) = (effects.clone(), effects.clone(), effects.clone());
    let report = CrashPoints::new(move |idem| {
        let effects = call.clone();
        async move { pay(&idem, &effects, "order-1", 1200).await }
    })
    .reset(move || reset.0.lock().unwrap().clear())
    .invariant(move || check.count("charge") == 1 && check.count("ledger") == 1)
    .run()
    .await;
    assert!(report.passed(), "{report}");
}

/// Fails when a refactor changes the derived key or fingerprint (a
/// renamed module, a parameter's new type): every live record would miss.
/// Pin your own values: run once, paste what the assertion prints.
#[tokio::test]
async fn the_derived_key_and_fingerprint_are_pinned() {
    let pinned =
        probe(|idem| async move { pay(&idem, &Effects::default(), "order-1", 1200).await }).await;
    assert_eq!(pinned.scope, "all::testing_kit_example::pay");
    assert_eq!(pinned.key, PINNED_KEY, "{pinned:?}");
    assert_eq!(pinned.fingerprint, PINNED_FINGERPRINT, "{pinned:?}");
}

const PINNED_KEY: &str = "5f890d2eda9b58db1c21c4b92ab6faea6b7bc3f4ed3e3389871a1c5b2af84e7d";
const PINNED_FINGERPRINT: &str = "8eed3c0086dc400f22b61c0385247a3036e6d6a46103be66080142b80a795864";

#[tokio::test]
async fn a_store_failure_before_the_claim_charges_nothing() {
    let store = FaultyStore::new(MemoryStore::new());
    let idem = Idempotency::new(store.clone());
    let effects = Effects::default();
    store.fail_next(Op::Claim, 1);
    assert!(matches!(
        pay(&idem, &effects, "order-1", 1200).await,
        Err(idem::Error::Store(_))
    ));
    assert_eq!(effects.count(""), 0);
    // The retry charges once; a duplicate replays.
    assert_eq!(pay(&idem, &effects, "order-1", 1200).await.unwrap(), 1200);
    assert_eq!(pay(&idem, &effects, "order-1", 1200).await.unwrap(), 1200);
    assert_eq!(effects.count("charge"), 1);
}

/// The inventory of mutating entry points: a new idempotent function
/// fails this test until it is reviewed and listed. `sites()` lists the
/// whole test binary's; this file lists its own.
#[test]
fn every_idempotent_function_is_reviewed() {
    let here = concat!(module_path!(), "::");
    let table: Vec<String> = sites()
        .iter()
        .filter_map(|site| {
            let name = site.path().strip_prefix(here)?;
            Some(format!("{name} key={:?} ttl={:?}", site.key(), site.ttl()))
        })
        .collect();
    assert_eq!(table, ["pay key=None ttl=Some(86400s)"]);
}
