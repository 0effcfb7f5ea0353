//! A tonic payments service made idempotent twice over: the server's
//! `idem::grpc::IdempotencyLayer` replays whole answers by the
//! `idempotency-key` metadata, and the service's ledger, a trait written
//! with `#[tonic::async_trait]`, has `#[idempotent]` directly on its
//! method. The client's `idem::grpc::client::RetryLayer` gives each call
//! one key across its retries. Records live in SQLite.
//!
//! ```sh
//! cargo run -p idem-integration --example grpc_payments
//! ```
//!
//! The messages are prost structs written by hand and the routes use
//! tonic's `server::Grpc` directly, so the example needs no `protoc`; a
//! real service would generate both from its `.proto` with tonic-build.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use http::uri::PathAndQuery;
use idem::grpc::IdempotencyLayer;
use idem::grpc::client::RetryLayer;
use idem::{Idempotency, SqliteStore, idempotent};
use tonic::body::Body;
use tonic::transport::{Channel, Server};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

const CHARGE: &str = "/shop.Payments/Charge";

#[derive(Clone, PartialEq, prost::Message, serde::Serialize)]
struct ChargeRequest {
    #[prost(string, tag = "1")]
    order: String,
    #[prost(uint64, tag = "2")]
    cents: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ChargeReply {
    #[prost(uint64, tag = "1")]
    charge_id: u64,
}

/// The service's domain trait, in the shape tonic's generated traits have.
#[tonic::async_trait]
trait Ledger: Send + Sync {
    async fn debit(&self, order: String, cents: u64) -> Result<u64, idem::Error>;
}

struct SqlLedger {
    idem: Idempotency,
    debits: AtomicU64,
}

#[tonic::async_trait]
impl Ledger for SqlLedger {
    // Directly on the `#[tonic::async_trait]` method: once per order.
    #[idempotent(store = self.idem, key = order, scope = "ledger")]
    async fn debit(&self, order: String, cents: u64) -> Result<u64, idem::Error> {
        let _ = cents;
        Ok(self.debits.fetch_add(1, Ordering::SeqCst) + 1)
    }
}

#[derive(Clone)]
struct Payments {
    ledger: Arc<SqlLedger>,
}

impl tonic::server::NamedService for Payments {
    const NAME: &'static str = "shop.Payments";
}

impl tower::Service<http::Request<Body>> for Payments {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let ledger = Arc::clone(&self.ledger);
        Box::pin(async move {
            if request.uri().path() != CHARGE {
                return Ok(Status::unimplemented("no such method").into_http());
            }
            let charge = tower::service_fn(move |req: Request<ChargeRequest>| {
                let ledger = Arc::clone(&ledger);
                async move {
                    let req = req.into_inner();
                    let charge_id = ledger
                        .debit(req.order, req.cents)
                        .await
                        .map_err(|err| Status::unavailable(err.to_string()))?;
                    Ok::<_, Status>(Response::new(ChargeReply { charge_id }))
                }
            });
            let codec = ProstCodec::<ChargeReply, ChargeRequest>::default();
            Ok(tonic::server::Grpc::new(codec).unary(charge, request).await)
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::temp_dir().join("idem-grpc-payments.db");
    let _ = std::fs::remove_file(&path); // a fresh run each time
    let idem = Idempotency::new(SqliteStore::open(&path).await?);
    let ledger = Arc::new(SqlLedger {
        idem: idem.clone(),
        debits: AtomicU64::new(0),
    });

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let layer = IdempotencyLayer::new(idem).message::<ChargeRequest>(CHARGE);
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(Payments {
                ledger: Arc::clone(&ledger),
            })
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );

    let channel = Channel::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let channel = tower::ServiceBuilder::new()
        .layer(RetryLayer::new().unary(CHARGE).max_retries(3))
        .service(channel);
    let mut grpc = tonic::client::Grpc::new(channel);
    let key = idem::grpc::client::new_key();
    for attempt in 1..=2 {
        let mut request = Request::new(ChargeRequest {
            order: "order-1".into(),
            cents: 1200,
        });
        request
            .metadata_mut()
            .insert("idempotency-key", key.parse()?);
        grpc.ready().await?;
        let codec = ProstCodec::<ChargeRequest, ChargeReply>::default();
        let reply = grpc
            .unary(request, PathAndQuery::from_static(CHARGE), codec)
            .await?;
        let replayed = reply.metadata().get("idempotent-replayed").is_some();
        println!(
            "call {attempt}: charge {} (replayed: {replayed})",
            reply.get_ref().charge_id
        );
    }
    println!("debits run: {}", ledger.debits.load(Ordering::SeqCst));
    Ok(())
}
