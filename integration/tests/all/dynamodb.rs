//! The conformance suite on `DynamoDbStore` against two DynamoDB
//! implementations on loopback, dynoxide and moto (`support/dynamodb_server.rs`
//! finds or starts them), each case in a table of its own; and what is
//! particular to DynamoDB: requests per call, the item limit, a storm of
//! claims from two replicas and the takeover of a lapsed claim.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Fence, Retention, Token};
use idem::{DynamoDbStore, Error, Idempotency, Store, StoreErrorKind};

use crate::support::dynamodb_meter::Meter;
use crate::support::dynamodb_server::{self, Emulator};

/// A store in a new table of its own on `emulator`.
async fn store(emulator: Emulator) -> DynamoDbStore {
    store_with(emulator, None).await
}

async fn store_with(emulator: Emulator, meter: Option<Meter>) -> DynamoDbStore {
    let url = dynamodb_server::url(emulator).await;
    let mut client = dynamodb_server::client(&url);
    if let Some(meter) = meter {
        client = meter.on(&client);
    }
    let table = format!("idem-{:x}", Token::random().to_u128() as u64);
    let store = DynamoDbStore::new(client, table);
    store.create_table().await.expect("create the table");
    store
}

mod dynoxide {
    use super::{Emulator, Idempotency, store};

    idem_conformance::suite!(async { Idempotency::new(store(Emulator::Dynoxide).await) });
}

mod moto {
    use std::cell::RefCell;
    use std::sync::{Mutex, MutexGuard, PoisonError};

    use super::{Emulator, Idempotency, store};

    /// moto serves one request at a time, slowly: its cases run one at a
    /// time too, or their leases of a few hundred milliseconds would run
    /// out in its queue.
    static ONE_CASE: Mutex<()> = Mutex::new(());

    thread_local! {
        /// Held by the case's test thread until it ends.
        static TURN: RefCell<Option<MutexGuard<'static, ()>>> = const { RefCell::new(None) };
    }

    fn wait_for_turn() {
        // A thread that ran a case before (`--test-threads 1` runs every
        // case on one) holds its turn still: it ended with that case.
        drop(TURN.with(|held| held.borrow_mut().take()));
        let turn = ONE_CASE.lock().unwrap_or_else(PoisonError::into_inner);
        TURN.with(|held| *held.borrow_mut() = Some(turn));
    }

    idem_conformance::suite!(async {
        wait_for_turn();
        Idempotency::new(store(Emulator::Moto).await)
    });
}

/// A fresh call costs its claim and its completion; a replay, a call in
/// progress and a payload mismatch each cost the one claim, whose failed
/// condition returns the item.
async fn requests_per_call(emulator: Emulator) {
    let meter = Meter::default();
    let requests = || meter.take().len();
    let idem = Idempotency::new(store_with(emulator, Some(meter.clone())).await);
    requests();
    let call = |amount: u32| {
        idem.call("orders", "o-1")
            .fingerprint(&amount)
            .run(move || async move { Ok::<_, Error>(amount * 2) })
    };
    assert_eq!(call(21).await.unwrap(), 42);
    assert_eq!(requests(), 2, "a fresh call: claim and completion");
    assert_eq!(call(21).await.unwrap(), 42);
    assert_eq!(requests(), 1, "a replay: the claim alone");
    let other = call(22).await;
    assert!(
        matches!(other, Err(Error::FingerprintMismatch { .. })),
        "{other:?}"
    );
    assert_eq!(requests(), 1, "a mismatch: the claim alone");
    let held = Claim::new(
        Token::random(),
        Fingerprint::NONE,
        Duration::from_secs(30),
        "t",
    );
    let key = RecordKey::new("orders", "o-2");
    idem.store().claim(&key, &held).await.unwrap();
    requests();
    let busy = idem
        .call("orders", "o-2")
        .run(|| async { Ok::<_, Error>(1) })
        .await;
    assert!(matches!(busy, Err(Error::InProgress { .. })), "{busy:?}");
    assert_eq!(requests(), 1, "in progress: the claim alone");
}

#[tokio::test]
async fn requests_per_call_on_dynoxide() {
    requests_per_call(Emulator::Dynoxide).await;
}

#[tokio::test]
async fn requests_per_call_on_moto() {
    requests_per_call(Emulator::Moto).await;
}

/// A record over DynamoDB's item limit is refused at completion with an
/// `Unsupported` store error, and nothing is written: the claim stays,
/// in progress, until its lease lapses. With the handle's
/// `max_record_bytes` at the store's limit the runtime settles the key
/// instead.
async fn an_oversized_record_is_refused_whole(emulator: Emulator) {
    let store = store(emulator).await;
    let key = RecordKey::new("big", "k");
    let claim = Claim::new(
        Token::random(),
        Fingerprint::NONE,
        Duration::from_secs(30),
        "t",
    );
    store.claim(&key, &claim).await.unwrap();
    let big = vec![7u8; 500 * 1024];
    let refused = store
        .complete(
            &key,
            claim.token,
            &big,
            Retention::new(Duration::from_secs(60)),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), StoreErrorKind::Unsupported, "{refused}");
    assert!(refused.to_string().contains("400 KB"), "{refused}");
    let again = Claim::new(
        Token::random(),
        Fingerprint::NONE,
        Duration::from_secs(30),
        "t",
    );
    let still = store.claim(&key, &again).await.unwrap();
    assert!(
        matches!(still, ClaimOutcome::InProgress { .. }),
        "{still:?}"
    );
    // Just under the limit is stored and replayed whole.
    let most = vec![9u8; idem::dynamodb::MAX_RECORD_BYTES];
    let kept = Retention::new(Duration::from_secs(60));
    assert_eq!(
        store
            .complete(&key, claim.token, &most, kept)
            .await
            .unwrap(),
        Fence::Held
    );
    match store.claim(&key, &again).await.unwrap() {
        ClaimOutcome::Completed { record, .. } => assert_eq!(record.len(), most.len()),
        other => panic!("{other:?}"),
    }
    let idem = Idempotency::builder(store)
        .max_record_bytes(idem::dynamodb::MAX_RECORD_BYTES)
        .build();
    let runs = AtomicUsize::new(0);
    for _ in 0..2 {
        let out = idem
            .call("big", "settled")
            .run(|| async {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Error>("x".repeat(500 * 1024))
            })
            .await;
        assert!(matches!(out, Ok(_) | Err(Error::Codec(_))), "{out:?}");
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the oversized result settled its key"
    );
}

#[tokio::test]
async fn an_oversized_record_is_refused_whole_on_dynoxide() {
    an_oversized_record_is_refused_whole(Emulator::Dynoxide).await;
}

#[tokio::test]
async fn an_oversized_record_is_refused_whole_on_moto() {
    an_oversized_record_is_refused_whole(Emulator::Moto).await;
}

/// A storm of claims from two replicas (two clients) on the same new
/// keys, then on the same lapsed claims: each key has exactly one winner,
/// every other claimer hears `InProgress`, the second round's winners
/// report `took_over`, and the lapsed holders' completions are fenced off.
async fn a_storm_from_two_replicas(emulator: Emulator) {
    const KEYS: u32 = 20;
    const PER_KEY: usize = 8;
    let a = store(emulator).await;
    let url = dynamodb_server::url(emulator).await;
    let b = DynamoDbStore::new(dynamodb_server::client(&url), a.table());
    let lease = Duration::from_secs(2);
    let storm = |lease: Duration| {
        let (a, b) = (a.clone(), b.clone());
        async move {
            let claims = (0..KEYS).flat_map(|k| {
                let key = RecordKey::new("storm", &k);
                (0..PER_KEY).map(move |i| (key, i))
            });
            let outcomes = futures::future::join_all(claims.map(|(key, i)| {
                let store = if i % 2 == 0 { a.clone() } else { b.clone() };
                async move {
                    let claim = Claim::new(Token::random(), Fingerprint::NONE, lease, "storm");
                    (key, claim.token, store.claim(&key, &claim).await)
                }
            }))
            .await;
            let mut won = std::collections::HashMap::<RecordKey, Vec<(bool, Token)>>::new();
            for (key, token, outcome) in outcomes {
                match outcome.expect("a claim failed") {
                    ClaimOutcome::Won { took_over, .. } => {
                        won.entry(key).or_default().push((took_over, token))
                    }
                    ClaimOutcome::InProgress { .. } => {}
                    other => panic!("{other:?}"),
                }
            }
            won
        }
    };
    let first = storm(lease).await;
    assert_eq!(first.len(), KEYS as usize);
    assert!(first.values().all(|w| w.len() == 1 && !w[0].0), "{first:?}");
    tokio::time::sleep(lease + Duration::from_millis(300)).await;
    // Held long enough to outlast the checks below on a slow emulator.
    let again = storm(Duration::from_secs(60)).await;
    assert_eq!(again.len(), KEYS as usize);
    assert!(again.values().all(|w| w.len() == 1 && w[0].0), "{again:?}");
    let kept = Retention::new(Duration::from_secs(60));
    for (key, lapsed) in &first {
        let late = a.complete(key, lapsed[0].1, b"late", kept).await.unwrap();
        assert_eq!(
            late,
            Fence::Lost,
            "a lapsed holder completed over a takeover"
        );
        let winner = again[key][0].1;
        assert_eq!(
            b.complete(key, winner, b"won", kept).await.unwrap(),
            Fence::Held
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_from_two_replicas_has_one_winner_per_key_on_dynoxide() {
    a_storm_from_two_replicas(Emulator::Dynoxide).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_from_two_replicas_has_one_winner_per_key_on_moto() {
    a_storm_from_two_replicas(Emulator::Moto).await;
}

/// Admin, as the CLI uses it: list, inspect, stats and purge by scan; a
/// released claim (kept for its steps) is no record; an expired record is
/// purged, a tombstone loses its value, and a lapsed claim stays.
#[tokio::test]
async fn admin_lists_inspects_counts_and_purges() {
    use idem::admin::{Admin, ListFilter, RecordState};
    let store = store(Emulator::Dynoxide).await;
    let idem = Idempotency::new(store.clone());
    let done = idem
        .call("admin", "done")
        .run(|| async { Ok::<_, Error>("receipt".to_owned()) });
    done.await.unwrap();
    let lease = Duration::from_secs(60);
    let claim = || Claim::new(Token::random(), Fingerprint::NONE, lease, "dynamodb-test");
    let running = RecordKey::new("admin", &"running");
    store.claim(&running, &claim()).await.unwrap();
    let released = RecordKey::new("admin", &"released");
    let held = claim();
    store.claim(&released, &held).await.unwrap();
    let step = idem::store::StepId::new(&"s");
    store
        .save_step(&released, held.token, step, b"v", lease)
        .await
        .unwrap();
    assert_eq!(
        store.release(&released, held.token).await.unwrap(),
        Fence::Held
    );
    let short = Duration::from_millis(300);
    let kept = Retention::new(short);
    for (name, kept) in [("expired", kept), ("tombstone", kept.with_tombstone(lease))] {
        let key = RecordKey::new("admin", &name);
        let held = claim();
        store.claim(&key, &held).await.unwrap();
        assert_eq!(
            store
                .complete(&key, held.token, b"old", kept)
                .await
                .unwrap(),
            Fence::Held
        );
    }
    let lapsed = RecordKey::new("admin", &"lapsed");
    let held = Claim::new(Token::random(), Fingerprint::NONE, short, "dynamodb-test");
    store.claim(&lapsed, &held).await.unwrap();
    tokio::time::sleep(short * 2).await;
    let stats = store.stats().await.unwrap();
    let counts = (
        stats.in_progress,
        stats.completed,
        stats.expired,
        stats.tombstones,
        stats.lapsed,
    );
    assert_eq!(counts, (1, 1, 1, 1, 1), "{stats:?}");
    assert_eq!(store.list(&ListFilter::default()).await.unwrap().len(), 5);
    let stuck = store
        .list(&ListFilter::default().in_progress())
        .await
        .unwrap();
    assert_eq!(stuck.len(), 1);
    assert_eq!(
        (stuck[0].key, stuck[0].state),
        (running, RecordState::InProgress)
    );
    assert_eq!(stuck[0].site.as_deref(), Some("dynamodb-test"));
    assert!(
        store.inspect(&released).await.unwrap().is_none(),
        "a released claim is listed"
    );
    let done = store
        .inspect(&RecordKey::new("admin", "done"))
        .await
        .unwrap()
        .unwrap();
    let parts = idem::admin::decode_record_json(done.record.as_ref().unwrap()).unwrap();
    assert_eq!(parts.value, serde_json::json!("receipt"));
    let purged = store.purge().await.unwrap();
    assert_eq!(
        (purged.records, purged.tombstones, purged.steps),
        (1, 1, 0),
        "{purged:?}"
    );
    let stats = store.stats().await.unwrap();
    assert_eq!(
        (stats.expired, stats.tombstones, stats.lapsed),
        (0, 1, 1),
        "{stats:?}"
    );
    // The released call's step is still there for its next claim.
    match store.claim(&released, &claim()).await.unwrap() {
        ClaimOutcome::Won { steps, .. } => assert_eq!(steps.len(), 1),
        other => panic!("{other:?}"),
    }
}
