//! `IdempotencyService`: the layer around an inner service, each guarded
//! request served on a task of its own.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::{Request, Response};
use bytes::Bytes;
use tower::{Layer, Service};

use crate::answers::{handler_panicked, runtime_stopped};
use crate::layer::{Config, IdempotencyLayer};
use crate::request;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S> Layer<S> for IdempotencyLayer {
    type Service = IdempotencyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IdempotencyService {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}

/// The service made by [`IdempotencyLayer`] around an inner service.
///
/// ```
/// use axum::{Router, routing::post};
/// use idem::http::{IdempotencyLayer, IdempotencyService};
/// use tower::Layer;
///
/// let layer = IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
/// // Around a whole router (no matched route is known there: the scope
/// // uses the URI path).
/// let service: IdempotencyService<Router> = layer.layer(Router::new().route("/", post(|| async {})));
/// # let _ = service;
/// ```
#[derive(Clone)]
pub struct IdempotencyService<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S: fmt::Debug> fmt::Debug for IdempotencyService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, B> Service<Request<Body>> for IdempotencyService<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // The ready service handles this request; the clone takes its place.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let method = request.method();
        if !self.config.methods.contains(method) && !self.config.state_updates.contains(method) {
            return Box::pin(request::pass(inner, request));
        }
        // On a task of its own: hyper drops this future when the client
        // goes away, and the handler must not stop half-way through with
        // its claim released, or the client's retry would run it again.
        // The task answers as soon as the response's head is known, and
        // goes on reading its body (to the client and into the record).
        let config = Arc::clone(&self.config);
        let (reply, answer) = tokio::sync::oneshot::channel();
        let detached =
            config
                .idem
                .spawn_detached(request::serve(Arc::clone(&config), inner, request, reply));
        Box::pin(async move {
            match answer.await {
                Ok(answer) => answer,
                Err(_) => match detached.await {
                    Err(err) if err.is_panic() => Ok(handler_panicked()),
                    _ => Ok(runtime_stopped()),
                },
            }
        })
    }
}
