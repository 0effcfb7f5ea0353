//! A small gRPC service over real HTTP/2 on loopback, for the tonic
//! layer's tests: prost messages written by hand and tonic's own
//! `server::Grpc` / `client::Grpc` (no `.proto`, no `protoc`, no build
//! script: the messages are three structs, and the tests read what goes
//! on the wire).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http::uri::PathAndQuery;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::{Channel, Server};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

pub(crate) const CHARGE: &str = "/test.Payments/Charge";
pub(crate) const WATCH: &str = "/test.Payments/Watch";

/// `order` says how the handler behaves: `sleep:MS` sleeps first,
/// `unavailable`, `not-found` and `invalid` answer those codes.
#[derive(Clone, PartialEq, prost::Message, serde::Serialize)]
pub(crate) struct ChargeRequest {
    #[prost(string, tag = "1")]
    pub order: String,
    #[prost(uint64, tag = "2")]
    pub cents: u64,
    #[prost(map = "string, string", tag = "3")]
    pub labels: HashMap<String, String>,
    /// AIP-155's request id, for `IdempotencyLayer::key_field`.
    #[prost(string, tag = "4")]
    pub request_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ChargeReply {
    #[prost(uint32, tag = "1")]
    pub run: u32,
}

/// The handler's runs, counted when each starts and ends.
#[derive(Default)]
pub(crate) struct Runs {
    pub started: AtomicU32,
    pub finished: AtomicU32,
}

impl Runs {
    pub(crate) fn started(&self) -> u32 {
        self.started.load(Ordering::SeqCst)
    }
    pub(crate) fn finished(&self) -> u32 {
        self.finished.load(Ordering::SeqCst)
    }
}

async fn charge(runs: Arc<Runs>, request: ChargeRequest) -> Result<Response<ChargeReply>, Status> {
    let run = runs.started.fetch_add(1, Ordering::SeqCst) + 1;
    if let Some(ms) = request.order.strip_prefix("sleep:") {
        tokio::time::sleep(Duration::from_millis(ms.parse().unwrap_or(0))).await;
    }
    runs.finished.fetch_add(1, Ordering::SeqCst);
    match request.order.as_str() {
        "unavailable" => Err(Status::unavailable(format!("run {run} unavailable"))),
        "not-found" => Err(Status::not_found(format!("run {run}: no such order"))),
        "invalid" => Err(Status::invalid_argument(format!("run {run}: bad order"))),
        _ => {
            let mut response = Response::new(ChargeReply { run });
            response
                .metadata_mut()
                .insert("x-run", run.to_string().parse().unwrap());
            Ok(response)
        }
    }
}

/// The service's routes: `Charge` (unary) and `Watch` (server streaming:
/// `cents` replies).
#[derive(Clone)]
pub(crate) struct Payments {
    pub(crate) runs: Arc<Runs>,
}

impl NamedService for Payments {
    const NAME: &'static str = "test.Payments";
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl tower::Service<http::Request<Body>> for Payments {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let runs = Arc::clone(&self.runs);
        Box::pin(async move {
            let mut grpc =
                tonic::server::Grpc::new(ProstCodec::<ChargeReply, ChargeRequest>::default());
            Ok(match request.uri().path() {
                CHARGE => {
                    let unary = tower::service_fn(move |req: Request<ChargeRequest>| {
                        charge(Arc::clone(&runs), req.into_inner())
                    });
                    grpc.unary(unary, request).await
                }
                WATCH => {
                    let stream = tower::service_fn(move |req: Request<ChargeRequest>| {
                        runs.started.fetch_add(1, Ordering::SeqCst);
                        let n = req.into_inner().cents as u32;
                        let items = (1..=n).map(|run| Ok(ChargeReply { run }));
                        let stream: Pin<
                            Box<dyn futures::Stream<Item = Result<ChargeReply, Status>> + Send>,
                        > = Box::pin(futures::stream::iter(items));
                        async move { Ok::<_, Status>(Response::new(stream)) }
                    });
                    grpc.server_streaming(stream, request).await
                }
                _ => Status::unimplemented("no such method").into_http(),
            })
        })
    }
}

/// Serves `Payments` behind `layer` on a loopback port.
pub(crate) async fn serve(layer: idem::grpc::IdempotencyLayer) -> (SocketAddr, Arc<Runs>) {
    let runs = Arc::new(Runs::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let service = Payments {
        runs: Arc::clone(&runs),
    };
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(service)
            .serve_with_incoming(incoming),
    );
    (addr, runs)
}

/// Serves `Payments` behind `layer` until `stop` fires, then shuts down
/// gracefully: the server stops taking calls and ends its connections.
pub(crate) async fn serve_until(
    layer: idem::grpc::IdempotencyLayer,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> (
    SocketAddr,
    Arc<Runs>,
    tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
) {
    let runs = Arc::new(Runs::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let service = Payments {
        runs: Arc::clone(&runs),
    };
    let server = tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stop.await;
            }),
    );
    (addr, runs, server)
}

/// A client of `addr` over HTTP/2.
pub(crate) async fn connect(addr: SocketAddr) -> Client {
    let channel = channel(addr).await;
    // The client layer with no method guarded: a plain channel.
    let transport = tower::Layer::layer(&idem::grpc::client::RetryLayer::new(), channel);
    Client {
        grpc: tonic::client::Grpc::new(Transport::new(transport)),
    }
}

/// A client of `addr` whose channel is behind the client `layer`.
pub(crate) async fn connect_with(
    addr: SocketAddr,
    layer: idem::grpc::client::RetryLayer,
) -> Client {
    let channel = tower::ServiceBuilder::new()
        .layer(layer)
        .service(channel(addr).await);
    Client {
        grpc: tonic::client::Grpc::new(Transport::new(channel)),
    }
}

async fn channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Serves `Payments` behind `layer` and, outside it, a proxy that drops
/// the first answer of `Charge` once the handler has given it (the client
/// sees `UNAVAILABLE`, as from a connection lost after the send).
pub(crate) async fn serve_dropping_first(
    layer: idem::grpc::IdempotencyLayer,
) -> (SocketAddr, Arc<Runs>) {
    let runs = Arc::new(Runs::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let service = Payments {
        runs: Arc::clone(&runs),
    };
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drop_first = tower::layer::layer_fn(move |inner: idem::grpc::IdempotencyService<_>| {
        let dropped = Arc::clone(&dropped);
        tower::service_fn(move |request: http::Request<Body>| {
            let mut inner = inner.clone();
            let dropped = Arc::clone(&dropped);
            async move {
                let response = tower::Service::call(&mut inner, request).await?;
                if dropped.swap(true, Ordering::SeqCst) {
                    return Ok::<_, BoxError>(response);
                }
                let _ = http_body_util::BodyExt::collect(response.into_body()).await;
                Ok(Status::unavailable("the proxy dropped the answer").into_http())
            }
        })
    });
    tokio::spawn(
        Server::builder()
            .layer(tower::ServiceBuilder::new().layer(drop_first).layer(layer))
            .add_service(service)
            .serve_with_incoming(incoming),
    );
    (addr, runs)
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// Either transport, under one concrete error type (a boxed error in
/// tonic's `Into<StdError>` bounds makes a spawned call's future not
/// `Send`, a known rustc limitation).
type Transport = tower::util::BoxCloneService<
    http::Request<Body>,
    http::Response<Body>,
    idem::grpc::client::TransportError,
>;

#[derive(Clone)]
pub(crate) struct Client {
    grpc: tonic::client::Grpc<Transport>,
}

impl Client {
    /// `Charge` with `request`, sent with `key` as its `idempotency-key`.
    pub(crate) async fn charge(
        &mut self,
        key: Option<&str>,
        request: ChargeRequest,
    ) -> Result<Response<ChargeReply>, Status> {
        self.charge_request(key, Request::new(request)).await
    }

    pub(crate) async fn charge_request(
        &mut self,
        key: Option<&str>,
        mut request: Request<ChargeRequest>,
    ) -> Result<Response<ChargeReply>, Status> {
        if let Some(key) = key {
            request
                .metadata_mut()
                .insert("idempotency-key", key.parse().unwrap());
        }
        self.grpc.ready().await.unwrap();
        let codec = ProstCodec::<ChargeRequest, ChargeReply>::default();
        self.grpc
            .unary(request, PathAndQuery::from_static(CHARGE), codec)
            .await
    }

    /// `Watch`: the replies of a server stream.
    pub(crate) async fn watch(&mut self, key: &str, n: u64) -> Result<Vec<u32>, Status> {
        let mut request = Request::new(ChargeRequest {
            order: "watch".into(),
            cents: n,
            labels: HashMap::new(),
            request_id: String::new(),
        });
        request
            .metadata_mut()
            .insert("idempotency-key", key.parse().unwrap());
        self.grpc.ready().await.unwrap();
        let codec = ProstCodec::<ChargeRequest, ChargeReply>::default();
        let mut stream = self
            .grpc
            .server_streaming(request, PathAndQuery::from_static(WATCH), codec)
            .await?
            .into_inner();
        let mut runs = Vec::new();
        while let Some(reply) = stream.message().await? {
            runs.push(reply.run);
        }
        Ok(runs)
    }
}

pub(crate) fn order(order: &str) -> ChargeRequest {
    ChargeRequest {
        order: order.into(),
        cents: 1200,
        labels: HashMap::new(),
        request_id: String::new(),
    }
}

/// A map entry on the wire: a `map<string, string>` field is a repeated
/// message of key (1) and value (2), so a list of these sends the map's
/// entries in the order given.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Entry {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `ChargeRequest` as written on the wire, its map entries in a chosen
/// order.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ChargeRequestWire {
    #[prost(string, tag = "1")]
    pub order: String,
    #[prost(uint64, tag = "2")]
    pub cents: u64,
    #[prost(message, repeated, tag = "3")]
    pub labels: Vec<Entry>,
}

impl Client {
    /// `Charge` with its map entries in the order of `labels`.
    pub(crate) async fn charge_wire(
        &mut self,
        key: &str,
        order: &str,
        labels: &[(&str, &str)],
    ) -> Result<Response<ChargeReply>, Status> {
        let wire = ChargeRequestWire {
            order: order.into(),
            cents: 1200,
            labels: labels
                .iter()
                .map(|(key, value)| Entry {
                    key: (*key).into(),
                    value: (*value).into(),
                })
                .collect(),
        };
        let mut request = Request::new(wire);
        request
            .metadata_mut()
            .insert("idempotency-key", key.parse().unwrap());
        self.grpc.ready().await.unwrap();
        let codec = ProstCodec::<ChargeRequestWire, ChargeReply>::default();
        self.grpc
            .unary(request, PathAndQuery::from_static(CHARGE), codec)
            .await
    }
}
