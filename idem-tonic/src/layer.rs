//! `IdempotencyLayer`: the settings of the server layer, one value shared
//! by every service it makes.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;
use http::request::Parts;
use tonic::Code;

use idem_core::Idempotency;

use crate::scope::{self, Canonical, KeyField};

/// What the layer knows of one guarded method.
#[derive(Clone, Default)]
pub(crate) struct Method {
    pub(crate) required: bool,
    pub(crate) canonical: Option<Arc<Canonical>>,
    /// Whether `canonical` also reads the key from a field.
    pub(crate) key_field: bool,
}

/// The application's principal: a function of the request.
pub(crate) type Principal = dyn Fn(&Parts) -> Option<String> + Send + Sync;

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) idem: Idempotency,
    pub(crate) methods: HashMap<String, Method>,
    pub(crate) ttl: Duration,
    pub(crate) lease: Option<Duration>,
    pub(crate) tombstone: Option<Duration>,
    /// `None`: a hash of the `authorization` metadata.
    pub(crate) principal: Option<Arc<Principal>>,
    pub(crate) wait: Duration,
    pub(crate) stored_metadata: Vec<HeaderName>,
    pub(crate) store_code: fn(Code) -> bool,
    pub(crate) max_message_bytes: usize,
}

/// A tower layer for tonic servers that makes unary methods idempotent
/// (SPEC §14): a call with an `idempotency-key` metadata entry runs its
/// handler once per key; its answer (status code and message, response
/// message, allow-listed metadata and trailers) is stored and replayed to
/// every duplicate with `idempotent-replayed: true`.
///
/// The layer guards the unary methods it is told of, by full path
/// (`/package.Service/Method`): [`unary`](Self::unary) (fingerprint of the
/// message's bytes), [`message`](Self::message) (fingerprint of the
/// decoded message: field and map entry order do not matter) or
/// [`required`](Self::required) (a call without a key is refused). Every
/// other method, streaming ones included, passes through untouched.
///
/// ```
/// use idem::grpc::IdempotencyLayer;
/// use idem::{Idempotency, MemoryStore};
///
/// let layer = IdempotencyLayer::new(Idempotency::new(MemoryStore::new()))
///     .unary("/shop.Orders/Create")
///     .required("/shop.Payments/Charge")
///     .ttl(std::time::Duration::from_secs(24 * 3600));
/// // tonic::transport::Server::builder().layer(layer).add_service(…)
/// # let _ = layer;
/// ```
#[derive(Clone)]
pub struct IdempotencyLayer {
    pub(crate) config: Arc<Config>,
}

impl fmt::Debug for IdempotencyLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut methods: Vec<&String> = self.config.methods.keys().collect();
        methods.sort();
        f.debug_struct("IdempotencyLayer")
            .field("methods", &methods)
            .field("ttl", &self.config.ttl)
            .field("wait", &self.config.wait)
            .finish_non_exhaustive()
    }
}

/// `OK` and the deterministic errors, which a retry would get again.
pub(crate) fn default_store_code(code: Code) -> bool {
    matches!(
        code,
        Code::Ok
            | Code::InvalidArgument
            | Code::NotFound
            | Code::AlreadyExists
            | Code::PermissionDenied
            | Code::FailedPrecondition
            | Code::OutOfRange
            | Code::Unimplemented
            | Code::Unauthenticated
    )
}

impl IdempotencyLayer {
    /// A layer on `idem`'s store, guarding no method yet; answers kept
    /// 24 hours.
    ///
    /// ```
    /// let layer = idem::grpc::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// # let _ = layer;
    /// ```
    pub fn new(idem: Idempotency) -> Self {
        IdempotencyLayer {
            config: Arc::new(Config {
                idem,
                methods: HashMap::new(),
                ttl: Duration::from_secs(24 * 3600),
                lease: None,
                tombstone: None,
                principal: None,
                wait: Duration::ZERO,
                stored_metadata: Vec::new(),
                store_code: default_store_code,
                max_message_bytes: 4 * 1024 * 1024,
            }),
        }
    }

    fn config(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }

    fn method(mut self, path: &str, edit: impl FnOnce(&mut Method)) -> Self {
        edit(self.config().methods.entry(path.to_owned()).or_default());
        self
    }

    /// Guards the unary method at `path` (`/package.Service/Method`): a
    /// call with a key is claimed, one without passes through. Its
    /// fingerprint is the request message's bytes.
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let layer = idem::grpc::IdempotencyLayer::new(idem).unary("/shop.Orders/Create");
    /// # let _ = layer;
    /// ```
    pub fn unary(self, path: &str) -> Self {
        self.method(path, |_| {})
    }

    /// Guards the unary method at `path` as [`unary`](Self::unary), and
    /// fingerprints its request decoded as `M`: two encodings of one
    /// message (fields or map entries in another order) are the same
    /// request. `M` is the prost message with `serde::Serialize` derived
    /// (prost-build's `type_attribute(".", "#[derive(serde::Serialize)]")`);
    /// a body that does not decode is fingerprinted by its bytes.
    ///
    /// ```
    /// #[derive(Clone, PartialEq, prost::Message, serde::Serialize)]
    /// struct CreateOrder {
    ///     #[prost(string, tag = "1")]
    ///     sku: String,
    /// }
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let layer = idem::grpc::IdempotencyLayer::new(idem)
    ///     .message::<CreateOrder>("/shop.Orders/Create");
    /// # let _ = layer;
    /// ```
    pub fn message<M>(self, path: &str) -> Self
    where
        M: prost::Message + Default + serde::Serialize + 'static,
    {
        self.method(path, |method| {
            method.canonical = Some(Arc::new(|bytes: &[u8]| scope::decoded::<M>(bytes, None)));
            method.key_field = false;
        })
    }

    /// Guards the unary method at `path` as [`message`](Self::message),
    /// and takes a call's key from a field of its decoded request when the
    /// call has no `idempotency-key` metadata: AIP-155's `request_id`,
    /// which a client sets once per logical call and sends again on every
    /// retry. The metadata, when present, wins; an empty field is no key
    /// (the call passes through, or is refused if [`required`](Self::required));
    /// a field that is not 1 to 255 visible ASCII characters is
    /// `INVALID_ARGUMENT`. A compressed request message cannot be read
    /// here, so it carries no key from its field.
    ///
    /// ```
    /// #[derive(Clone, PartialEq, prost::Message, serde::Serialize)]
    /// struct CreateOrder {
    ///     #[prost(string, tag = "1")]
    ///     sku: String,
    ///     #[prost(string, tag = "2")]
    ///     request_id: String,
    /// }
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let layer = idem::grpc::IdempotencyLayer::new(idem)
    ///     .key_field("/shop.Orders/Create", |request: &CreateOrder| &request.request_id);
    /// # let _ = layer;
    /// ```
    pub fn key_field<M, F>(self, path: &str, field: F) -> Self
    where
        M: prost::Message + Default + serde::Serialize + 'static,
        F: for<'a> Fn(&'a M) -> &'a str + Send + Sync + 'static,
    {
        let field: Arc<KeyField<M>> = Arc::new(field);
        self.method(path, move |method| {
            method.canonical = Some(Arc::new(move |bytes: &[u8]| {
                scope::decoded::<M>(bytes, Some(&*field))
            }));
            method.key_field = true;
        })
    }

    /// Who calls, as part of a key's scope: two principals using the same
    /// key never see each other's answers. Typically reads what an
    /// authentication layer placed outside this one put into the request's
    /// extensions; `None` is the anonymous principal. Replaces the
    /// default, a SHA-256 hash of the `authorization` metadata (the
    /// credential itself never reaches the store or the logs).
    ///
    /// ```
    /// #[derive(Clone)]
    /// struct Tenant(String);
    ///
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let layer = idem::grpc::IdempotencyLayer::new(idem)
    ///     .principal(|request| request.extensions.get::<Tenant>().map(|t| t.0.clone()));
    /// # let _ = layer;
    /// ```
    pub fn principal(
        mut self,
        principal: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.config().principal = Some(Arc::new(principal));
        self
    }

    /// Keeps a tombstone for `tombstone` after an answer's TTL (SPEC §13):
    /// a duplicate that comes that late gets `FAILED_PRECONDITION` (reason
    /// `IDEMPOTENCY_KEY_EXPIRED`) instead of running the handler again.
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let layer = idem::grpc::IdempotencyLayer::new(idem)
    ///     .tombstone(std::time::Duration::from_secs(30 * 24 * 3600));
    /// # let _ = layer;
    /// ```
    pub fn tombstone(mut self, tombstone: Duration) -> Self {
        self.config().tombstone = Some(tombstone);
        self
    }

    /// Guards the unary method at `path` and refuses a call without a key
    /// with `INVALID_ARGUMENT` (`ErrorInfo` reason
    /// `IDEMPOTENCY_KEY_MISSING`); the handler does not run.
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let layer = idem::grpc::IdempotencyLayer::new(idem).required("/shop.Payments/Charge");
    /// # let _ = layer;
    /// ```
    pub fn required(self, path: &str) -> Self {
        self.method(path, |method| method.required = true)
    }

    /// How long a stored answer is replayed (default 24 hours).
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let layer = idem::grpc::IdempotencyLayer::new(idem).ttl(std::time::Duration::from_secs(3600));
    /// # let _ = layer;
    /// ```
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.config().ttl = ttl;
        self
    }

    /// How long a claim is held before another call may take it over
    /// (default: the call runtime's, 30 s, renewed while the handler runs).
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let layer = idem::grpc::IdempotencyLayer::new(idem).lease(std::time::Duration::from_secs(10));
    /// # let _ = layer;
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config().lease = Some(lease);
        self
    }

    /// How long a duplicate waits for the call in progress and replays its
    /// answer, instead of `ABORTED` with a `RetryInfo` delay at once
    /// (default zero).
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let layer = idem::grpc::IdempotencyLayer::new(idem).wait(std::time::Duration::from_secs(2));
    /// # let _ = layer;
    /// ```
    pub fn wait(mut self, wait: Duration) -> Self {
        self.config().wait = wait;
        self
    }

    /// Response metadata and trailers stored and replayed besides the
    /// status, the message and `grpc-status-details-bin` (default none).
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let layer = idem::grpc::IdempotencyLayer::new(idem)
    ///     .stored_metadata([http::HeaderName::from_static("x-order-id")]);
    /// # let _ = layer;
    /// ```
    pub fn stored_metadata(mut self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        self.config().stored_metadata = names.into_iter().collect();
        self
    }

    /// Which status codes are stored and replayed; every other one
    /// releases the key, so a retry runs the handler again. Default: `OK`
    /// and the deterministic errors (`INVALID_ARGUMENT`, `NOT_FOUND`,
    /// `ALREADY_EXISTS`, `PERMISSION_DENIED`, `FAILED_PRECONDITION`,
    /// `OUT_OF_RANGE`, `UNIMPLEMENTED`, `UNAUTHENTICATED`).
    ///
    /// ```
    /// use tonic::Code;
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let layer = idem::grpc::IdempotencyLayer::new(idem).store_code(|code| code == Code::Ok);
    /// # let _ = layer;
    /// ```
    pub fn store_code(mut self, store: fn(Code) -> bool) -> Self {
        self.config().store_code = store;
        self
    }
}
