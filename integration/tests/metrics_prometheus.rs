//! The Prometheus example, scraped: real calls through `#[idempotent]` and
//! the builder, then a real HTTP GET of the exporter's endpoint, and the
//! counts read from the exposition text.

#[path = "../examples/prometheus_metrics.rs"]
mod example;

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use idem::{Error, Idempotency, MemoryStore};

/// A port free a moment ago on loopback.
fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

async fn scrape(addr: SocketAddr) -> String {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let uri: axum::http::Uri = format!("http://{addr}/metrics").parse().unwrap();
    // The listener is spawned by `install`; it may take a moment to bind.
    for _ in 0..50 {
        if let Ok(answer) = client.get(uri.clone()).await {
            assert_eq!(answer.status(), 200);
            let body = answer.into_body().collect().await.unwrap().to_bytes();
            return String::from_utf8(body.to_vec()).unwrap();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the exporter never answered on {addr}");
}

/// The value of the sample whose line starts with `name{` and carries
/// every label in `labels`.
fn sample(text: &str, name: &str, labels: &[&str]) -> f64 {
    let matching: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with(&format!("{name}{{")))
        .filter(|line| labels.iter().all(|label| line.contains(label)))
        .collect();
    assert_eq!(matching.len(), 1, "{name} {labels:?} in:\n{text}");
    matching[0].rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_are_scraped_over_http_after_real_calls() {
    let addr = free_addr();
    example::install(addr).unwrap();
    let idem = Idempotency::new(MemoryStore::new());
    example::make_calls(&idem).await;

    // In progress, and a wait: a holder blocks "busy" while one caller
    // gives up at once and another waits for its value.
    let site = idem::call_site!("busy");
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let holder = {
        let idem = idem.clone();
        tokio::spawn(async move {
            idem.call("busy", "k")
                .site(site)
                .lease(Duration::from_millis(300))
                .run(|| async move {
                    started_tx.send(()).unwrap();
                    // Long enough for renewals (every third of the lease).
                    tokio::time::sleep(Duration::from_millis(450)).await;
                    Ok::<_, Error>(5u8)
                })
                .await
        })
    };
    started.await.unwrap();
    let busy: Result<u8, Error> = idem
        .call("busy", "k")
        .site(site)
        .run(|| async { Ok(0) })
        .await;
    assert!(matches!(busy, Err(Error::InProgress { .. })));
    let waited: Result<u8, Error> = idem
        .call("busy", "k")
        .site(site)
        .wait(Duration::from_secs(10))
        .run(|| async { Ok(0) })
        .await;
    assert_eq!(waited.unwrap(), 5);
    assert_eq!(holder.await.unwrap().unwrap(), 5);

    let text = scrape(addr).await;
    let charge = "site=\"metrics_prometheus::example::charge\"";
    let calls = |site: &str, outcome: &str| {
        sample(
            &text,
            "idem_calls_total",
            &[site, &format!("outcome=\"{outcome}\"")],
        )
    };
    assert_eq!(calls(charge, "ran"), 3.0);
    assert_eq!(calls(charge, "replayed"), 3.0);
    assert_eq!(calls(charge, "mismatch"), 1.0);
    assert_eq!(calls("site=\"refunds\"", "ran"), 1.0);
    assert_eq!(calls("site=\"busy\"", "ran"), 1.0);
    assert_eq!(calls("site=\"busy\"", "in_progress"), 1.0);
    assert_eq!(calls("site=\"busy\"", "replayed"), 1.0);
    assert_eq!(sample(&text, "idem_waits_total", &["site=\"busy\""]), 1.0);
    assert!(sample(&text, "idem_renewals_total", &["site=\"busy\""]) >= 1.0);

    // Latency per store operation: one claim per charge call (7), one completion per
    // run (3), as histograms.
    let op = |op: &str| {
        let op = format!("op=\"{op}\"");
        sample(&text, "idem_store_seconds_count", &[charge, &op])
    };
    assert_eq!(op("claim"), 7.0);
    assert_eq!(op("complete"), 3.0);
    assert!(text.contains("idem_store_seconds_bucket{"), "{text}");

    // Bounded labels: no tenant, no key.
    for unbounded in ["acme", "globex", "order-1", "refund-7"] {
        assert!(
            !text.contains(unbounded),
            "`{unbounded}` in a label:\n{text}"
        );
    }
}
