//! A server that goes away and comes back, and sessions cut under a
//! store: each server has its own way to do it, the store's answer is the
//! same.

use std::time::Duration;

use idem::{Error, Idempotency};
use idem_conformance::Counter;

/// The server goes away (`down`) and comes back (`up`): calls fail with
/// `Error::Store` and run no body meanwhile, and the same store works
/// again afterwards.
pub(crate) async fn an_outage_fails_closed_and_recovers(
    idem: &Idempotency,
    down: impl AsyncFnOnce(),
    up: impl AsyncFnOnce(),
) {
    let runs = Counter::default();
    let call = |key: &'static str| {
        let (idem, runs) = (idem.clone(), runs.clone());
        async move {
            idem.call("outage", key)
                .run(|| async {
                    runs.bump();
                    Ok::<_, Error>(key.len())
                })
                .await
        }
    };
    assert_eq!(call("before").await.unwrap(), 6);
    assert_eq!(runs.get(), 1);

    down().await;
    for key in ["down-1", "down-2", "down-3"] {
        let out = call(key).await;
        assert!(matches!(out, Err(Error::Store(_))), "{out:?}");
    }
    assert_eq!(runs.get(), 1, "a body ran without a claim");

    up().await;
    assert_eq!(call("after").await.unwrap(), 5);
    assert_eq!(runs.get(), 2);
    // The record written before the outage is still replayed.
    assert_eq!(call("before").await.unwrap(), 6);
    assert_eq!(runs.get(), 2);
}

/// The store's sessions are cut (`cut`) while idle, as a server restart
/// or a killed session does: the next steps find out, open new
/// connections and succeed.
pub(crate) async fn cut_sessions_are_replaced_transparently(
    idem: &Idempotency,
    cut: impl AsyncFnOnce(),
) {
    // Open a few connections: the bodies overlap.
    let warm = (0..4usize).map(|i| {
        let idem = idem.clone();
        async move {
            idem.call("warm", &i)
                .run(|| async {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok::<_, Error>(i)
                })
                .await
        }
    });
    for (i, out) in futures::future::join_all(warm)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(out.unwrap(), i);
    }
    cut().await;
    for i in 0..8u32 {
        let out: Result<u32, Error> = idem.call("cut", &i).run(|| async { Ok(i) }).await;
        assert_eq!(out.unwrap(), i);
    }
}
