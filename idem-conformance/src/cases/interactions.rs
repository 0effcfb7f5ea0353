//! Where two features meet: each case is a way to a second effect that
//! the rules alone did not catch (issue 44): a claim answered late × the
//! lease, a takeover × another payload, a reconcile that fails or is
//! dropped × release, a duration × the store's clock.

use std::sync::Arc;
use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{ClaimOutcome, Fence, Retention};
use idem::{Error, Idempotency, MAX_DURATION};

use crate::support::{AppError, Counter, SharedStore, new_claim, scope};

const LEASE: Duration = Duration::from_millis(300);

/// A claim whose answer arrives most of a lease after it was sent still
/// holds a whole lease from when the body starts: it is renewed before
/// the body runs, so a duplicate during the body is in progress, never a
/// takeover that runs the body a second time.
pub async fn a_claim_answered_late_holds_a_whole_lease(idem: Idempotency) {
    let scope = scope("late-answer");
    // Answered three quarters of a lease late: past the two thirds after
    // which a first renewal a third of a lease after the answer would come
    // too late, with a quarter of a lease (300 ms) left for the renewal.
    let lease = Duration::from_millis(1200);
    let late = SharedStore::new(Arc::clone(idem.store())).answering_claims_after(lease * 3 / 4);
    let slow = Idempotency::new(late);
    let runs = Counter::default();
    let first = slow.call(&scope, "k").lease(lease).run(|| async {
        runs.bump();
        tokio::time::sleep(lease).await;
        Ok::<_, Error>("first".to_owned())
    });
    let duplicate = async {
        // Past the end of a lease stamped when the first claim was sent.
        tokio::time::sleep(lease * 4 / 3).await;
        idem.call(&scope, "k")
            .lease(lease)
            .run(|| async {
                runs.bump();
                Ok::<_, Error>("second".to_owned())
            })
            .await
    };
    let (first, duplicate) = tokio::join!(first, duplicate);
    assert_eq!(first.unwrap(), "first");
    assert!(
        matches!(duplicate, Err(Error::InProgress { .. })),
        "the duplicate took over a claim whose body ran: {duplicate:?}"
    );
    assert_eq!(runs.get(), 1);
}

/// A holder of one payload vanishes; a call with another payload under
/// its key after the lease lapsed is a mismatch, as it was while the
/// lease ran: the holder may have had its effect. A call with the
/// holder's payload takes over (and reconciles).
pub async fn a_lapsed_claim_of_another_payload_is_a_mismatch(idem: Idempotency) {
    let scope = scope("lapsed-other");
    let key = RecordKey::new(&scope, &"k");
    let ten = Fingerprint::of(&"charge $10").unwrap();
    let holder = new_claim(ten, LEASE);
    let won = idem.store().claim(&key, &holder).await.unwrap();
    assert!(matches!(won, ClaimOutcome::Won { .. }), "{won:?}");
    tokio::time::sleep(LEASE * 2).await;
    let runs = Counter::default();
    let other: Result<String, Error> = idem
        .call(&scope, "k")
        .fingerprint(&"charge $20")
        .run(|| async {
            runs.bump();
            Ok("charged $20".into())
        })
        .await;
    assert!(
        matches!(other, Err(Error::FingerprintMismatch { .. })),
        "{other:?}"
    );
    let same: Result<String, Error> = idem
        .call(&scope, "k")
        .fingerprint(&"charge $10")
        .reconcile(|| async { Ok(Some("booked $10".to_owned())) })
        .run(|| async {
            runs.bump();
            Ok("charged $10 again".into())
        })
        .await;
    assert_eq!(same.unwrap(), "booked $10");
    assert_eq!(
        runs.get(),
        0,
        "a body ran over the vanished holder's effect"
    );
}

/// A takeover whose call is dropped while its reconcile runs leaves the
/// takeover standing: the next call asks the reconcile, not the body.
pub async fn a_takeover_dropped_while_reconciling_stands(idem: Idempotency) {
    let scope = scope("reconcile-dropped");
    let key = RecordKey::new(&scope, &"k");
    let holder = new_claim(Fingerprint::NONE, LEASE);
    idem.store().claim(&key, &holder).await.unwrap();
    tokio::time::sleep(LEASE * 2).await;
    let (reconciles, runs) = (Counter::default(), Counter::default());
    let hung = idem
        .call(&scope, "k")
        .lease(LEASE)
        .reconcile(|| async {
            reconciles.bump();
            std::future::pending::<Result<Option<u32>, AppError>>().await
        })
        .run(|| async { Ok(runs.bump() as u32) });
    let dropped = tokio::time::timeout(LEASE / 3, hung).await;
    assert!(dropped.is_err(), "the reconcile cannot answer");
    let next: Result<u32, AppError> = idem
        .call(&scope, "k")
        .lease(LEASE)
        .wait(LEASE * 4)
        .reconcile(|| async {
            reconciles.bump();
            Ok(Some(7))
        })
        .run(|| async { Ok(runs.bump() as u32) })
        .await;
    assert_eq!(next.unwrap(), 7);
    assert_eq!((reconciles.get(), runs.get()), (2, 0));
}

/// At the trait: a renewal to a zero lease ends the claim without freeing
/// the key: the next claim takes it over, and the old token is fenced.
pub async fn a_renewal_to_zero_lapses_the_claim(idem: Idempotency) {
    let store = idem.store().as_ref();
    let key = RecordKey::new(&scope("renew-zero"), &"k");
    let first = new_claim(Fingerprint::NONE, Duration::from_secs(30));
    store.claim(&key, &first).await.unwrap();
    let renewed = store
        .renew(&key, first.token, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(renewed, Fence::Held);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let next = store
        .claim(&key, &new_claim(Fingerprint::NONE, LEASE))
        .await;
    assert!(
        matches!(
            next,
            Ok(ClaimOutcome::Won {
                took_over: true,
                ..
            })
        ),
        "{next:?}"
    );
    let late = store
        .complete(&key, first.token, b"late", Retention::new(LEASE))
        .await
        .unwrap();
    assert_eq!(late, Fence::Lost);
}

/// A `ttl` or `tombstone` past [`MAX_DURATION`] is refused before the
/// claim (the body does not run, no claim is left); the longest accepted
/// is stored and replayed by every store.
pub async fn durations_past_the_longest_are_refused_before_the_claim(idem: Idempotency) {
    let scope = scope("durations");
    let runs = Counter::default();
    let run = |ttl: Duration, tombstone: Duration| {
        idem.call(&scope, "k")
            .ttl(ttl)
            .tombstone(tombstone)
            .run(|| async { Ok::<_, Error>(runs.bump()) })
    };
    let day = Duration::from_secs(86_400);
    for (ttl, tombstone) in [(Duration::MAX, day), (day, Duration::MAX)] {
        let refused = run(ttl, tombstone).await;
        assert!(
            matches!(refused, Err(Error::InvalidOption(_))),
            "{refused:?}"
        );
    }
    assert_eq!(runs.get(), 0);
    assert_eq!(run(MAX_DURATION, MAX_DURATION).await.unwrap(), 1);
    assert_eq!(run(MAX_DURATION, MAX_DURATION).await.unwrap(), 1);
}
