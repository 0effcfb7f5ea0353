//! `IdempotencyService`: the layer around a tonic server's routes. A
//! guarded unary call is served on a task of its own, so its handler runs
//! to completion when the client cancels or its deadline passes.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Limited};
use tonic::Code;
use tonic::body::Body;
use tower::{Layer, Service};

use idem_core::{Failed, Reported};

use crate::answers::{bad_key, of_error, respond, status};
use crate::layer::{Config, IdempotencyLayer, Method};
use crate::scope::{self, BadKey, GrpcScope};
use crate::stored::{Replayed, StoredCall};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Answer = Response<Body>;

impl<S> Layer<S> for IdempotencyLayer {
    type Service = IdempotencyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IdempotencyService {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}

/// The service made by [`IdempotencyLayer`] around a tonic server's
/// routes (or any service of `http::Request<tonic::body::Body>`).
///
/// ```
/// use idem::grpc::{IdempotencyLayer, IdempotencyService};
/// use tower::Layer;
///
/// let layer = IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
/// let routes = tower::service_fn(|_: http::Request<tonic::body::Body>| async {
///     Ok::<_, std::convert::Infallible>(tonic::Status::ok("").into_http::<tonic::body::Body>())
/// });
/// let service: IdempotencyService<_> = layer.layer(routes);
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
    S::Error: Into<BoxError> + Send,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Answer;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let method = self.config.methods.get(request.uri().path()).cloned();
        let key = scope::key_of(request.headers());
        let config = Arc::clone(&self.config);
        let (method, key) = match (method, key) {
            (None, _) => return Box::pin(pass(inner, request)),
            (Some(method), Ok(None)) if method.key_field => {
                return Box::pin(keyed_by_field(config, inner, method, request));
            }
            (Some(method), Ok(None)) if !method.required => {
                return Box::pin(pass(inner, request));
            }
            (Some(_), Ok(None)) => return ready(bad_key(BadKey::Missing)),
            (Some(_), Err(bad)) => return ready(bad_key(bad)),
            (Some(method), Ok(Some(key))) => (method, key),
        };
        Box::pin(async move {
            let idem = config.idem.clone();
            detached(idem.spawn_detached(async move {
                let (parts, body) = request.into_parts();
                match read(&config, body).await {
                    Ok(body) => serve(config, inner, method, key, parts, body).await,
                    Err(answer) => Ok(answer),
                }
            }))
            .await
        })
    }
}

/// A guarded call served on a task of its own: hyper drops the request's
/// future when the client cancels or its deadline passes, and the handler
/// must not stop half-way with its claim released.
async fn detached(
    task: impl Future<Output = Result<Result<Answer, BoxError>, tokio::task::JoinError>>,
) -> Result<Answer, BoxError> {
    match task.await {
        Ok(answer) => answer,
        Err(err) => Ok(respond(status(
            Code::Internal,
            "IDEMPOTENCY_INTERNAL",
            format!("the handler did not finish: {err}"),
            None,
        ))),
    }
}

/// The request message, whole (a unary call's is one small frame), or the
/// answer to a body that cannot be read.
async fn read(config: &Config, body: Body) -> Result<Bytes, Answer> {
    match Limited::new(body, config.max_message_bytes).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) => {
            let message = format!("the request message could not be read: {err}");
            Err(respond(tonic::Status::new(Code::InvalidArgument, message)))
        }
    }
}

/// A call of a method keyed by a field, without the metadata: the message
/// is read and decoded first, for its key.
async fn keyed_by_field<S, B>(
    config: Arc<Config>,
    inner: S,
    method: Method,
    request: Request<Body>,
) -> Result<Answer, BoxError>
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = request.into_parts();
    let body = match read(&config, body).await {
        Ok(body) => body,
        Err(answer) => return Ok(answer),
    };
    let field = scope::decode(method.canonical.as_deref(), &body).and_then(|decoded| decoded.key);
    let key = match field.filter(|key| !key.is_empty()) {
        Some(key) => scope::valid(key.as_bytes()),
        None if method.required => Err(BadKey::Missing),
        None => {
            let request = Request::from_parts(parts, Body::new(http_body_util::Full::new(body)));
            return pass(inner, request).await;
        }
    };
    let key = match key {
        Ok(key) => key,
        Err(bad) => return Ok(respond(bad_key(bad))),
    };
    let idem = config.idem.clone();
    detached(idem.spawn_detached(serve(config, inner, method, key, parts, body))).await
}

fn ready(status: tonic::Status) -> Pin<Box<dyn Future<Output = Result<Answer, BoxError>> + Send>> {
    Box::pin(std::future::ready(Ok(respond(status))))
}

/// A call the layer does not guard, or one without a key where none is
/// required: untouched.
async fn pass<S, B>(mut inner: S, request: Request<Body>) -> Result<Answer, BoxError>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let response = inner.call(request).await.map_err(Into::into)?;
    Ok(response.map(Body::new))
}

/// What the handler answered when it is not stored.
enum NotKept {
    /// A code that releases the key: sent as it is.
    Released(Answer),
    /// The inner service failed (no answer at all).
    Inner(BoxError),
}

/// One guarded call: its scope and fingerprint, the claim, the handler,
/// the answer.
async fn serve<S, B>(
    config: Arc<Config>,
    inner: S,
    method: Method,
    key: String,
    parts: http::request::Parts,
    body: Bytes,
) -> Result<Answer, BoxError>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let principal = match &config.principal {
        Some(principal) => principal(&parts),
        None => scope::credential_hash(&parts.headers),
    };
    let scope = GrpcScope {
        path: parts.uri.path().to_owned(),
        principal,
    };
    let decoded = scope::decode(method.canonical.as_deref(), &body);
    let fingerprint = match scope::fingerprint(decoded, &body) {
        Ok(fingerprint) => fingerprint,
        Err(err) => return Ok(respond(of_error(&idem_core::Error::Codec(err.into())))),
    };
    let mut call = config
        .idem
        .call(&scope, key.as_str())
        .ttl(config.ttl)
        .wait(config.wait)
        .fingerprint_digest(fingerprint);
    if let Some(lease) = config.lease {
        call = call.lease(lease);
    }
    if let Some(tombstone) = config.tombstone {
        call = call.tombstone(tombstone);
    }
    let request = Request::from_parts(parts, Body::new(http_body_util::Full::new(body)));
    let mut first = None;
    let slot = &mut first;
    let reported = call
        .run_apart(|| attempt(&config, inner, request, slot))
        .await;
    answer(reported, first)
}

/// Runs the handler and captures its answer; `first` gets the answer as
/// the handler gave it (every metadata entry), for this caller.
async fn attempt<S, B>(
    config: &Config,
    mut inner: S,
    request: Request<Body>,
    first: &mut Option<Answer>,
) -> Result<StoredCall, NotKept>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let response = inner
        .call(request)
        .await
        .map_err(|err| NotKept::Inner(err.into()))?;
    let (parts, body) = response.into_parts();
    let collected = body
        .collect()
        .await
        .map_err(|err| NotKept::Inner(err.into()))?;
    let trailers = collected.trailers().cloned();
    let bytes = collected.to_bytes();
    let stored = StoredCall::capture(
        &parts.headers,
        bytes.clone(),
        trailers.as_ref(),
        &config.stored_metadata,
    );
    let mut whole = Response::from_parts(parts, Body::new(Replayed::new(bytes, trailers)));
    whole.headers_mut().remove(crate::IDEMPOTENT_REPLAYED);
    if (config.store_code)(Code::from_i32(stored.code)) {
        *first = Some(whole);
        Ok(stored)
    } else {
        Err(NotKept::Released(whole))
    }
}

/// The caller's answer: the handler's own, the stored one replayed, or
/// idem's refusal.
fn answer(
    reported: Reported<Result<StoredCall, Failed<NotKept>>>,
    first: Option<Answer>,
) -> Result<Answer, BoxError> {
    match reported.result {
        Ok(stored) if reported.replayed => Ok(stored.response(true)),
        Ok(stored) => Ok(first.unwrap_or_else(|| stored.response(false))),
        // The handler ran but its answer could not be stored (the store
        // failed at completion, the lease was lost): the caller still gets
        // what happened.
        Err(Failed::Idem(err)) => match first {
            Some(first) => {
                tracing::warn!(error = %err, "idem: gRPC answer sent but not stored");
                Ok(first)
            }
            None => Ok(respond(of_error(&err))),
        },
        Err(Failed::Body { error, .. }) => match error {
            NotKept::Released(answer) => Ok(answer),
            NotKept::Inner(err) => Err(err),
        },
    }
}
