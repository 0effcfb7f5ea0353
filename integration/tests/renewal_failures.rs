//! A lease that cannot be renewed (the store is down) is reported while
//! the body still runs, not only when the call ends: a `WARN` event in the
//! call's `idem.call` span and `idem_renewal_failures_total{scope}`
//! (issue 29). Its own test binary: it installs the process's tracing
//! subscriber and metrics recorder.

#[path = "all/support/captured.rs"]
mod captured;
#[path = "all/support/redis_server.rs"]
mod redis_server;

use std::time::Duration;

use captured::Captured;
use idem::{Error, Idempotency, RedisStore};
use metrics_exporter_prometheus::PrometheusBuilder;
use redis_server::PrivateRedis;

/// The sum of `name`'s samples whose labels hold `label`.
fn sample(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|line| line.starts_with(name) && line.contains(label))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_that_fails_is_reported_while_the_body_runs() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let metrics = PrometheusBuilder::new().install_recorder().unwrap();

    let mut server = PrivateRedis::start(&[]);
    let store = RedisStore::builder()
        .connection_timeout(Duration::from_millis(200))
        .response_timeout(Duration::from_millis(200))
        .connect(&server.url())
        .await
        .unwrap();
    let idem = Idempotency::new(store);
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let (seen_tx, seen) = tokio::sync::oneshot::channel();
    let holder = {
        let (idem, captured, metrics) = (idem.clone(), captured.clone(), metrics.clone());
        tokio::spawn(async move {
            idem.call("renewal-down", "order-1")
                .site(idem::call_site!("renewal_down"))
                .lease(Duration::from_millis(600))
                .run(|| async move {
                    started_tx.send(()).unwrap();
                    // The body waits until both reports are out: they
                    // came while it ran.
                    loop {
                        let warned = captured.text().contains("lease renewal failed");
                        let failures = sample(
                            &metrics.render(),
                            "idem_renewal_failures_total",
                            "site=\"renewal_down\"",
                        );
                        if warned && failures >= 1.0 {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    seen_tx.send(()).unwrap();
                    Ok::<u8, Error>(1)
                })
                .await
        })
    };
    started.await.unwrap();
    server.kill();
    // Bounded: a renewal is due every 200 ms and gives up after 200 ms.
    tokio::time::timeout(Duration::from_secs(20), seen)
        .await
        .expect("no renewal failure was reported while the body ran")
        .unwrap();
    let out = holder.await.unwrap();
    assert!(matches!(out, Err(Error::Store(_))), "{out:?}");

    let log = captured.text();
    let warning = log
        .lines()
        .find(|line| line.contains("lease renewal failed"))
        .unwrap();
    let short = idem::key::RecordKey::new("renewal-down", "order-1")
        .short()
        .to_string();
    assert!(warning.contains("WARN"), "{warning}");
    assert!(
        warning.contains("idem.call{"),
        "in the call's span: {warning}"
    );
    assert!(warning.contains(&short), "{warning}");
    assert!(!warning.contains("order-1"), "no raw key: {warning}");
}
