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
            a_body_that_blocks_its_thread_keeps_its_lease,
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
        ClaimOutcome::Won { took_over: false }
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
        ClaimOutcome::Won { took_over: false }
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
        ClaimOutcome::Won { took_over: false }
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
