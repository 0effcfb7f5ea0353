//! A step whose value cannot be saved: settled with a marker in the
//! store, as a whole call is, so its effect never runs twice.

use idem::{CodecError, Error, Idempotency};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::serde_forms::Unencodable;
use crate::support::{Counter, SharedStore, scope};

/// A step's value over `max_record_bytes`, or whose `Serialize` fails,
/// settles the step: the attempt that ran it and every retry fail at it
/// with `StepNotStored`, and its body ran once. A type whose smallest
/// record exceeds the limit is refused before the body runs.
pub async fn unsaveable_step_values_settle_the_step(idem: Idempotency) {
    let small = Idempotency::builder(SharedStore::new(idem.store().clone()))
        .max_record_bytes(1024)
        .build();
    settled_after_one_run(&small, "too-large", || "x".repeat(4096), "1024").await;
    settled_after_one_run(&small, "unencodable", || Unencodable(7), "refuses").await;

    let tiny = Idempotency::builder(SharedStore::new(idem.store().clone()))
        .max_record_bytes(8)
        .build();
    let runs = Counter::default();
    let never: Result<u8, Error> = tiny
        .call(&scope("steps-no-room"), "k")
        .run(|| async { idem::step("tiny", || async { Ok::<_, Error>(runs.bump() as u8) }).await })
        .await;
    assert!(
        matches!(never, Err(Error::InvalidStep { reason, .. }) if reason.contains("max_record_bytes")),
        "{never:?}"
    );
    assert_eq!(
        runs.get(),
        0,
        "the step ran although its value could never be saved"
    );
}

/// Three attempts of a call whose middle step's value cannot be saved:
/// each fails at that step, which ran once; the next step never runs.
async fn settled_after_one_run<T, F>(idem: &Idempotency, case: &str, value: F, why: &str)
where
    T: Serialize + DeserializeOwned,
    F: Fn() -> T,
{
    let scope = scope(case);
    let runs: [Counter; 3] = Default::default();
    for attempt in 1..=3 {
        let out: Result<(), Error> = idem
            .call(&scope, "k")
            .run(|| async {
                idem::step("reserve", || async { Ok::<_, Error>(runs[0].bump()) }).await?;
                let _: T = idem::step("charge", || async {
                    runs[1].bump();
                    Ok::<_, Error>(value())
                })
                .await?;
                idem::step("ship", || async { Ok::<_, Error>(runs[2].bump()) }).await?;
                Ok(())
            })
            .await;
        assert!(
            matches!(out, Err(Error::Codec(CodecError::StepNotStored { ref step, ref reason }))
                if step == "charge" && reason.contains(why)),
            "{case}, attempt {attempt}: {out:?}"
        );
    }
    let runs = [runs[0].get(), runs[1].get(), runs[2].get()];
    assert_eq!(
        runs,
        [1, 1, 0],
        "{case}: the steps' runs over three attempts"
    );
}
