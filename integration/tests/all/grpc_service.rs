//! `#[idempotent]` directly on a tonic service method (SPEC §14, §3):
//! a trait in the shape tonic-build generates (`#[tonic::async_trait]`,
//! `Result<Response<M>, Status>`), served over real HTTP/2 with no layer.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use idem::{Idempotency, MemoryStore, idempotent};
use tonic::body::Body;
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;
use tonic_types::StatusExt;

use crate::support::grpc::{self, CHARGE, ChargeReply, ChargeRequest, Runs, order};

/// As tonic-build writes a service's trait.
#[tonic::async_trait]
trait Payments: Send + Sync + 'static {
    async fn charge(
        &self,
        request: Request<ChargeRequest>,
    ) -> std::result::Result<Response<ChargeReply>, Status>;
}

struct Ledger {
    idem: Idempotency,
    runs: Arc<Runs>,
}

#[tonic::async_trait]
impl Payments for Ledger {
    // The key is AIP-155's `request_id`; the fingerprint the message.
    #[idempotent(store = self.idem, key = request.get_ref().request_id, fingerprint = request.get_ref(), wait = "5s")]
    async fn charge(
        &self,
        request: Request<ChargeRequest>,
    ) -> Result<Response<ChargeReply>, Status> {
        let run = self.runs.started.fetch_add(1, Ordering::SeqCst) + 1;
        let order = request.into_inner().order;
        if let Some(ms) = order.strip_prefix("sleep:") {
            tokio::time::sleep(Duration::from_millis(ms.parse().unwrap_or(0))).await;
        }
        self.runs.finished.fetch_add(1, Ordering::SeqCst);
        match order.as_str() {
            "unavailable" => return Err(Status::unavailable(format!("run {run}"))),
            "not-found" => Err(Status::not_found(format!("run {run}: no such order")))?,
            _ => {}
        }
        let mut response = Response::new(ChargeReply { run });
        response
            .metadata_mut()
            .insert("x-run", run.to_string().parse().unwrap());
        Ok(response)
    }
}

/// The routes, as tonic-build's `PaymentsServer` serves the trait.
#[derive(Clone)]
struct PaymentsServer(Arc<Ledger>);

impl tonic::server::NamedService for PaymentsServer {
    const NAME: &'static str = "test.Payments";
}

impl tower::Service<http::Request<Body>> for PaymentsServer {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let ledger = Arc::clone(&self.0);
        Box::pin(async move {
            if request.uri().path() != CHARGE {
                return Ok(Status::unimplemented("no such method").into_http());
            }
            let charge = tower::service_fn(move |req: Request<ChargeRequest>| {
                let ledger = Arc::clone(&ledger);
                async move { ledger.charge(req).await }
            });
            let codec = ProstCodec::<ChargeReply, ChargeRequest>::default();
            Ok(tonic::server::Grpc::new(codec).unary(charge, request).await)
        })
    }
}

async fn serve() -> (grpc::Client, Arc<Runs>) {
    let runs = Arc::new(Runs::default());
    let ledger = Ledger {
        idem: Idempotency::new(MemoryStore::new()),
        runs: Arc::clone(&runs),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(PaymentsServer(Arc::new(ledger)))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    (grpc::connect(addr).await, runs)
}

fn with_id(order_name: &str, request_id: &str) -> ChargeRequest {
    ChargeRequest {
        request_id: request_id.into(),
        ..order(order_name)
    }
}

#[tokio::test]
async fn an_annotated_service_method_called_twice_runs_once() {
    let (mut client, runs) = serve().await;
    let first = client.charge(None, with_id("o-1", "r-1")).await.unwrap();
    let again = client.charge(None, with_id("o-1", "r-1")).await.unwrap();
    assert_eq!(runs.started(), 1);
    assert_eq!(first.get_ref(), again.get_ref());
    assert_eq!(first.metadata().get("x-run"), again.metadata().get("x-run"));
    assert_eq!(first.metadata().get("idempotent-replayed"), None);
    assert_eq!(again.metadata().get("idempotent-replayed").unwrap(), "true");
    // Another message under the key: idem's answer, with its ErrorInfo.
    let status = client
        .charge(None, with_id("o-2", "r-1"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    let info = status.get_details_error_info().expect("an ErrorInfo");
    assert_eq!(
        (info.domain.as_str(), info.reason.as_str()),
        ("idemkit", "IDEMPOTENCY_KEY_REUSED")
    );
    assert_eq!(runs.started(), 1);
}

#[tokio::test]
async fn statuses_are_stored_or_released_by_code() {
    let (mut client, runs) = serve().await;
    let first = client
        .charge(None, with_id("not-found", "r-n"))
        .await
        .unwrap_err();
    let again = client
        .charge(None, with_id("not-found", "r-n"))
        .await
        .unwrap_err();
    assert_eq!(
        (first.code(), again.code()),
        (Code::NotFound, Code::NotFound)
    );
    assert_eq!(first.message(), again.message());
    assert_eq!(again.metadata().get("idempotent-replayed").unwrap(), "true");
    assert_eq!(runs.started(), 1, "NOT_FOUND is stored");

    let first = client
        .charge(None, with_id("unavailable", "r-u"))
        .await
        .unwrap_err();
    let again = client
        .charge(None, with_id("unavailable", "r-u"))
        .await
        .unwrap_err();
    assert_eq!(
        (first.code(), again.code()),
        (Code::Unavailable, Code::Unavailable)
    );
    assert_ne!(first.message(), again.message());
    assert_eq!(runs.started(), 3, "UNAVAILABLE is released: the retry ran");
}

#[tokio::test]
async fn concurrent_duplicates_wait_for_the_first_answer() {
    let (client, runs) = serve().await;
    let calls = (0..10).map(|_| {
        let mut client = client.clone();
        tokio::spawn(async move { client.charge(None, with_id("sleep:300", "r-w")).await })
    });
    for answer in futures::future::join_all(calls).await {
        assert_eq!(answer.unwrap().unwrap().get_ref().run, 1);
    }
    assert_eq!(runs.started(), 1);
}
