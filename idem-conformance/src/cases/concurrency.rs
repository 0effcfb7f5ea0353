//! Concurrent duplicates: one body run, the others refused or waiting.

use std::sync::Arc;
use std::time::Duration;

use idem::{DEFAULT_LEASE, Error, Idempotency};

use crate::support::{Counter, scope};

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
                    assert!(retry_after <= DEFAULT_LEASE);
                    in_progress += 1
                }
                other => panic!("unexpected answer {other:?}"),
            }
        }
    }
    assert_eq!(runs.get(), 1, "the body ran {} times", runs.get());
    assert_eq!((ok, in_progress), (1, BURST - 1));
}

/// 500 calls on one key that wait: the body runs once and every caller
/// gets its value.
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
