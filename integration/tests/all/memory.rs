//! The conformance suite on `MemoryStore`, and what is particular to it.

use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Retention};
use idem::{Idempotency, MemoryStore, Store};

idem_conformance::suite!(async { Idempotency::new(MemoryStore::new()) });

fn claim(lease: Duration) -> Claim {
    idem_conformance::new_claim(Fingerprint::NONE, lease)
}

/// Claims and completes `keys` one after another; the claims refused
/// (full) are counted, not completed.
async fn fill(store: &MemoryStore, keys: &[RecordKey], ttl: Duration) -> usize {
    let mut refused = 0;
    for key in keys {
        let c = claim(Duration::from_secs(30));
        match store.claim(key, &c).await {
            Ok(ClaimOutcome::Won { .. }) => {
                let kept = Retention::new(ttl);
                assert!(
                    store
                        .complete(key, c.token, b"r", kept)
                        .await
                        .unwrap()
                        .is_held()
                );
            }
            Err(_) => refused += 1,
            other => panic!("{other:?}"),
        }
    }
    refused
}

fn keys_in(scope: &str, n: u32) -> Vec<RecordKey> {
    (0..n).map(|i| RecordKey::new(scope, &i)).collect()
}

#[tokio::test(start_paused = true)]
async fn a_store_full_of_live_records_fails_closed_and_keeps_them() {
    // 64 shards of one record each.
    let store = MemoryStore::with_max_records(64);
    let keys = keys_in("bounded", 2000);
    let refused = fill(&store, &keys, Duration::from_secs(60)).await;
    assert_eq!((store.len(), refused, store.evicted()), (64, 2000 - 64, 0));
    // Every record that was completed still replays: none was evicted.
    let mut replayed = 0;
    for key in &keys {
        let answer = store.claim(key, &claim(Duration::from_secs(1))).await;
        replayed += usize::from(matches!(answer, Ok(ClaimOutcome::Completed { .. })));
    }
    assert_eq!(replayed, 64);
    // Once the records expire, the sweep makes room again: one a shard.
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(
        fill(&store, &keys, Duration::from_secs(60)).await,
        2000 - 64
    );
}

#[tokio::test(start_paused = true)]
async fn an_evicting_store_evicts_the_oldest_live_records_and_counts_them() {
    let store = MemoryStore::with_max_records(64).evict_live();
    let keys = keys_in("evicting", 2000);
    for (i, key) in keys.iter().enumerate() {
        let ttl = Duration::from_secs(60 + i as u64);
        assert_eq!(fill(&store, std::slice::from_ref(key), ttl).await, 0);
    }
    assert!(store.len() <= 64, "store grew to {}", store.len());
    assert_eq!(store.evicted(), 2000 - store.len() as u64);
    // The newest record of each shard survived.
    let last = keys.last().unwrap();
    assert!(matches!(
        store.claim(last, &claim(Duration::from_secs(1))).await,
        Ok(ClaimOutcome::Completed { .. })
    ));
}

#[tokio::test]
async fn a_store_full_of_claims_refuses_new_ones() {
    let store = MemoryStore::with_max_records(64);
    let mut refused = 0;
    for i in 0..1000u32 {
        if store
            .claim(&RecordKey::new("full", &i), &claim(Duration::from_secs(30)))
            .await
            .is_err()
        {
            refused += 1;
        }
    }
    // Claims are never evicted: each shard holds one, the rest fail closed.
    assert_eq!(store.len(), 64);
    assert_eq!(refused, 1000 - 64);
}

#[tokio::test]
async fn saved_steps_are_bounded_like_records() {
    use idem::store::{Fence, StepId};
    // 64 shards of one record each; two keys that share a shard.
    let store = MemoryStore::with_max_records(64);
    let first = RecordKey::new("steps-bound", &0u32);
    let second = (1..10_000u32)
        .map(|i| RecordKey::new("steps-bound", &i))
        .find(|key| key.as_bytes()[0] % 64 == first.as_bytes()[0] % 64)
        .unwrap();
    let ttl = Duration::from_secs(60);
    let step = StepId::new(&"s");
    for key in [&first, &second] {
        let c = claim(Duration::from_secs(30));
        assert!(matches!(
            store.claim(key, &c).await,
            Ok(ClaimOutcome::Won { .. })
        ));
        let saved = store
            .save_step(key, c.token, step, b"v", ttl)
            .await
            .unwrap();
        assert_eq!(saved, Fence::Held);
        assert_eq!(store.release(key, c.token).await.unwrap(), Fence::Held);
    }
    // The shard keeps one call's steps: the later one's.
    let steps_of = async |key: &RecordKey| {
        let c = claim(Duration::from_secs(1));
        let Ok(ClaimOutcome::Won { steps, .. }) = store.claim(key, &c).await else {
            panic!("not won")
        };
        store.release(key, c.token).await.unwrap();
        steps.len()
    };
    assert_eq!(steps_of(&second).await, 1);
    assert_eq!(steps_of(&first).await, 0);
}
