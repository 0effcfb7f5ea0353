//! The store conformance suite: every protocol rule of SPEC §3, §4 and §6,
//! written once and run against every store.
//!
//! A backend's test file does
//! `conformance_suite!(async { Idempotency::new(MyStore::…) });` and gets
//! one `#[tokio::test]` per case. Each case works in a scope of its own, so
//! cases may share one server and run in parallel.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem::{Claim, ClaimOutcome, Error, Fence, Fingerprint, Idempotency, RecordKey, Token};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

mod steps;
pub use steps::*;

/// Generates one test per case, each on a fresh handle from `$make`.
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        $crate::conformance_suite!(@cases $make;
            replays_every_ok_value, concurrent_duplicates_run_once_and_get_in_progress,
            concurrent_duplicates_wait_for_the_value, released_errors_run_again,
            replayed_errors_come_back, error_predicate_decides_per_error,
            other_payload_is_refused_without_running, ttl_expiry_runs_again,
            lease_expiry_allows_takeover_and_fences_the_late_holder,
            renewal_keeps_a_long_body_claimed, dropped_call_releases_its_claim,
            scopes_are_independent, fencing_at_the_store, corrupt_record_is_a_codec_error,
            changed_type_is_a_codec_error_with_both_names, child_key_is_stable_across_retries,
            empty_key_is_refused, oversized_value_settles_the_key,
            release_lets_the_next_caller_in, in_progress_reports_retry_after,
            a_body_that_blocks_its_thread_keeps_its_lease, a_lapsed_claim_is_lost_as_expired,
            steps_resume_after_a_failed_middle_step,
            steps_in_a_loop_resume_at_the_first_unfinished_line,
            a_call_dropped_mid_step_resumes_at_that_step,
            steps_under_concurrent_duplicates_run_once, steps_of_another_payload_are_refused,
            steps_expire_with_the_ttl, misused_steps_are_errors, step_fencing_at_the_store,
            replays_values_json_cannot_carry, replays_every_serde_form,
            unencodable_value_settles_the_key,
            forget_removes_completed_and_in_progress_records,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let idem: ::idem::Idempotency = $make.await;
                conformance::$case(idem).await;
            }
        )*
    };
}

/// A scope no other case or run uses.
pub fn scope(case: &str) -> String {
    format!("conformance/{case}/{:x}", rand_u64())
}

fn rand_u64() -> u64 {
    Token::random().to_u128() as u64
}

/// Counts body runs.
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicUsize>);

impl Counter {
    pub fn bump(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    pub id: u64,
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Shape {
    Circle(u32),
    Square { side: u32 },
    Empty,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub enum AppError {
    Declined(String),
    Timeout,
    Idem(String),
}

impl From<Error> for AppError {
    fn from(err: Error) -> Self {
        AppError::Idem(err.to_string())
    }
}

async fn twice<T>(idem: &Idempotency, case: &str, value: T)
where
    T: Serialize + DeserializeOwned + Clone + PartialEq + std::fmt::Debug + Send,
{
    let scope = scope(case);
    let runs = Counter::default();
    for _ in 0..3 {
        let out: Result<T, Error> = idem
            .call(&scope, "k")
            .run(|| async {
                runs.bump();
                Ok(value.clone())
            })
            .await;
        assert_eq!(out.unwrap(), value, "{case}");
    }
    assert_eq!(runs.get(), 1, "{case}: the body ran more than once");
}

/// Stores `value`, replays it twice, and checks every answer with `same`
/// (for values `PartialEq` cannot compare, such as NaN).
async fn twice_checked<T>(idem: &Idempotency, case: &str, value: T, same: fn(&T, &T) -> bool)
where
    T: Serialize + DeserializeOwned + Clone + std::fmt::Debug + Send,
{
    let scope = scope(case);
    let runs = Counter::default();
    for _ in 0..3 {
        let out: Result<T, Error> = idem
            .call(&scope, "k")
            .run(|| async {
                runs.bump();
                Ok(value.clone())
            })
            .await;
        let out = out.unwrap_or_else(|err| panic!("{case}: {err}"));
        assert!(same(&out, &value), "{case}: {out:?} is not {value:?}");
    }
    assert_eq!(runs.get(), 1, "{case}: the body ran more than once");
}

pub async fn replays_every_ok_value(idem: Idempotency) {
    twice(&idem, "unit", ()).await;
    twice(&idem, "none", None::<u32>).await;
    twice(&idem, "zero", 0u64).await;
    twice(&idem, "false", false).await;
    twice(&idem, "empty-vec", Vec::<String>::new()).await;
    twice(&idem, "empty-string", String::new()).await;
    twice(
        &idem,
        "struct",
        Receipt {
            id: 7,
            note: "paid".into(),
        },
    )
    .await;
    twice(&idem, "enum-unit", Shape::Empty).await;
    twice(&idem, "enum-struct", Shape::Square { side: 3 }).await;
    twice(&idem, "enum-tuple", Shape::Circle(0)).await;

    // A replay is reported as one.
    let scope = scope("reported");
    let first = idem
        .call(&scope, "k")
        .run_reported(|| async { Ok::<_, Error>(1u8) })
        .await;
    let again = idem
        .call(&scope, "k")
        .run_reported(|| async { Ok::<_, Error>(2u8) })
        .await;
    assert_eq!((first.result.unwrap(), first.replayed), (1, false));
    assert_eq!((again.result.unwrap(), again.replayed), (1, true));
}

const BURST: usize = 500;
const TASKS: usize = 8;

/// 500 calls on one key from 8 tasks; the body holds the claim until every
/// other call has answered `InProgress`, so no answer can be a replay.
pub async fn concurrent_duplicates_run_once_and_get_in_progress(idem: Idempotency) {
    let scope = Arc::new(scope("burst"));
    let runs = Counter::default();
    let refused = Counter::default();
    let all_refused = Arc::new(tokio::sync::Notify::new());
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (idem, scope, runs, refused, all_refused) = (
            idem.clone(),
            scope.clone(),
            runs.clone(),
            refused.clone(),
            all_refused.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let calls = (t..BURST).step_by(TASKS).map(|_| {
                let (runs, refused, all_refused) =
                    (runs.clone(), refused.clone(), all_refused.clone());
                let idem = idem.clone();
                let scope = scope.clone();
                async move {
                    let out: Result<u64, Error> = idem
                        .call(&*scope, "one-key")
                        .run(|| async {
                            runs.bump();
                            let wait_all = all_refused.notified();
                            if refused.get() < BURST - 1 {
                                let _ =
                                    tokio::time::timeout(Duration::from_secs(20), wait_all).await;
                            }
                            Ok(42)
                        })
                        .await;
                    if matches!(out, Err(Error::InProgress { .. })) && refused.bump() == BURST - 1 {
                        all_refused.notify_waiters();
                    }
                    out
                }
            });
            futures::future::join_all(calls).await
        }));
    }
    let mut ok = 0;
    let mut in_progress = 0;
    for task in tasks {
        for out in task.await.unwrap() {
            match out {
                Ok(42) => ok += 1,
                Err(Error::InProgress { retry_after, .. }) => {
                    assert!(retry_after <= idem::DEFAULT_LEASE);
                    in_progress += 1
                }
                other => panic!("unexpected answer {other:?}"),
            }
        }
    }
    assert_eq!(runs.get(), 1, "the body ran {} times", runs.get());
    assert_eq!((ok, in_progress), (1, BURST - 1));
}

pub async fn concurrent_duplicates_wait_for_the_value(idem: Idempotency) {
    let scope = Arc::new(scope("burst-wait"));
    let runs = Counter::default();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (idem, scope, runs) = (idem.clone(), scope.clone(), runs.clone());
        tasks.push(tokio::spawn(async move {
            let calls = (t..BURST).step_by(TASKS).map(|_| {
                let (idem, scope, runs) = (idem.clone(), scope.clone(), runs.clone());
                async move {
                    idem.call(&*scope, "one-key")
                        .wait(Duration::from_secs(20))
                        .run(|| async {
                            let n = runs.bump();
                            tokio::time::sleep(Duration::from_millis(300)).await;
                            Ok::<_, Error>(format!("value-{n}"))
                        })
                        .await
                }
            });
            futures::future::join_all(calls).await
        }));
    }
    let mut values = Vec::new();
    for task in tasks {
        for out in task.await.unwrap() {
            values.push(out.expect("every waiting caller gets the value"));
        }
    }
    assert_eq!(runs.get(), 1);
    assert_eq!(values.len(), BURST);
    assert!(values.iter().all(|v| v == "value-1"), "{:?}", &values[..3]);
}

pub async fn released_errors_run_again(idem: Idempotency) {
    let scope = scope("release");
    let runs = Counter::default();
    let fail = |runs: Counter| async move {
        runs.bump();
        Err::<u8, AppError>(AppError::Timeout)
    };
    assert_eq!(
        idem.call(&scope, "k").run(|| fail(runs.clone())).await,
        Err(AppError::Timeout)
    );
    assert_eq!(
        idem.call(&scope, "k").run(|| fail(runs.clone())).await,
        Err(AppError::Timeout)
    );
    assert_eq!(runs.get(), 2, "a released error must let the retry run");
    let ok: Result<u8, AppError> = idem.call(&scope, "k").run(|| async { Ok(5) }).await;
    assert_eq!(ok, Ok(5));
}

pub async fn replayed_errors_come_back(idem: Idempotency) {
    let scope = scope("replay");
    let runs = Counter::default();
    for _ in 0..3 {
        let out: Result<u8, AppError> = idem
            .call(&scope, "k")
            .errors(idem::replay_errors())
            .run(|| async {
                runs.bump();
                Err(AppError::Declined("insufficient funds".into()))
            })
            .await;
        assert_eq!(out, Err(AppError::Declined("insufficient funds".into())));
    }
    assert_eq!(runs.get(), 1);
}

fn is_declined(err: &AppError) -> bool {
    matches!(err, AppError::Declined(_))
}

pub async fn error_predicate_decides_per_error(idem: Idempotency) {
    let scope = scope("predicate");
    let runs = Counter::default();
    let call = |key: &'static str, err: AppError| {
        let runs = runs.clone();
        let idem = idem.clone();
        let scope = scope.clone();
        async move {
            idem.call(&scope, key)
                .errors(idem::store_errors_if(is_declined))
                .run(|| async move {
                    runs.bump();
                    Err::<u8, _>(err)
                })
                .await
        }
    };
    call("declined", AppError::Declined("card".into()))
        .await
        .unwrap_err();
    call("declined", AppError::Declined("card".into()))
        .await
        .unwrap_err();
    assert_eq!(runs.get(), 1, "a stored error is replayed");
    call("timeout", AppError::Timeout).await.unwrap_err();
    call("timeout", AppError::Timeout).await.unwrap_err();
    assert_eq!(runs.get(), 3, "a declined error is released and retried");
}

pub async fn other_payload_is_refused_without_running(idem: Idempotency) {
    let scope = scope("mismatch");
    let runs = Counter::default();
    let pay = |amount: u64| {
        let (idem, scope, runs) = (idem.clone(), scope.clone(), runs.clone());
        async move {
            idem.call(&scope, "order-1")
                .fingerprint(&("alice", amount))
                .run(|| async {
                    runs.bump();
                    Ok::<_, Error>(amount)
                })
                .await
        }
    };
    assert_eq!(pay(100).await.unwrap(), 100);
    assert!(matches!(
        pay(999).await,
        Err(Error::FingerprintMismatch { .. })
    ));
    assert_eq!(pay(100).await.unwrap(), 100);
    assert_eq!(runs.get(), 1);

    // Also while the first call is still in progress.
    let scope2 = self::scope("mismatch-in-progress");
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let holder = {
        let (idem, scope2) = (idem.clone(), scope2.clone());
        tokio::spawn(async move {
            idem.call(&scope2, "k")
                .fingerprint(&1)
                .run(|| async {
                    started_tx.send(()).unwrap();
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    Ok::<_, Error>(1)
                })
                .await
        })
    };
    started_rx.await.unwrap();
    let other: Result<u8, Error> = idem
        .call(&scope2, "k")
        .fingerprint(&2)
        .wait(Duration::from_secs(5))
        .run(|| async { panic!("must not run") })
        .await;
    assert!(
        matches!(other, Err(Error::FingerprintMismatch { .. })),
        "{other:?}"
    );
    assert_eq!(holder.await.unwrap().unwrap(), 1);
}

pub async fn ttl_expiry_runs_again(idem: Idempotency) {
    let scope = scope("ttl");
    let runs = Counter::default();
    let call = || {
        idem.call(&scope, "k")
            .ttl(Duration::from_millis(400))
            .lease(Duration::from_millis(400))
            .run(|| async { Ok::<_, Error>(runs.bump()) })
    };
    assert_eq!(call().await.unwrap(), 1);
    assert_eq!(call().await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(
        call().await.unwrap(),
        2,
        "an expired record must run the body again"
    );
}

/// A holder that stalls whole (as a paused process would: its thread
/// blocked, and its renewal with it, on a borrowed store renewed in the
/// body's task) loses its lease; a second caller takes over and
/// completes; the first caller's late completion is refused and does not
/// overwrite.
pub async fn lease_expiry_allows_takeover_and_fences_the_late_holder(idem: Idempotency) {
    let scope = scope("takeover");
    let lease = Duration::from_millis(300);
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let stalled = {
        let (idem, scope) = (idem.clone(), scope.clone());
        tokio::spawn(async move {
            let store = idem.store().clone();
            idem.call(&scope, "k")
                .lease(lease)
                .run_on(store.as_ref(), || async {
                    started_tx.send(()).unwrap();
                    // Blocks this worker: no renewal can run.
                    std::thread::sleep(lease * 4);
                    Ok::<_, Error>("first".to_owned())
                })
                .await
        })
    };
    started_rx.await.unwrap();
    tokio::time::sleep(lease * 2).await;
    let second: Result<String, Error> = idem
        .call(&scope, "k")
        .lease(lease)
        .run(|| async { Ok("second".into()) })
        .await;
    assert_eq!(second.unwrap(), "second");
    let first = stalled.await.unwrap();
    // Whether the second caller had claimed before the first's
    // completion arrived depends on scheduling (`taken_over` says which;
    // `fencing_at_the_store` pins both answers); either way it is refused.
    assert!(matches!(first, Err(Error::LeaseLost { .. })), "{first:?}");
    let replay: Result<String, Error> = idem
        .call(&scope, "k")
        .run(|| async { panic!("must replay") })
        .await;
    assert_eq!(
        replay.unwrap(),
        "second",
        "the late holder overwrote the record"
    );
}

/// A holder that stalls past its lease while nobody else calls is told its
/// claim expired, not that it was taken over; the key runs again.
pub async fn a_lapsed_claim_is_lost_as_expired(idem: Idempotency) {
    let scope = scope("lapsed");
    let lease = Duration::from_millis(300);
    let store = idem.store().clone();
    let first: Result<String, Error> = idem
        .call(&scope, "k")
        .lease(lease)
        .run_on(store.as_ref(), || async {
            // Blocks this worker: no renewal can run.
            std::thread::sleep(lease * 3);
            Ok("first".to_owned())
        })
        .await;
    let err = first.unwrap_err();
    assert!(
        matches!(
            err,
            Error::LeaseLost {
                taken_over: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("the claim expired"), "{err}");
    let again: Result<String, Error> = idem
        .call(&scope, "k")
        .run(|| async { Ok("again".to_owned()) })
        .await;
    assert_eq!(again.unwrap(), "again");
}

pub async fn renewal_keeps_a_long_body_claimed(idem: Idempotency) {
    let scope = scope("renewal");
    let lease = Duration::from_millis(300);
    let runs = Counter::default();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let long = {
        let (idem, scope, runs) = (idem.clone(), scope.clone(), runs.clone());
        tokio::spawn(async move {
            idem.call(&scope, "k")
                .lease(lease)
                .run(|| async {
                    runs.bump();
                    started_tx.send(()).unwrap();
                    tokio::time::sleep(lease * 5).await;
                    Ok::<_, Error>(1)
                })
                .await
        })
    };
    started_rx.await.unwrap();
    for _ in 0..4 {
        tokio::time::sleep(lease).await;
        let dup: Result<u8, Error> = idem
            .call(&scope, "k")
            .lease(lease)
            .run(|| async { Ok(runs.bump() as u8) })
            .await;
        assert!(
            matches!(dup, Err(Error::InProgress { .. })),
            "claim was lost: {dup:?}"
        );
    }
    assert_eq!(long.await.unwrap().unwrap(), 1);
    assert_eq!(runs.get(), 1);
}

pub async fn dropped_call_releases_its_claim(idem: Idempotency) {
    let scope = scope("dropped");
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let abandoned = {
        let (idem, scope) = (idem.clone(), scope.clone());
        tokio::spawn(async move {
            idem.call(&scope, "k")
                .lease(Duration::from_secs(60))
                .run(|| async {
                    started_tx.send(()).unwrap();
                    std::future::pending::<()>().await;
                    Ok::<_, Error>(0u8)
                })
                .await
        })
    };
    started_rx.await.unwrap();
    abandoned.abort();
    assert!(abandoned.await.unwrap_err().is_cancelled());
    // The release runs on the runtime right after the drop; well inside a
    // second, against a lease of a minute.
    let retry: Result<u8, Error> = idem
        .call(&scope, "k")
        .wait(Duration::from_secs(2))
        .run(|| async { Ok(9) })
        .await;
    assert_eq!(retry.unwrap(), 9);
}

pub async fn scopes_are_independent(idem: Idempotency) {
    let (a, b) = (scope("a"), scope("b"));
    let one: Result<u8, Error> = idem.call(&a, "same").run(|| async { Ok(1) }).await;
    let two: Result<u8, Error> = idem.call(&b, "same").run(|| async { Ok(2) }).await;
    assert_eq!((one.unwrap(), two.unwrap()), (1, 2));
    let tuple: Result<u8, Error> = idem
        .call(&(a.as_str(), 1u32), "same")
        .run(|| async { Ok(3) })
        .await;
    assert_eq!(tuple.unwrap(), 3);
}

pub async fn fencing_at_the_store(idem: Idempotency) {
    let store = idem.store();
    let key = RecordKey::new(&scope("fence"), &"k");
    let fp = Fingerprint::of(&"payload").unwrap();
    let lease = Duration::from_millis(300);
    let first = new_claim(fp, lease);
    assert!(matches!(
        store.claim(&key, &first).await.unwrap(),
        ClaimOutcome::Won {
            took_over: false,
            ..
        }
    ));
    let stranger = Token::random();
    assert_eq!(
        store.renew(&key, stranger, lease).await.unwrap(),
        Fence::Lost
    );
    assert_eq!(store.release(&key, stranger).await.unwrap(), Fence::Lost);
    assert_eq!(
        store.complete(&key, stranger, b"x", lease).await.unwrap(),
        Fence::Lost
    );
    assert_eq!(
        store.renew(&key, first.token, lease).await.unwrap(),
        Fence::Held
    );
    match store
        .claim(&key, &new_claim(first.fingerprint, first.lease))
        .await
        .unwrap()
    {
        ClaimOutcome::InProgress {
            fingerprint,
            retry_after,
        } => {
            assert_eq!(fingerprint, fp);
            assert!(
                retry_after <= lease && retry_after > Duration::ZERO,
                "{retry_after:?}"
            );
        }
        other => panic!("expected in progress, got {other:?}"),
    }
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
    assert_eq!(
        store
            .complete(&key, first.token, b"late", lease)
            .await
            .unwrap(),
        Fence::Lost
    );
    assert_eq!(
        store.renew(&key, first.token, lease).await.unwrap(),
        Fence::Lost
    );
    assert_eq!(store.release(&key, first.token).await.unwrap(), Fence::Lost);
    assert_eq!(
        store
            .complete(&key, second.token, b"record", Duration::from_secs(5))
            .await
            .unwrap(),
        Fence::Held
    );
    match store
        .claim(&key, &new_claim(second.fingerprint, second.lease))
        .await
        .unwrap()
    {
        ClaimOutcome::Completed {
            fingerprint,
            record,
            expires_in,
        } => {
            assert!(
                expires_in <= Duration::from_secs(5) && expires_in > Duration::from_secs(3),
                "{expires_in:?}"
            );
            assert_eq!(fingerprint, fp);
            assert_eq!(&record[..], b"record");
        }
        other => panic!("expected completed, got {other:?}"),
    }
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

/// A claim with a fresh token.
pub fn new_claim(fingerprint: Fingerprint, lease: Duration) -> Claim {
    Claim {
        token: Token::random(),
        fingerprint,
        lease,
        site: "conformance",
    }
}

/// Completes `key` in `scope` with raw record bytes, as an older or broken
/// writer would.
async fn plant(idem: &Idempotency, scope: &str, key: &str, record: &[u8]) {
    let key = RecordKey::new(scope, key);
    let claim = new_claim(Fingerprint::NONE, Duration::from_secs(5));
    assert!(matches!(
        idem.store().claim(&key, &claim).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    let done = idem
        .store()
        .complete(&key, claim.token, record, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(done, Fence::Held);
}

pub async fn corrupt_record_is_a_codec_error(idem: Idempotency) {
    let scope = scope("corrupt");
    for (key, bytes) in [
        ("empty", &b""[..]),
        ("format", b"\x09\x00\x00"),
        ("cut", b"\x01\x00\x40abc"),
    ] {
        plant(&idem, &scope, key, bytes).await;
        let out: Result<u8, Error> = idem
            .call(&scope, key)
            .run(|| async { panic!("must not re-run") })
            .await;
        assert!(matches!(out, Err(Error::Codec(_))), "{key}: {out:?}");
    }
}

pub async fn changed_type_is_a_codec_error_with_both_names(idem: Idempotency) {
    let scope = scope("type-change");
    let old: Result<Receipt, Error> = idem
        .call(&scope, "k")
        .run(|| async {
            Ok(Receipt {
                id: 1,
                note: String::new(),
            })
        })
        .await;
    old.unwrap();
    let new: Result<Shape, Error> = idem
        .call(&scope, "k")
        .run(|| async { panic!("must not re-run") })
        .await;
    let Err(Error::Codec(err)) = new else {
        panic!("expected a codec error, got {new:?}")
    };
    let text = err.to_string();
    assert!(text.contains("Receipt") && text.contains("Shape"), "{text}");
}

pub async fn child_key_is_stable_across_retries(idem: Idempotency) {
    let scope = scope("child");
    let mut seen = Vec::new();
    for _ in 0..2 {
        let out: Result<u8, AppError> = idem
            .call(&scope, "k")
            .run(|| async {
                seen.push(idem::child_key("gateway").expect("inside a body"));
                Err(AppError::Timeout)
            })
            .await;
        assert!(out.is_err());
    }
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0], seen[1]);
    let other: Result<String, Error> = idem
        .call(&scope, "k2")
        .run(|| async { Ok(idem::child_key("gateway").unwrap()) })
        .await;
    assert_ne!(other.unwrap(), seen[0]);
    assert_eq!(idem::child_key("gateway"), None);
}

pub async fn empty_key_is_refused(idem: Idempotency) {
    let out: Result<u8, Error> = idem
        .call(&scope("empty"), "")
        .run(|| async { panic!("must not run") })
        .await;
    assert!(matches!(out, Err(Error::InvalidKey(_))), "{out:?}");
}

/// A result too large to store, after the body ran: the caller gets its
/// value, and the key is settled so that no retry runs the body again;
/// duplicates are told the result was not stored.
pub async fn oversized_value_settles_the_key(idem: Idempotency) {
    let small = Idempotency::builder(SharedStore::new(idem.store().clone()))
        .max_record_bytes(1024)
        .build();
    let scope = scope("oversized");
    let runs = AtomicUsize::new(0);
    let big = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok::<String, Error>("x".repeat(4096))
    };
    let first = small.call(&scope, "k").run(big).await;
    assert_eq!(first.unwrap().len(), 4096);
    for _ in 0..2 {
        let retry = small.call(&scope, "k").run(big).await;
        assert!(
            matches!(retry, Err(Error::Codec(idem::CodecError::NotStored(ref reason))) if reason.contains("1024")),
            "{retry:?}"
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the body ran once");
}

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

/// Shares a store between handles with different settings, and counts
/// the claims that reach it.
#[derive(Clone)]
pub struct SharedStore {
    pub inner: Arc<dyn idem::Store>,
    pub claims: Arc<AtomicUsize>,
}

impl SharedStore {
    pub fn new(inner: Arc<dyn idem::Store>) -> Self {
        Self {
            inner,
            claims: Arc::default(),
        }
    }
}

#[idem::async_trait]
impl idem::Store for SharedStore {
    async fn claim(
        &self,
        key: &RecordKey,
        claim: &Claim,
    ) -> Result<ClaimOutcome, idem::StoreError> {
        self.claims.fetch_add(1, Ordering::SeqCst);
        self.inner.claim(key, claim).await
    }
    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        ttl: Duration,
    ) -> Result<Fence, idem::StoreError> {
        self.inner.complete(key, token, record, ttl).await
    }
    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, idem::StoreError> {
        self.inner.release(key, token).await
    }
    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, idem::StoreError> {
        self.inner.renew(key, token, lease).await
    }
}

/// A body that blocks its thread for three leases: the lease is renewed
/// from a task of its own, so a duplicate in the middle finds the key in
/// progress instead of taking it over and running the body a second time.
pub async fn a_body_that_blocks_its_thread_keeps_its_lease(idem: Idempotency) {
    let scope = scope("blocking");
    let lease = Duration::from_millis(400);
    let runs = Counter::default();
    let holder = {
        let (idem, scope, runs) = (idem.clone(), scope.clone(), runs.clone());
        tokio::spawn(async move {
            idem.call(&scope, "k")
                .lease(lease)
                .run(|| async move {
                    runs.bump();
                    std::thread::sleep(lease * 3);
                    Ok::<u8, Error>(1)
                })
                .await
        })
    };
    tokio::time::sleep(lease * 2).await;
    let duplicate: Result<u8, Error> = idem
        .call(&scope, "k")
        .lease(lease)
        .run(|| async {
            runs.bump();
            Ok(2)
        })
        .await;
    assert!(
        matches!(duplicate, Err(Error::InProgress { .. })),
        "{duplicate:?}"
    );
    assert_eq!(holder.await.unwrap().unwrap(), 1);
    assert_eq!(runs.get(), 1);
}

// ---- values plain JSON cannot carry (record format 3) -------------------

/// A PATCH body: absent, cleared (`Some(None)`) or set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Patch {
    pub email: Option<Option<String>>,
    pub nick: Option<Option<String>>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Floats {
    pub a: f64,
    pub b: f32,
    pub c: Option<f64>,
}

/// Equal, NaN included (NaN is compared with `is_nan`).
fn floats_match(x: &[f64], y: &[f64]) -> bool {
    x.len() == y.len()
        && x.iter()
            .zip(y)
            .all(|(p, q)| (p.is_nan() && q.is_nan()) || p.to_bits() == q.to_bits())
}

fn floats(v: &Floats) -> Vec<f64> {
    vec![v.a, f64::from(v.b), v.c.unwrap_or(0.5)]
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Slot {
    Morning,
    At(u8, u8),
}

pub async fn replays_values_json_cannot_carry(idem: Idempotency) {
    use std::collections::{BTreeMap, HashMap};

    twice(&idem, "some-none", Some(None::<u32>)).await;
    twice(&idem, "some-some-none", Some(Some(None::<u32>))).await;
    twice(&idem, "some-some-one", Some(Some(1u32))).await;
    twice(&idem, "some-unit", Some(())).await;
    twice(
        &idem,
        "patch",
        Patch {
            email: Some(None),
            nick: None,
        },
    )
    .await;
    for (case, a, b) in [
        ("nan", f64::NAN, f32::NAN),
        ("inf", f64::INFINITY, f32::INFINITY),
        ("-inf", f64::NEG_INFINITY, f32::NEG_INFINITY),
    ] {
        let value = Floats { a, b, c: Some(a) };
        twice_checked(&idem, case, value, |x, y| {
            floats_match(&floats(x), &floats(y))
        })
        .await;
    }
    twice_checked(&idem, "nan-f64", f64::NAN, |x, _| x.is_nan()).await;
    twice_checked(&idem, "nan-f32", f32::NAN, |x, _| x.is_nan()).await;
    twice(&idem, "u128", u128::MAX).await;

    let tuples: HashMap<(u32, u32), String> =
        HashMap::from([((1, 2), "a".into()), ((3, 4), "b".into())]);
    twice(&idem, "tuple-keys", tuples).await;
    let bytes: BTreeMap<Vec<u8>, u32> = BTreeMap::from([(vec![0, 255], 1), (vec![], 2)]);
    twice(&idem, "byte-keys", bytes).await;
    let slots = BTreeMap::from([(Slot::Morning, 1u8), (Slot::At(9, 30), 2)]);
    twice(&idem, "enum-keys", slots).await;
    twice(&idem, "int-keys", HashMap::from([(7u64, true), (0, false)])).await;
    let dollars: HashMap<String, u8> = ["$some", "$f64", "$map", "$$x", "$", "plain"]
        .into_iter()
        .zip(1..)
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    twice(&idem, "dollar-keys", dollars).await;

    // A changed shape is still refused, never misread.
    let scope = scope("escaped-shape");
    let first: Result<Option<Option<u8>>, Error> = idem
        .call(&scope, "k")
        .run(|| async { Ok(Some(None)) })
        .await;
    assert_eq!(first.unwrap(), Some(None));
    let changed: Result<Option<u8>, Error> = idem
        .call(&scope, "k")
        .run(|| async { panic!("must not re-run") })
        .await;
    assert!(
        matches!(
            changed,
            Err(Error::Codec(idem::CodecError::ShapeChanged { .. }))
        ),
        "{changed:?}"
    );
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Untagged {
    Amount(f64),
    Cleared(Option<Option<u8>>),
    Text(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Internal {
    Paid {
        cents: u64,
        note: Option<Option<String>>,
    },
    Voided,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", content = "c")]
pub enum Adjacent {
    Cleared(Option<Option<u8>>),
    Keys(std::collections::BTreeMap<Slot, u8>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub id: u32,
    #[serde(flatten)]
    pub meta: Meta,
    #[serde(flatten)]
    pub rest: std::collections::BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    #[serde(rename = "$schema")]
    pub schema: String,
    pub cleared: Option<Option<u8>>,
}

/// Written and read as text through `collect_str` and `deserialize_str`,
/// the way `chrono` and `uuid` types are.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamp(u64);

impl Serialize for Stamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("T{}", self.0))
    }
}

impl<'de> Deserialize<'de> for Stamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Stamp;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("T<number>")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Stamp, E> {
                text.strip_prefix('T')
                    .and_then(|n| n.parse().ok())
                    .map(Stamp)
                    .ok_or_else(|| E::custom("not a stamp"))
            }
        }
        d.deserialize_str(Text)
    }
}

/// Bytes through `serialize_bytes`, as `serde_bytes` writes them.
#[derive(Debug, Clone, PartialEq)]
pub struct Blob(Vec<u8>);

impl Serialize for Blob {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl<'de> serde::de::Visitor<'de> for Bytes {
            type Value = Blob;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E>(self, bytes: &[u8]) -> Result<Blob, E> {
                Ok(Blob(bytes.to_vec()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Blob, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element()? {
                    out.push(b);
                }
                Ok(Blob(out))
            }
        }
        d.deserialize_bytes(Bytes)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Everyday {
    pub unit: (),
    pub none: Option<u8>,
    pub zero: i64,
    pub no: bool,
    pub empty: Vec<u8>,
    pub empty_map: std::collections::HashMap<String, u8>,
    pub json: serde_json::Value,
    pub at: Stamp,
    pub bytes: Vec<u8>,
    pub blob: Blob,
}

pub async fn replays_every_serde_form(idem: Idempotency) {
    for (case, value) in [
        ("untagged-amount", Untagged::Amount(f64::INFINITY)),
        ("untagged-cleared", Untagged::Cleared(Some(None))),
        ("untagged-none", Untagged::Cleared(None)),
        ("untagged-text", Untagged::Text("$some".into())),
    ] {
        twice(&idem, case, value).await;
    }
    for (case, value) in [
        (
            "internal-paid",
            Internal::Paid {
                cents: 0,
                note: Some(None),
            },
        ),
        ("internal-voided", Internal::Voided),
    ] {
        twice(&idem, case, value).await;
    }
    twice(&idem, "adjacent-cleared", Adjacent::Cleared(Some(None))).await;
    let keys = std::collections::BTreeMap::from([(Slot::At(1, 2), 3)]);
    twice(&idem, "adjacent-keys", Adjacent::Keys(keys)).await;
    let envelope = Envelope {
        id: 1,
        meta: Meta {
            schema: "v1".into(),
            cleared: Some(None),
        },
        rest: [
            ("$ref".to_owned(), serde_json::json!("#/x")),
            ("n".to_owned(), serde_json::json!([1.5, null, {"$map": 1}])),
        ]
        .into(),
    };
    twice(&idem, "flatten", envelope).await;
    let everyday = Everyday {
        unit: (),
        none: None,
        zero: 0,
        no: false,
        empty: vec![],
        empty_map: Default::default(),
        json: serde_json::json!({"a": [1, "b", null, {"$some": true}]}),
        at: Stamp(1_764_000_000),
        bytes: vec![0, 1, 255],
        blob: Blob(vec![7, 0, 255]),
    };
    twice(&idem, "everyday", everyday).await;
}

/// A value whose `Serialize` fails (a map with a key it refuses, a broken
/// hand-written impl), after the body ran.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Unencodable(pub u8);

impl Serialize for Unencodable {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom(
            "this value refuses to be encoded",
        ))
    }
}

/// The body ran and its value cannot be stored: the caller gets the value,
/// the key is settled, and duplicates are told why instead of running the
/// body again.
pub async fn unencodable_value_settles_the_key(idem: Idempotency) {
    let scope = scope("unencodable");
    let runs = Counter::default();
    let body = || async {
        runs.bump();
        Ok::<_, Error>(Unencodable(7))
    };
    let first = idem.call(&scope, "k").run(body).await;
    assert_eq!(first.unwrap(), Unencodable(7));
    for _ in 0..2 {
        let retry = idem.call(&scope, "k").run(body).await;
        assert!(
            matches!(retry, Err(Error::Codec(idem::CodecError::NotStored(ref reason))) if reason.contains("refuses to be encoded")),
            "{retry:?}"
        );
    }
    assert_eq!(runs.get(), 1, "the body ran once");
}

pub async fn forget_removes_completed_and_in_progress_records(idem: Idempotency) {
    // Completed: forgotten, the next call runs again (and the local cache,
    // when the handle has one, forgets too).
    let scope = scope("forget");
    let runs = Counter::default();
    let call = |value: u32| {
        let runs = runs.clone();
        idem.call(&scope, "k").run(move || async move {
            runs.bump();
            Ok::<_, Error>(value)
        })
    };
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
        .complete(&key, held.token, b"late", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(late, Fence::Lost);

    // Nothing there: Ok, twice.
    idem.forget(&scope, "never-called").await.unwrap();
    idem.forget(&scope, "never-called").await.unwrap();
}
