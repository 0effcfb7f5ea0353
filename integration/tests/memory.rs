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

#[tokio::test]
async fn bounded_store_evicts_expired_then_oldest_completed() {
    // 64 shards of one record each.
    let store = MemoryStore::with_max_records(64);
    let mut keys = Vec::new();
    for i in 0..2000u32 {
        let key = RecordKey::new("bounded", &i);
        let c = claim(Duration::from_secs(30));
        match store.claim(&key, &c).await {
            Ok(ClaimOutcome::Won { .. }) => {
                store
                    .complete(
                        &key,
                        c.token,
                        b"r",
                        Retention::new(Duration::from_secs(60 + u64::from(i))),
                    )
                    .await
                    .unwrap();
                keys.push(key);
            }
            other => panic!("claim {i}: {other:?}"),
        }
    }
    assert!(store.len() <= 64, "store grew to {}", store.len());
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
