//! Steps compose: a function whose own idempotent call uses steps may run
//! inside a step of another call.

use std::sync::atomic::{AtomicBool, Ordering};

use idem::{Error, Idempotency};

use crate::support::{Counter, scope};

/// An inner call (its own key, its own steps) inside an outer call's step
/// runs its steps, and resumes them when the outer call is retried; a
/// step of the outer call is still refused inside the outer's step.
pub async fn a_call_with_steps_runs_inside_another_calls_step(idem: Idempotency) {
    let scope = scope("steps-compose");
    let charges = Counter::default();
    let gateway_up = AtomicBool::new(false);
    // A library function that uses steps under its own call.
    let pay = || {
        idem.call(&scope, "pay/order-1").run(|| async {
            let receipt = idem::step("charge", || async { Ok::<_, Error>(charges.bump()) }).await?;
            if !gateway_up.load(Ordering::SeqCst) {
                return Err(Error::InvalidKey("gateway down".into()));
            }
            Ok(receipt)
        })
    };
    let order = || {
        idem.call(&scope, "order-1").run(|| async {
            idem::step("pay", || async {
                let receipt = pay().await?;
                // Back in the outer call's step: a step of that call still does not nest.
                let nested: Result<u8, Error> = idem::step("inner", || async { Ok(1) }).await;
                assert!(
                    matches!(nested, Err(Error::InvalidStep { reason, .. }) if reason.contains("nest")),
                    "{nested:?}"
                );
                Ok::<_, Error>(receipt)
            })
            .await
        })
    };
    let first = order().await;
    assert!(
        matches!(first, Err(Error::InvalidKey(ref why)) if why == "gateway down"),
        "{first:?}"
    );
    assert_eq!(charges.get(), 1, "the inner call's step ran");
    gateway_up.store(true, Ordering::SeqCst);
    assert_eq!(order().await.unwrap(), 1, "the inner step's value replayed");
    assert_eq!(order().await.unwrap(), 1, "the outer call replays whole");
    assert_eq!(charges.get(), 1, "the charge ran once");
}
