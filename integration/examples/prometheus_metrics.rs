//! idem's metrics on a Prometheus endpoint: `metrics-exporter-prometheus`
//! installed as the `metrics` recorder, serving `/metrics` over HTTP.
//!
//! `cargo run -p idem-integration --example prometheus_metrics`, then
//! `curl http://127.0.0.1:9464/metrics` (or set `METRICS_ADDR`).
//! `integration/tests/metrics_prometheus.rs` runs this file's functions
//! and scrapes the endpoint.

use std::net::SocketAddr;
use std::time::Duration;

use idem::{Idempotency, MemoryStore, idempotent};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

/// Installs the Prometheus recorder, serving on `addr`. Store latencies
/// are true histograms (buckets from 0.1 ms to 1 s) rather than summaries.
pub(crate) fn install(addr: SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(
            Matcher::Full("idem_store_seconds".into()),
            &[0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0],
        )?
        .install()?;
    Ok(())
}

/// A charge per tenant: the tenant is part of the scope (so of the record),
/// but not of the metrics, which carry this fn's path as their label.
#[idempotent(store = idem, skip(idem), key = order, scope = ("charges", tenant), ttl = "1h")]
pub(crate) async fn charge(
    idem: &Idempotency,
    tenant: &str,
    order: &str,
    cents: u64,
) -> Result<u64, idem::Error> {
    Ok(cents)
}

/// Real calls: 3 tenants' first charges run, their retries replay, one
/// reuse of a key with another amount is refused, and a builder call
/// counts under its own site.
pub(crate) async fn make_calls(idem: &Idempotency) {
    for tenant in ["acme", "globex", "initech"] {
        charge(idem, tenant, "order-1", 1200).await.unwrap();
        charge(idem, tenant, "order-1", 1200).await.unwrap();
    }
    assert!(charge(idem, "acme", "order-1", 999).await.is_err());
    let refund: Result<u64, idem::Error> = idem
        .call(&("refunds", "acme"), "refund-7")
        .site(idem::call_site!("refunds"))
        .ttl(Duration::from_secs(3600))
        .run(|| async { Ok(300) })
        .await;
    refund.unwrap();
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr: SocketAddr = std::env::var("METRICS_ADDR")
        .unwrap_or_else(|_| "127.0.0.1:9464".into())
        .parse()?;
    install(addr)?;
    make_calls(&Idempotency::new(MemoryStore::new())).await;
    println!("serving idem's metrics on http://{addr}/metrics; Ctrl-C to stop");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
