//! Both halves of idempotency over real HTTP: the payments server of the
//! `axum_payments` example behind a proxy that loses responses, and a
//! reqwest client with `idem::client::IdempotencyMiddleware` calling it.
//! Each attempt is printed (the middleware's `idem.client.attempt` spans);
//! each payment is charged once however many attempts it took.
//!
//! Run: `cargo run -p idem-integration --example client_retries`

#[allow(dead_code)]
#[path = "axum_payments/app.rs"]
mod app;

#[allow(dead_code)]
#[path = "client_retries/lossy_proxy.rs"]
mod lossy_proxy;

use std::time::Duration;

use idem::client::IdempotencyMiddleware;
use idem::{Idempotency, MemoryStore};
use lossy_proxy::LossyProxy;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

const ORDER: &str = r#"{"amount_cents": 1200, "currency": "EUR"}"#;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "idem::client=debug,lossy_proxy=info".into()),
        )
        .with_target(false)
        .without_time()
        .init();

    // The server: the payments app on a free loopback port, its card
    // gateway taking 200 ms per charge.
    let options = app::Options::default();
    let payments = app::Payments::new(Idempotency::new(MemoryStore::new()), &options);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let server = listener.local_addr()?;
    let router = app::router(payments.clone(), &options);
    tokio::spawn(async move { axum::serve(listener, router).await });
    let proxy = LossyProxy::start(server).await;
    let url = format!("http://{}/payments", proxy.addr);
    println!(
        "payments on http://{server}, through a lossy proxy on {}",
        proxy.addr
    );

    // The client: a key per payment, kept for its retries.
    let client: ClientWithMiddleware =
        ClientBuilder::new(reqwest::Client::builder().no_proxy().build()?)
            .with(IdempotencyMiddleware::new().deadline(Duration::from_secs(20)))
            .build();

    println!(
        "\n1. The proxy loses the first two responses: the payment ran, the client never heard."
    );
    proxy.lose_next(2);
    pay(&client, &url, None).await?;

    println!(
        "\n2. The client gives up after 100 ms, the gateway takes 200 ms: 409 while it runs, then its stored answer."
    );
    pay(&client, &url, Some(Duration::from_millis(100))).await?;

    println!(
        "\n2 payments, {} handler runs, {} gateway charges, {} responses lost.",
        payments.handler_runs(),
        payments.gateway().requests(),
        proxy.lost(),
    );
    Ok(())
}

/// One logical payment: `POST /payments` through the middleware, with a
/// timeout per attempt if given.
async fn pay(
    client: &ClientWithMiddleware,
    url: &str,
    timeout: Option<Duration>,
) -> anyhow::Result<()> {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .body(ORDER);
    if let Some(timeout) = timeout {
        request = request.timeout(timeout);
    }
    let answer = request.send().await?;
    let status = answer.status();
    let replayed = answer.headers().contains_key("idempotent-replayed");
    let body = answer.text().await?;
    println!("-> {status} (replayed: {replayed}) {body}");
    Ok(())
}
