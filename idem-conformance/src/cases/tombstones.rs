//! Tombstones (SPEC §13): after a record's TTL, a call that asked for a
//! tombstone leaves a marker of its fingerprint for that long more, so a
//! late duplicate is `Error::Expired` without running, another payload is
//! still refused, and the key is free once the tombstone has passed.
//! (Without a tombstone the key is free after the TTL:
//! [`ttl_expiry_runs_again`](super::ttl_expiry_runs_again).)

use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{ClaimOutcome, Fence, Retention};
use idem::{Error, Idempotency};
use tokio::time::{Instant, sleep_until};

use crate::support::{Counter, new_claim, scope};

const TTL: Duration = Duration::from_millis(300);
/// Long beside the TTL, so a busy machine still asks well inside it.
const TOMBSTONE: Duration = Duration::from_secs(2);
/// How long after the TTL (or the tombstone) the case asks again.
const PAST: Duration = Duration::from_millis(500);

/// A late duplicate with the same payload is `Error::Expired` and does
/// not run; another payload is `FingerprintMismatch`; once the tombstone
/// has passed, the call runs again (and is replayed as usual).
pub async fn a_tombstone_answers_expired_then_frees_the_key(idem: Idempotency) {
    let scope = scope("tombstone");
    let runs = Counter::default();
    let call = |amount: u32| {
        let runs = &runs;
        idem.call(&scope, "order-1")
            .ttl(TTL)
            .tombstone(TOMBSTONE)
            .fingerprint(&amount)
            .run(move || async move { Ok::<_, Error>((amount, runs.bump())) })
    };
    assert_eq!(call(1200).await.unwrap(), (1200, 1));
    let completed = Instant::now();
    sleep_until(completed + TTL + PAST).await;
    match call(1200).await {
        Err(Error::Expired { expired_ago, .. }) => assert!(
            expired_ago > Duration::ZERO && expired_ago <= TOMBSTONE,
            "expired {expired_ago:?} ago, after a TTL of {TTL:?} and {PAST:?} more"
        ),
        other => panic!("a late duplicate within the tombstone must be Expired, got {other:?}"),
    }
    assert!(
        matches!(call(900).await, Err(Error::FingerprintMismatch { .. })),
        "another payload under a tombstoned key must be refused"
    );
    let asked = completed.elapsed();
    assert!(
        asked < TTL + TOMBSTONE,
        "the machine was too slow to ask within the tombstone ({asked:?} after completion)"
    );
    assert_eq!(runs.get(), 1, "the body ran again under a tombstone");
    sleep_until(completed + TTL + TOMBSTONE + PAST).await;
    assert_eq!(
        call(900).await.unwrap(),
        (900, 2),
        "the key is free after its tombstone"
    );
    assert_eq!(
        call(900).await.unwrap(),
        (900, 2),
        "the new record is replayed"
    );
}

/// At the store: a claim that finds a tombstone does not take the key
/// (asking again answers the same); the vanished holder whose lease
/// lapsed before another call completed is still fenced out when it
/// completes late, under the tombstone; `forget` removes the tombstone.
pub async fn a_tombstone_fences_the_late_holder(idem: Idempotency) {
    let scope = scope("tombstone-fence");
    let store = idem.store().as_ref();
    let key = RecordKey::new(&scope, &"k");
    let payload = Fingerprint::of(&"payload").unwrap();
    let late = new_claim(payload, TTL).with_tombstone();
    assert!(matches!(
        store.claim(&key, &late).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    sleep_until(Instant::now() + TTL + PAST).await;
    let winner = new_claim(payload, TTL).with_tombstone();
    assert!(matches!(
        store.claim(&key, &winner).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    let kept = Retention::new(TTL).with_tombstone(TOMBSTONE);
    assert_eq!(
        store
            .complete(&key, winner.token, b"rec", kept)
            .await
            .unwrap(),
        Fence::Held
    );
    let completed = Instant::now();
    sleep_until(completed + TTL + PAST).await;
    for _ in 0..2 {
        let again = new_claim(payload, TTL).with_tombstone();
        match store.claim(&key, &again).await.unwrap() {
            ClaimOutcome::Expired { fingerprint, .. } => assert_eq!(fingerprint, payload),
            other => panic!("a claim under a tombstone must answer Expired, got {other:?}"),
        }
    }
    let fence = store
        .complete(&key, late.token, b"late", kept)
        .await
        .unwrap();
    assert_ne!(
        fence,
        Fence::Held,
        "the late holder completed over a tombstone"
    );
    assert_ne!(store.release(&key, late.token).await.unwrap(), Fence::Held);
    let asked = completed.elapsed();
    assert!(
        asked < TTL + TOMBSTONE,
        "the machine was too slow to ask within the tombstone ({asked:?} after completion)"
    );
    store.forget(&key).await.unwrap();
    let fresh = new_claim(payload, TTL).with_tombstone();
    let won = store.claim(&key, &fresh).await.unwrap();
    assert!(
        matches!(won, ClaimOutcome::Won { .. }),
        "forget left the tombstone: {won:?}"
    );
}

/// A tombstone of zero is refused before any claim, as a zero TTL is.
pub async fn a_zero_tombstone_is_refused(idem: Idempotency) {
    let scope = scope("tombstone-zero");
    let runs = Counter::default();
    let out = idem
        .call(&scope, "k")
        .tombstone(Duration::ZERO)
        .run(|| async { Ok::<_, Error>(runs.bump()) })
        .await;
    assert!(matches!(out, Err(Error::InvalidOption(_))), "{out:?}");
    assert_eq!(runs.get(), 0);
}
