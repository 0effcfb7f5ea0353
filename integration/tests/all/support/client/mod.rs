//! Helpers of the client tests: servers behind idem's own layer on loopback,
//! a recorder of what reached them, and clients with the middleware.

#![allow(dead_code)]

// The example's app, shared with the HTTP tests' helpers.
pub(crate) use super::http::app;

#[path = "../../../../examples/client_retries/lossy_proxy.rs"]
pub(crate) mod lossy_proxy;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use bytes::Bytes;
use idem::client::IdempotencyMiddleware;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

/// One request as it reached the server, outside every layer.
#[derive(Debug, Clone)]
pub(crate) struct Arrival {
    pub method: String,
    /// The raw `Idempotency-Key` header, if any.
    pub key: Option<String>,
    pub body: Bytes,
    /// The server's status, once it answered on a live connection.
    pub status: Option<u16>,
}

/// What reached a server, in order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recorder(Arc<Mutex<Vec<Arrival>>>);

impl Recorder {
    pub(crate) fn arrivals(&self) -> Vec<Arrival> {
        self.0.lock().unwrap().clone()
    }

    /// The arrivals with this raw key header.
    pub(crate) fn with_key(&self, key: &str) -> Vec<Arrival> {
        self.arrivals()
            .into_iter()
            .filter(|arrival| arrival.key.as_deref() == Some(key))
            .collect()
    }

    /// `router` with every request recorded before it runs: the attempts a
    /// client sent, counted where they arrive.
    pub(crate) fn around(&self, router: Router) -> Router {
        let recorder = self.clone();
        router.layer(middleware::from_fn(move |request: Request, next: Next| {
            let recorder = recorder.clone();
            async move { recorder.record(request, next).await }
        }))
    }

    async fn record(&self, request: Request, next: Next) -> Response {
        let (parts, body) = request.into_parts();
        let body = axum::body::to_bytes(body, usize::MAX)
            .await
            .expect("a readable request body");
        let index = {
            let mut arrivals = self.0.lock().unwrap();
            arrivals.push(Arrival {
                method: parts.method.to_string(),
                key: parts
                    .headers
                    .get("idempotency-key")
                    .map(|key| key.to_str().unwrap().to_owned()),
                body: body.clone(),
                status: None,
            });
            arrivals.len() - 1
        };
        let response = next.run(Request::from_parts(parts, Body::from(body))).await;
        self.0.lock().unwrap()[index].status = Some(response.status().as_u16());
        response
    }
}

/// `router` served on a free loopback port.
pub(crate) async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// A client with `middleware`, direct to loopback whatever the
/// environment's proxy settings.
pub(crate) fn client(middleware: IdempotencyMiddleware) -> ClientWithMiddleware {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    ClientBuilder::new(client).with(middleware).build()
}

/// The middleware with short waits, so a test's retries take milliseconds
/// (a `Retry-After` is still waited in full).
pub(crate) fn quick() -> IdempotencyMiddleware {
    IdempotencyMiddleware::new().backoff(Duration::from_millis(10), Duration::from_millis(50))
}

/// Whether a raw key header is a structured-field string holding a UUID v4.
pub(crate) fn is_uuid_v4_string(raw: &str) -> bool {
    let Some(inner) = raw.strip_prefix('"').and_then(|raw| raw.strip_suffix('"')) else {
        return false;
    };
    let groups: Vec<&str> = inner.split('-').collect();
    let lengths: Vec<usize> = groups.iter().map(|group| group.len()).collect();
    lengths == [8, 4, 4, 4, 12]
        && inner
            .chars()
            .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
        && groups[2].starts_with('4')
        && groups[3].starts_with(['8', '9', 'a', 'b'])
}
