//! What the layer does with one request: read its key, scope and
//! fingerprint (`prepare`), run the inner service under a claim (`run`),
//! and turn the outcome into the answer (`answer`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::http::request::Parts;
use axum::http::{Request, Response, header};
use axum::response::IntoResponse;
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tower::Service;

use crate::http::layer::Config;
use crate::http::stored::StoredResponse;
use crate::http::{IdempotencyKey, Problem, key};
use crate::{Digester, Error, Fingerprint, KeyHasher, KeyPart, Reported};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How the guarded run ended when it has no response to store.
enum Failure<E> {
    /// idem answered instead of the inner service.
    Idem(Error),
    /// The inner service answered with a status that is not stored (or a
    /// response too large to store): sent as it is, claim released.
    Unstored(Response<Body>),
    /// The inner service failed.
    Inner(E),
}

impl<E> From<Error> for Failure<E> {
    fn from(err: Error) -> Self {
        Failure::Idem(err)
    }
}

/// A request ready to be claimed: its key, scope and fingerprint read.
struct Prepared {
    key: IdempotencyKey,
    scope: HttpScope,
    fingerprint: Fingerprint,
    request: Request<Body>,
}

/// Handles one request of a method the layer guards.
pub(crate) async fn handle<S, B>(
    config: Arc<Config>,
    inner: S,
    request: Request<Body>,
) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<B>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    match prepare(&config, request).await {
        Ok(Ok(prepared)) => run(&config, inner, prepared).await,
        Ok(Err(keyless)) => pass(inner, keyless).await,
        Err(refused) => Ok(refused),
    }
}

/// Reads the key, the body, the scope and the fingerprint. `Ok(Err(..))`
/// is a keyless request to pass through; `Err` an answer refusing it.
async fn prepare(
    config: &Config,
    request: Request<Body>,
) -> Result<Result<Prepared, Request<Body>>, Response<Body>> {
    let key = match IdempotencyKey::from_headers(request.headers()) {
        Ok(Some(key)) => key,
        Ok(None) if !config.key_required => return Ok(Err(request)),
        Ok(None) => return Err(key::missing().into_response()),
        Err(problem) => return Err(problem.into_response()),
    };
    let (parts, body) = request.into_parts();
    let body = read_body(&parts, body, config.max_body_bytes)
        .await
        .map_err(IntoResponse::into_response)?;
    let route = match parts.extensions.get::<MatchedPath>() {
        Some(matched) => matched.as_str().to_owned(),
        None => parts.uri.path().to_owned(),
    };
    let scope = HttpScope {
        method: parts.method.as_str().to_owned(),
        route,
        principal: config.principal.of(&parts),
    };
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut digest = Digester::new();
    let fingerprint = digest
        .part(&RawBytes(target.as_bytes()))
        .and_then(|()| digest.part(&RawBytes(&body)))
        .map(|()| digest.finish())
        .map_err(|err| Error::Codec(err.into()).into_response())?;
    Ok(Ok(Prepared {
        key,
        scope,
        fingerprint,
        request: Request::from_parts(parts, Body::from(body)),
    }))
}

/// Claims the key and runs the inner service if the claim is won.
async fn run<S, B>(
    config: &Config,
    mut inner: S,
    prepared: Prepared,
) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<B>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let Prepared {
        key,
        scope,
        fingerprint,
        request,
    } = prepared;
    let route = scope.route_key();
    // The first answer keeps all its headers; only the replays are cut
    // down to the stored ones.
    let mut original = None;
    let slot = &mut original;
    let mut call = config.idem.call(&scope, key.as_str()).ttl(config.ttl);
    if let Some(lease) = config.lease {
        call = call.lease(lease);
    }
    let reported = call
        .wait(config.wait)
        .fingerprint_digest(fingerprint)
        .run_reported(|| async {
            let started = Instant::now();
            let response = inner.call(request).await.map_err(Failure::Inner)?;
            let kept = keep(config, response).await;
            config.run_times.record(&route, started.elapsed());
            let (stored, response) = kept?;
            *slot = Some(response);
            Ok(stored)
        })
        .await;
    answer(config, &route, reported, original)
}

/// Captures a response to store, or says why it is sent unstored.
async fn keep<B, E>(
    config: &Config,
    response: Response<B>,
) -> Result<(StoredResponse, Response<Body>), Failure<E>>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    if !(config.store_status)(response.status()) {
        return Err(Failure::Unstored(response.map(Body::new)));
    }
    let (parts, body) = response.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) => {
            let err: BoxError = err.into();
            tracing::warn!(error = %err, "idem: the response body failed; claim released");
            return Err(Failure::Unstored(response_failed()));
        }
    };
    if body.len() > config.max_response_bytes {
        tracing::warn!(
            size = body.len(),
            limit = config.max_response_bytes,
            "idem: response too large to store; sent unstored and claim released"
        );
        return Err(Failure::Unstored(Response::from_parts(
            parts,
            Body::from(body),
        )));
    }
    let stored = StoredResponse::capture(&parts, &body, &config.stored_headers);
    Ok((stored, Response::from_parts(parts, Body::from(body))))
}

/// The answer to the client, from how the call ended.
fn answer<E>(
    config: &Config,
    route: &str,
    reported: Reported<Result<StoredResponse, Failure<E>>>,
    original: Option<Response<Body>>,
) -> Result<Response<Body>, E> {
    match (reported.result, original) {
        (Ok(stored), _) if reported.replayed => Ok(stored.into_replay()),
        (Ok(_), Some(response)) => Ok(response),
        (Ok(_), None) => Ok(response_failed()),
        // The service ran but its answer could not be stored (the store
        // failed at completion, or the lease was lost): the client still
        // gets what happened.
        (Err(Failure::Idem(err)), Some(response)) => {
            tracing::warn!(error = %err, "idem: response sent but not stored");
            Ok(response)
        }
        (Err(Failure::Idem(mut err)), None) => {
            if let Error::InProgress { retry_after, .. } = &mut err {
                *retry_after = config.run_times.estimate(route, *retry_after);
            }
            Ok(err.into_response())
        }
        (Err(Failure::Unstored(response)), _) => Ok(response),
        (Err(Failure::Inner(err)), _) => Err(err),
    }
}

/// A request the layer does not guard, or sent without a key where none is
/// required.
pub(crate) async fn pass<S, B>(
    mut inner: S,
    request: Request<Body>,
) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<B>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    Ok(inner.call(request).await?.map(Body::new))
}

/// Buffers the request body, refusing one over `limit` (413) before reading
/// it when `Content-Length` tells.
async fn read_body(parts: &Parts, body: Body, limit: usize) -> Result<Bytes, Problem> {
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) if err.is::<LengthLimitError>() => Err(too_large(limit)),
        Err(err) => Err(Problem::new(
            400,
            "body-unreadable",
            "Request body unreadable",
            format!("The request body could not be read: {err}."),
        )),
    }
}

fn too_large(limit: usize) -> Problem {
    Problem::new(
        413,
        "body-too-large",
        "Request body too large",
        format!("The request body is larger than {limit} bytes; nothing was processed."),
    )
}

/// The inner service panicked: its claim was released as the task
/// unwound, so a retry runs again.
pub(crate) fn handler_panicked() -> Response<Body> {
    tracing::error!("idem: the handler panicked; claim released");
    Problem::new(
        500,
        "handler-panicked",
        "Handler failed",
        "The request handler failed before answering; nothing was stored, so a retry with the same Idempotency-Key runs again.",
    )
    .into_response()
}

/// The runtime shut down while the request ran.
pub(crate) fn runtime_stopped() -> Response<Body> {
    Problem::new(
        503,
        "shutting-down",
        "Shutting down",
        "The server stopped before the request ended; retry with the same Idempotency-Key.",
    )
    .retry_after(Duration::from_secs(1))
    .into_response()
}

fn response_failed() -> Response<Body> {
    Problem::new(
        500,
        "response-failed",
        "Response failed",
        "The response body failed while it was being stored; retry with the same Idempotency-Key.",
    )
    .into_response()
}

/// Bytes hashed as one byte string, not one number per byte.
struct RawBytes<'a>(&'a [u8]);

impl serde::Serialize for RawBytes<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

/// The scope of a request's key: method, route and principal.
struct HttpScope {
    method: String,
    route: String,
    principal: Option<String>,
}

impl HttpScope {
    /// Method and route: what run times are tracked by.
    fn route_key(&self) -> String {
        format!("{} {}", self.method, self.route)
    }
}

impl KeyPart for HttpScope {
    fn write_key(&self, hasher: &mut KeyHasher) {
        hasher.write_bytes(b"idem/http/v1");
        hasher.write_bytes(self.method.as_bytes());
        hasher.write_bytes(self.route.as_bytes());
        hasher.write_bool(self.principal.is_some());
        if let Some(principal) = &self.principal {
            hasher.write_bytes(principal.as_bytes());
        }
    }

    fn describe(&self, out: &mut String) {
        out.push_str(&self.method);
        out.push(' ');
        out.push_str(&self.route);
        if let Some(principal) = &self.principal {
            out.push_str(" for ");
            out.push_str(principal);
        }
    }
}
