//! MemoryStore beside the bare fn and a hand-written `Mutex<HashMap>`
//! dedupe; the attribute beside the builder.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use idem::{Error, Idempotency, MemoryStore, idempotent};

use crate::harness::{Report, measure, runner};

const CALLS: u64 = 200_000;
const CONCURRENCY: usize = 8;

static IDEM: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(MemoryStore::new()));
/// The attribute and the builder share a store of their own, large enough
/// for all their fresh keys on both runtimes, so neither meets evictions (which come in
/// bursts and only add noise to a comparison within a few percent).
static PAIR: LazyLock<Idempotency> = LazyLock::new(|| {
    Idempotency::new(MemoryStore::with_max_records(
        PAIR_CALLS as usize * PAIR_ROUNDS * 2 * 2 + 100_000,
    ))
});
/// Calls per round of each of the attribute and the builder, and rounds:
/// many short rounds, since the two differ by less than the noise of one.
const PAIR_CALLS: u64 = 40_000;
const PAIR_ROUNDS: usize = 25;

async fn bare(i: u64) -> Result<u64, Error> {
    Ok(std::hint::black_box(i))
}

#[idempotent(store = PAIR, key = i, scope = "bench", fingerprint = false)]
async fn with_macro(i: u64) -> Result<u64, Error> {
    Ok(std::hint::black_box(i))
}

/// What the attribute above expands to, written with the builder.
async fn with_builder(idem: &Idempotency, i: u64) -> Result<u64, Error> {
    idem.call("bench", &i)
        .run(|| async move { Ok(std::hint::black_box(i)) })
        .await
}

/// The dedupe users write by hand: a map of finished results, no claims,
/// no expiry, no fencing.
#[derive(Clone, Default)]
struct HandDedupe(Arc<Mutex<HashMap<u64, u64>>>);

impl HandDedupe {
    async fn call(&self, key: u64) -> u64 {
        if let Some(v) = self.0.lock().unwrap().get(&key) {
            return *v;
        }
        let v = bare(key).await.unwrap();
        self.0.lock().unwrap().insert(key, v);
        v
    }
}

pub(crate) async fn run(report: &mut Report) {
    let hand = HandDedupe::default();
    report
        .scenario(
            "memory fresh key, no-op body",
            vec![
                (
                    "idem MemoryStore",
                    runner(|| {
                        measure(CONCURRENCY, CALLS, |i| async move {
                            with_builder(&IDEM, i).await.unwrap();
                        })
                    }),
                ),
                (
                    "bare async fn",
                    runner(|| {
                        measure(CONCURRENCY, CALLS, |i| async move {
                            bare(i).await.unwrap();
                        })
                    }),
                ),
                (
                    "Mutex<HashMap> dedupe",
                    runner({
                        let hand = hand.clone();
                        move || {
                            let hand = hand.clone();
                            measure(CONCURRENCY, CALLS, move |i| {
                                let hand = hand.clone();
                                async move {
                                    hand.call(i).await;
                                }
                            })
                        }
                    }),
                ),
            ],
        )
        .await;

    // Replays: every call repeats one of 1,000 completed keys.
    for k in 0..1000u64 {
        with_builder(&IDEM, u64::MAX - k).await.unwrap();
        hand.call(u64::MAX - k).await;
    }
    report
        .scenario(
            "memory replay",
            vec![
                (
                    "idem MemoryStore",
                    runner(|| {
                        measure(CONCURRENCY, CALLS, |i| async move {
                            with_builder(&IDEM, u64::MAX - i % 1000).await.unwrap();
                        })
                    }),
                ),
                (
                    "bare async fn",
                    runner(|| {
                        measure(CONCURRENCY, CALLS, |i| async move {
                            bare(u64::MAX - i % 1000).await.unwrap();
                        })
                    }),
                ),
                (
                    "Mutex<HashMap> dedupe",
                    runner({
                        let hand = hand.clone();
                        move || {
                            let hand = hand.clone();
                            measure(CONCURRENCY, CALLS, move |i| {
                                let hand = hand.clone();
                                async move {
                                    hand.call(u64::MAX - i % 1000).await;
                                }
                            })
                        }
                    }),
                ),
            ],
        )
        .await;

    report
        .scenario_rounds(
            "#[idempotent] vs builder, fresh key",
            PAIR_ROUNDS,
            vec![
                (
                    "#[idempotent]",
                    runner(|| {
                        measure(CONCURRENCY, PAIR_CALLS, |i| async move {
                            with_macro(i).await.unwrap();
                        })
                    }),
                ),
                (
                    "builder",
                    runner(|| {
                        measure(CONCURRENCY, PAIR_CALLS, |i| async move {
                            with_builder(&PAIR, i).await.unwrap();
                        })
                    }),
                ),
            ],
        )
        .await;
}
