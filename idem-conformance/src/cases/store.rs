//! Cases that call the [`Store`](idem::Store) trait directly: fencing by
//! token, release, the reported lease, `forget`.

use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Fence, Retention, Token};
use idem::{Error, Idempotency, Store};

use crate::support::{Counter, new_claim, scope};

/// At the trait: only the claim's token may renew, release or complete;
/// a lapsed claim is `Expired`, a taken-over one `Lost`; a completed
/// record is returned with its fingerprint and remaining lifetime.
pub async fn fencing_at_the_store(idem: Idempotency) {
    let store = idem.store().as_ref();
    let key = RecordKey::new(&scope("fence"), &"k");
    let fp = Fingerprint::of(&"payload").unwrap();
    // Long enough that the fenced-out round trips below end within it on
    // a loaded CI machine (300 ms did not, at a load average of 25).
    let lease = Duration::from_secs(2);
    let first = new_claim(fp, lease);
    assert!(matches!(
        store.claim(&key, &first).await.unwrap(),
        ClaimOutcome::Won {
            took_over: false,
            ..
        }
    ));
    assert_fenced_out(store, &key, Token::random(), lease).await;
    assert_eq!(
        store.renew(&key, first.token, lease).await.unwrap(),
        Fence::Held
    );
    expect_in_progress(store, &key, &first).await;
    tokio::time::sleep(lease * 2).await;
    // Lapsed with nobody holding the key: expired, not taken over.
    assert_eq!(
        store.renew(&key, first.token, lease).await.unwrap(),
        Fence::Expired
    );
    let second = new_claim(fp, Duration::from_secs(5));
    assert!(matches!(
        store.claim(&key, &second).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    assert_fenced_out(store, &key, first.token, lease).await;
    assert_eq!(
        store
            .complete(
                &key,
                second.token,
                b"record",
                Retention::new(Duration::from_secs(5))
            )
            .await
            .unwrap(),
        Fence::Held
    );
    expect_completed(store, &key, &second, b"record").await;
    // A completed record is no longer a claim: nothing to release or renew.
    assert_eq!(
        store.release(&key, second.token).await.unwrap(),
        Fence::Lost
    );
    assert_eq!(
        store.renew(&key, second.token, lease).await.unwrap(),
        Fence::Lost
    );
}

/// A token that does not hold the claim can neither renew, release nor
/// complete it.
/// A completion sent again ([`Store::complete_again`], after a failure
/// whose answer was lost) completes a live claim, knows its own landed
/// completion (`Held`), and is fenced like the first: a completed record
/// is never overwritten with other bytes.
pub async fn a_completion_sent_again_knows_its_own(idem: Idempotency) {
    let store = idem.store().as_ref();
    let key = RecordKey::new(&scope("again"), &"k");
    let claim = new_claim(Fingerprint::of(&"payload").unwrap(), Duration::from_secs(5));
    let kept = Retention::new(Duration::from_secs(5));
    assert!(matches!(
        store.claim(&key, &claim).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    let again = |token, bytes: &'static [u8]| store.complete_again(&key, token, bytes, kept);
    // The first sending never landed: sent again, it completes the claim.
    assert_eq!(again(claim.token, b"record").await.unwrap(), Fence::Held);
    expect_completed(store, &key, &claim, b"record").await;
    assert_eq!(
        again(claim.token, b"record").await.unwrap(),
        Fence::Held,
        "a completion that landed, sent again, must answer Held (implement Store::complete_again)"
    );
    assert_ne!(again(claim.token, b"other").await.unwrap(), Fence::Held);
    expect_completed(store, &key, &claim, b"record").await;
}

async fn assert_fenced_out(store: &dyn Store, key: &RecordKey, token: Token, lease: Duration) {
    assert_eq!(store.renew(key, token, lease).await.unwrap(), Fence::Lost);
    assert_eq!(store.release(key, token).await.unwrap(), Fence::Lost);
    assert_eq!(
        store
            .complete(key, token, b"late", Retention::new(lease))
            .await
            .unwrap(),
        Fence::Lost
    );
}

/// A second claim of a held key answers in progress, with the holder's
/// fingerprint and a retry within the lease.
async fn expect_in_progress(store: &dyn Store, key: &RecordKey, held: &Claim) {
    match claim_again(store, key, held).await {
        ClaimOutcome::InProgress {
            fingerprint,
            retry_after,
            ..
        } => {
            assert_eq!(fingerprint, held.fingerprint);
            assert!(
                retry_after <= held.lease && retry_after > Duration::ZERO,
                "{retry_after:?}"
            );
        }
        other => panic!("expected in progress, got {other:?}"),
    }
}

/// A new claim of `key` with the same fingerprint and lease as `earlier`.
async fn claim_again(store: &dyn Store, key: &RecordKey, earlier: &Claim) -> ClaimOutcome {
    let claim = new_claim(earlier.fingerprint, earlier.lease);
    store.claim(key, &claim).await.unwrap()
}

/// A claim of a completed key answers its record, fingerprint and
/// remaining lifetime (within two seconds of the claim's lease, used as
/// the TTL here).
async fn expect_completed(store: &dyn Store, key: &RecordKey, done: &Claim, bytes: &[u8]) {
    let claim = new_claim(done.fingerprint, done.lease).with_expiry();
    match store.claim(key, &claim).await.unwrap() {
        ClaimOutcome::Completed {
            fingerprint,
            record,
            expires_in,
            ..
        } => {
            assert!(
                expires_in <= done.lease && expires_in > done.lease - Duration::from_secs(2),
                "{expires_in:?}"
            );
            assert_eq!(fingerprint, done.fingerprint);
            assert_eq!(&record[..], bytes);
        }
        other => panic!("expected completed, got {other:?}"),
    }
}

/// At the trait: a released claim lets the next claim win at once, not as
/// a takeover.
pub async fn release_lets_the_next_caller_in(idem: Idempotency) {
    let store = idem.store();
    let key = RecordKey::new(&scope("release-store"), &"k");
    let claim = new_claim(Fingerprint::NONE, Duration::from_secs(30));
    assert!(matches!(
        store.claim(&key, &claim).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    assert_eq!(store.release(&key, claim.token).await.unwrap(), Fence::Held);
    let next = new_claim(claim.fingerprint, claim.lease);
    assert!(matches!(
        store.claim(&key, &next).await.unwrap(),
        ClaimOutcome::Won {
            took_over: false,
            ..
        }
    ));
}

/// At the trait: a claim on a held key reports the holder's remaining
/// lease, by the store's clock.
pub async fn in_progress_reports_retry_after(idem: Idempotency) {
    let store = idem.store();
    let key = RecordKey::new(&scope("retry-after"), &"k");
    let claim = new_claim(Fingerprint::NONE, Duration::from_secs(10));
    assert!(matches!(
        store.claim(&key, &claim).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    let other = new_claim(claim.fingerprint, claim.lease);
    let ClaimOutcome::InProgress { retry_after, .. } = store.claim(&key, &other).await.unwrap()
    else {
        panic!("expected in progress")
    };
    assert!(
        retry_after > Duration::from_secs(8) && retry_after <= Duration::from_secs(10),
        "{retry_after:?}"
    );
}

/// `forget` removes a completed record and an in-progress claim (whose
/// late completion is then fenced out); a missing key is `Ok`.
pub async fn forget_removes_completed_and_in_progress_records(idem: Idempotency) {
    // Completed: forgotten, the next call runs again (and the local cache,
    // when the handle has one, forgets too).
    let scope = scope("forget");
    let runs = Counter::default();
    let call = |value| counted(&idem, &scope, &runs, value);
    assert_eq!(call(1).await.unwrap(), 1);
    assert_eq!(call(2).await.unwrap(), 1, "replayed");
    idem.forget(&scope, "k").await.unwrap();
    assert_eq!(call(3).await.unwrap(), 3, "ran again after forget");
    assert_eq!(runs.get(), 2);

    // In progress: forgotten, the next claim wins at once, and the old
    // holder's completion is fenced out.
    let store = idem.store();
    let key = RecordKey::new(&scope, &"held");
    let held = new_claim(Fingerprint::NONE, Duration::from_secs(60));
    assert!(matches!(
        store.claim(&key, &held).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    idem.forget(&scope, "held").await.unwrap();
    let next = new_claim(Fingerprint::NONE, Duration::from_secs(60));
    assert!(matches!(
        store.claim(&key, &next).await.unwrap(),
        ClaimOutcome::Won {
            took_over: false,
            ..
        }
    ));
    let late = store
        .complete(
            &key,
            held.token,
            b"late",
            Retention::new(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    assert_eq!(late, Fence::Lost);

    // Nothing there: Ok, twice.
    idem.forget(&scope, "never-called").await.unwrap();
    idem.forget(&scope, "never-called").await.unwrap();
}

/// A key a store has replayed is answered by what it holds now: once
/// forgotten and claimed by another caller, it is in progress (the body
/// does not run), and once that caller completes, its value replays. A
/// store may read a key it saw completed before claiming it; that read
/// must answer as the claim would.
pub async fn a_replayed_key_answers_what_it_holds_now(idem: Idempotency) {
    let scope = scope("replayed-now");
    let runs = Counter::default();
    let call = |value| counted(&idem, &scope, &runs, value);
    assert_eq!(call(1).await.unwrap(), 1);
    assert_eq!(call(2).await.unwrap(), 1, "replayed");
    idem.forget(&scope, "k").await.unwrap();
    let store = idem.store();
    let key = RecordKey::new(&scope, &"k");
    let other = new_claim(Fingerprint::NONE, Duration::from_secs(60));
    assert!(matches!(
        store.claim(&key, &other).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    let held = call(3).await;
    assert!(matches!(held, Err(Error::InProgress { .. })), "{held:?}");
    let record = idem::admin::encode_record(&4u32).unwrap();
    let retention = Retention::new(Duration::from_secs(60));
    let done = store.complete(&key, other.token, &record, retention);
    assert_eq!(done.await.unwrap(), Fence::Held);
    assert_eq!(call(5).await.unwrap(), 4, "the other caller's value");
    assert_eq!(runs.get(), 1);
}

/// A call of key `k` in `scope` whose body counts its runs in `runs` and
/// answers `value`.
async fn counted(
    idem: &Idempotency,
    scope: &str,
    runs: &Counter,
    value: u32,
) -> Result<u32, Error> {
    let runs = runs.clone();
    idem.call(scope, "k")
        .run(move || async move {
            runs.bump();
            Ok::<_, Error>(value)
        })
        .await
}
