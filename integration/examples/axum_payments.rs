//! A payments service over HTTP whose `POST /payments` is idempotent: send
//! it twice with the same `Idempotency-Key` and the card is charged once;
//! the second answer is the first one replayed.
//!
//! Run: `cargo run -p idem-integration --example axum_payments`
//! (`-- --redis URL`, `-- --postgres URL` or `-- --sqlite PATH` choose a
//! store other than memory; each needs its cargo feature). It listens on
//! `IDEM_EXAMPLE_ADDR`, by default `127.0.0.1:3000`. Then, from another
//! terminal:
//!
//! ```text
//! curl -i http://127.0.0.1:3000/payments \
//!   -H 'Idempotency-Key: "order-1"' -H 'Content-Type: application/json' \
//!   -d '{"amount_cents": 1200, "currency": "EUR"}'
//! ```
//!
//! and again: the same receipt, with `Idempotent-Replayed: true`. The README's
//! HTTP section has the whole session.
//!
//! Refunds use a key the server issues (token mode) and the payment's
//! version (`If-Match`):
//!
//! ```text
//! curl -i http://127.0.0.1:3000/payments/pay_… # ETag: "1"
//! curl -s -X POST http://127.0.0.1:3000/tokens  # {"token":"AQAA…","expires_in":3600}
//! curl -i http://127.0.0.1:3000/payments/pay_…/refunds \
//!   -H 'Idempotency-Key: "AQAA…"' -H 'If-Match: "1"' \
//!   -H 'Content-Type: application/json' -d '{"amount_cents": 200}'
//! ```
//!
//! 201 with `ETag: "2"`; the same request again replays it; a refund
//! against `"1"` with a new token is 412, one without `If-Match` 428, one
//! with a key of the client's own 400. Tokens are signed with
//! `IDEM_TOKEN_SECRET` (a demo secret when unset).

// Some of the app's items are hooks for the tests, which include it too.
#[allow(dead_code)]
#[path = "axum_payments/app.rs"]
mod app;

use std::net::SocketAddr;
use std::time::Duration;

use idem::Idempotency;

const USAGE: &str = "usage: axum_payments [--redis URL | --postgres URL | --sqlite PATH]

Serves POST /payments, GET /payments/{id}, POST /payments/{id}/refunds
and POST /tokens on IDEM_EXAMPLE_ADDR
(default 127.0.0.1:3000), storing idempotency records in memory unless a
store is chosen.";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,idem=debug".into()),
        )
        .init();

    let args: Vec<String> = std::env::args().skip(1).collect();
    let (idem, store_name) = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => (
            Idempotency::new(idem::MemoryStore::new()),
            "memory".to_owned(),
        ),
        ["--redis", url] => (redis(url).await?, format!("redis at {url}")),
        ["--postgres", url] => (postgres(url).await?, format!("postgres at {url}")),
        ["--sqlite", path] => (sqlite(path).await?, format!("sqlite at {path}")),
        ["-h" | "--help"] => {
            println!("{USAGE}");
            return Ok(());
        }
        _ => refuse(USAGE),
    };

    let addr: SocketAddr = std::env::var("IDEM_EXAMPLE_ADDR")
        .unwrap_or_else(|_| "127.0.0.1:3000".into())
        .parse()?;
    let mut options = app::Options::default();
    if let Ok(secret) = std::env::var("IDEM_TOKEN_SECRET") {
        options.token_secret = secret;
    }
    let router = app::router(app::Payments::new(idem.clone(), &options), &options);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!(
        "payments on http://{} (store: {store_name}); Ctrl-C stops",
        listener.local_addr()?
    );
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    // Requests whose clients left still run on their own tasks: let them
    // finish and store their answers before the process exits.
    let still_running = idem.drain(Duration::from_secs(30)).await;
    if still_running > 0 {
        eprintln!(
            "{still_running} requests still running at exit; their keys run again after the lease"
        );
    }
    Ok(())
}

#[cfg(feature = "redis")]
async fn redis(url: &str) -> anyhow::Result<Idempotency> {
    Ok(Idempotency::new(idem::RedisStore::connect(url).await?))
}

#[cfg(not(feature = "redis"))]
async fn redis(_: &str) -> anyhow::Result<Idempotency> {
    refuse(
        "--redis needs the `redis` feature: cargo run -p idem-integration --example axum_payments -- --redis URL",
    )
}

#[cfg(feature = "postgres")]
async fn postgres(url: &str) -> anyhow::Result<Idempotency> {
    let store = idem::PostgresStore::connect(url).await?;
    store.migrate().await?;
    Ok(Idempotency::new(store))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(_: &str) -> anyhow::Result<Idempotency> {
    refuse(
        "--postgres needs the `postgres` feature: cargo run -p idem-integration --example axum_payments -- --postgres URL",
    )
}

#[cfg(feature = "sqlite")]
async fn sqlite(path: &str) -> anyhow::Result<Idempotency> {
    Ok(Idempotency::new(idem::SqliteStore::open(path).await?))
}

#[cfg(not(feature = "sqlite"))]
async fn sqlite(_: &str) -> anyhow::Result<Idempotency> {
    refuse(
        "--sqlite needs the `sqlite` feature: cargo run -p idem-integration --example axum_payments -- --sqlite PATH",
    )
}

/// A command-line mistake: said plainly, without a backtrace.
fn refuse(message: &str) -> ! {
    eprintln!("{message}");
    std::process::exit(2)
}
