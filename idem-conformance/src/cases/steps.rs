//! Recovery points (`idem::step`): a retried call resumes after its last
//! finished step, at the runtime and at the `Store` trait.

use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{ClaimOutcome, Fence, Retention, StepId, Token};
use idem::{Error, Idempotency, Store};

use crate::support::{AppError, Counter, new_claim, scope};

/// Three steps; the middle one fails while `fail_b` is set (a released
/// error). Returns what the body saw of each step.
async fn three_steps(
    idem: &Idempotency,
    scope: &str,
    runs: &[Counter; 3],
    fail_b: bool,
) -> Result<(u64, u64, u64), AppError> {
    idem.call(scope, "order-1")
        .run(|| async {
            let a = idem::step("reserve", || async {
                Ok::<_, AppError>(runs[0].bump() as u64)
            })
            .await?;
            let b = idem::step("charge", || async {
                runs[1].bump();
                if fail_b {
                    return Err(AppError::Timeout);
                }
                Ok(100 + a)
            })
            .await?;
            let c = idem::step("ship", || async {
                Ok::<_, AppError>(runs[2].bump() as u64)
            })
            .await?;
            Ok((a, b, c))
        })
        .await
}

/// A retried call replays its finished steps and resumes at the one that
/// failed; a completed call replays whole.
pub async fn steps_resume_after_a_failed_middle_step(idem: Idempotency) {
    let scope = scope("steps-resume");
    let runs: [Counter; 3] = Default::default();
    let first = three_steps(&idem, &scope, &runs, true).await;
    assert_eq!(first, Err(AppError::Timeout));
    assert_eq!([runs[0].get(), runs[1].get(), runs[2].get()], [1, 1, 0]);
    let second = three_steps(&idem, &scope, &runs, false).await;
    assert_eq!(second, Ok((1, 101, 1)));
    // The first step replayed its value; its body did not run again.
    assert_eq!([runs[0].get(), runs[1].get(), runs[2].get()], [1, 2, 1]);
    // The completed call replays whole: no step runs.
    let third = three_steps(&idem, &scope, &runs, true).await;
    assert_eq!(third, Ok((1, 101, 1)));
    assert_eq!([runs[0].get(), runs[1].get(), runs[2].get()], [1, 2, 1]);
}

/// Steps named per loop iteration resume at the first unfinished one.
pub async fn steps_in_a_loop_resume_at_the_first_unfinished_line(idem: Idempotency) {
    let scope = scope("steps-loop");
    let runs = Counter::default();
    let attempt = |fail_at: Option<u32>| {
        let (idem, scope, runs) = (idem.clone(), scope.clone(), runs.clone());
        async move {
            idem.call(&scope, "k")
                .run(|| async {
                    let mut total = 0u32;
                    for line in 0..5u32 {
                        total += idem::step(("line", line), || async {
                            runs.bump();
                            if Some(line) == fail_at {
                                return Err(AppError::Declined(format!("line {line}")));
                            }
                            Ok(line * 10)
                        })
                        .await?;
                    }
                    Ok::<_, AppError>(total)
                })
                .await
        }
    };
    assert!(attempt(Some(3)).await.is_err());
    assert_eq!(runs.get(), 4);
    assert_eq!(attempt(None).await, Ok(100));
    // Lines 0..3 replayed; line 3 ran again, then line 4.
    assert_eq!(runs.get(), 6);
}

/// A call dropped inside a step resumes at that step.
pub async fn a_call_dropped_mid_step_resumes_at_that_step(idem: Idempotency) {
    let scope = scope("steps-dropped");
    let runs: [Counter; 2] = Default::default();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let abandoned = {
        let (idem, scope, runs) = (idem.clone(), scope.clone(), runs.clone());
        tokio::spawn(async move {
            idem.call(&scope, "k")
                .lease(Duration::from_secs(60))
                .run(|| async {
                    idem::step("first", || async { Ok::<_, Error>(runs[0].bump()) }).await?;
                    idem::step("second", || async {
                        runs[1].bump();
                        started_tx.send(idem::child_key("gateway")).unwrap();
                        std::future::pending::<()>().await;
                        Ok::<_, Error>(0usize)
                    })
                    .await
                })
                .await
        })
    };
    let child_then = started_rx.await.unwrap().expect("inside a call");
    abandoned.abort();
    assert!(abandoned.await.unwrap_err().is_cancelled());
    let retry: Result<(usize, String), Error> = idem
        .call(&scope, "k")
        .wait(Duration::from_secs(2))
        .run(|| async {
            let first = idem::step("first", || async { Ok::<_, Error>(runs[0].bump()) }).await?;
            let child = idem::step("second", || async {
                runs[1].bump();
                Ok::<_, Error>(idem::child_key("gateway").unwrap())
            })
            .await?;
            Ok((first, child))
        })
        .await;
    let (first, child_now) = retry.unwrap();
    assert_eq!(first, 1, "the first step's stored value");
    assert_eq!([runs[0].get(), runs[1].get()], [1, 2]);
    assert_eq!(
        child_now, child_then,
        "the rerun step got another child key"
    );
}

/// Concurrent duplicates run each step once.
pub async fn steps_under_concurrent_duplicates_run_once(idem: Idempotency) {
    let scope = scope("steps-concurrent");
    let runs: [Counter; 2] = Default::default();
    let calls = (0..8).map(|_| {
        let (idem, scope, runs) = (idem.clone(), scope.clone(), runs.clone());
        tokio::spawn(async move {
            idem.call(&scope, "k")
                .wait(Duration::from_secs(10))
                .run(|| async {
                    let a = idem::step("a", || async {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Ok::<_, Error>(runs[0].bump())
                    })
                    .await?;
                    let b = idem::step("b", || async { Ok::<_, Error>(runs[1].bump()) }).await?;
                    Ok::<_, Error>(a + b)
                })
                .await
        })
    });
    for call in calls.collect::<Vec<_>>() {
        assert_eq!(call.await.unwrap().unwrap(), 2);
    }
    assert_eq!([runs[0].get(), runs[1].get()], [1, 1]);
}

/// Another payload under the same key never sees the saved steps.
pub async fn steps_of_another_payload_are_refused(idem: Idempotency) {
    let scope = scope("steps-payload");
    let runs = Counter::default();
    let first: Result<u8, AppError> = idem
        .call(&scope, "k")
        .fingerprint(&"payload-a")
        .run(|| async {
            idem::step("charge", || async { Ok::<_, AppError>(runs.bump()) }).await?;
            Err(AppError::Timeout)
        })
        .await;
    assert_eq!(first, Err(AppError::Timeout));
    let other: Result<u8, Error> = idem
        .call(&scope, "k")
        .fingerprint(&"payload-b")
        .run(|| async { panic!("must not run over another payload's steps") })
        .await;
    assert!(
        matches!(other, Err(Error::FingerprintMismatch { .. })),
        "{other:?}"
    );
    let same: Result<usize, AppError> = idem
        .call(&scope, "k")
        .fingerprint(&"payload-a")
        .run(|| async { idem::step("charge", || async { Ok::<_, AppError>(runs.bump()) }).await })
        .await;
    assert_eq!(same, Ok(1));
    assert_eq!(runs.get(), 1);
}

/// Saved steps expire with the call's `ttl`.
pub async fn steps_expire_with_the_ttl(idem: Idempotency) {
    let scope = scope("steps-ttl");
    let runs = Counter::default();
    let attempt = || async {
        idem.call(&scope, "k")
            .ttl(Duration::from_millis(400))
            .lease(Duration::from_millis(400))
            .run(|| async {
                idem::step("once", || async { Ok::<_, AppError>(runs.bump()) }).await?;
                Err::<u8, _>(AppError::Timeout)
            })
            .await
    };
    assert!(attempt().await.is_err());
    assert!(attempt().await.is_err());
    assert_eq!(runs.get(), 1, "a step within the TTL replays");
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(attempt().await.is_err());
    assert_eq!(runs.get(), 2, "an expired step runs again");
}

/// `idem::step` outside a body, nested, or under a name used twice is
/// `InvalidStep`, before its body runs.
pub async fn misused_steps_are_errors(idem: Idempotency) {
    let outside: Result<u8, Error> = idem::step("alone", || async { Ok(1) }).await;
    assert!(
        matches!(outside, Err(Error::InvalidStep { ref step, .. }) if step == "alone"),
        "{outside:?}"
    );
    let scope = scope("steps-misuse");
    let nested: Result<u8, Error> = idem
        .call(&scope, "nested")
        .run(|| async {
            idem::step("outer", || async {
                idem::step("inner", || async { Ok(1u8) }).await
            })
            .await
        })
        .await;
    let Err(Error::InvalidStep { step, reason }) = nested else {
        panic!("expected InvalidStep, got {nested:?}")
    };
    assert_eq!(step, "inner");
    assert!(reason.contains("nest"), "{reason}");
    let twice: Result<u8, Error> = idem
        .call(&scope, "twice")
        .run(|| async {
            idem::step("same", || async { Ok::<_, Error>(1u8) }).await?;
            idem::step("same", || async { Ok(2u8) }).await
        })
        .await;
    assert!(matches!(twice, Err(Error::InvalidStep { .. })), "{twice:?}");
    // A step whose body failed may be tried again in the same run.
    let again = Counter::default();
    let retried: Result<usize, Error> = idem
        .call(&scope, "retried")
        .run(|| async {
            for _ in 0..3 {
                let out = idem::step("flaky", || async {
                    match again.bump() {
                        1 => Err(Error::InvalidKey("flaky".into())),
                        n => Ok(n),
                    }
                })
                .await;
                if let Ok(n) = out {
                    return Ok(n);
                }
            }
            unreachable!()
        })
        .await;
    assert_eq!(retried.unwrap(), 2);
    let store = idem.store().clone();
    let borrowed: Result<u8, Error> = idem
        .call(&scope, "borrowed")
        .on(store.as_ref())
        .run(|| async { idem::step("s", || async { Ok(1u8) }).await })
        .await;
    assert!(
        matches!(borrowed, Err(Error::InvalidStep { .. })),
        "{borrowed:?}"
    );
}

/// At the trait: a won claim returns the saved steps; a late holder cannot
/// save over the new holder's; steps outlive a release; a completed
/// record comes back without them.
pub async fn step_fencing_at_the_store(idem: Idempotency) {
    let store = idem.store().as_ref();
    let key = RecordKey::new(&scope("step-fence"), &"k");
    let lease = Duration::from_millis(300);
    let (s1, s2) = (StepId::new(&"s1"), StepId::new(&"s2"));
    let first = new_claim(Fingerprint::NONE, lease);
    let won = store.claim(&key, &first).await.unwrap();
    assert!(
        matches!(won, ClaimOutcome::Won { ref steps, .. } if steps.is_empty()),
        "{won:?}"
    );
    assert_eq!(
        save(store, &key, first.token, s1, b"one").await,
        Fence::Held
    );
    tokio::time::sleep(lease * 2).await;
    let second = new_claim(Fingerprint::NONE, lease * 10);
    let ClaimOutcome::Won { steps, .. } = store.claim(&key, &second).await.unwrap() else {
        panic!("the expired claim was not taken over")
    };
    assert_eq!(steps.len(), 1);
    assert_eq!((steps[0].0, &steps[0].1[..]), (s1, &b"one"[..]));
    assert_eq!(
        save(store, &key, first.token, s2, b"late").await,
        Fence::Lost
    );
    assert_eq!(
        save(store, &key, second.token, s2, b"two").await,
        Fence::Held
    );
    assert_eq!(
        store.release(&key, second.token).await.unwrap(),
        Fence::Held
    );
    let third = new_claim(Fingerprint::NONE, lease * 10);
    let ClaimOutcome::Won {
        took_over,
        mut steps,
        ..
    } = store.claim(&key, &third).await.unwrap()
    else {
        panic!("the released key was not won")
    };
    assert!(!took_over);
    steps.sort_by_key(|(id, _)| *id);
    let mut want = vec![(s1, b"one".to_vec()), (s2, b"two".to_vec())];
    want.sort_by_key(|(id, _)| *id);
    let steps: Vec<_> = steps.into_iter().map(|(id, v)| (id, v.to_vec())).collect();
    assert_eq!(steps, want, "the steps did not outlive the release");
    assert_eq!(
        save(store, &key, second.token, s1, b"stale").await,
        Fence::Lost
    );
    assert_eq!(
        store
            .complete(&key, third.token, b"rec", Retention::new(STEP_TTL))
            .await
            .unwrap(),
        Fence::Held
    );
    assert_eq!(
        save(store, &key, third.token, s1, b"after").await,
        Fence::Lost
    );
    let fourth = new_claim(Fingerprint::NONE, lease);
    assert!(matches!(
        store.claim(&key, &fourth).await.unwrap(),
        ClaimOutcome::Completed { .. }
    ));
}

const STEP_TTL: Duration = Duration::from_secs(60);

/// Saves one step under `token`, with a minute to live.
async fn save(store: &dyn Store, key: &RecordKey, token: Token, id: StepId, bytes: &[u8]) -> Fence {
    store
        .save_step(key, token, id, bytes, STEP_TTL)
        .await
        .unwrap()
}
