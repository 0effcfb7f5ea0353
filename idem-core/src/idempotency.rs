//! The `Idempotency` handle and the process-wide default.

use std::sync::Arc;

use arc_swap::ArcSwapOption;

use crate::cache::LocalCache;
use crate::detach::DetachedCount;
use crate::renewal::Renewer;
use crate::{Call, Error, KeyPart, RecordKey, Store};

/// A cheap, cloneable handle over a [`Store`]: where calls start.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # use idem::{Idempotency, Store};
/// # let store = idem::MemoryStore::new();
/// let idem = Idempotency::new(store);
/// let first: Result<u32, idem::Error> =
///     idem.call("demo", "key-1").run(|| async { Ok(7) }).await;
/// let again: Result<u32, idem::Error> =
///     idem.call("demo", "key-1").run(|| async { Ok(8) }).await;
/// assert_eq!((first.unwrap(), again.unwrap()), (7, 7));
/// # }
/// ```
#[derive(Clone)]
pub struct Idempotency {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) max_record_bytes: usize,
    pub(crate) cache: Option<LocalCache>,
    pub(crate) detached: Arc<DetachedCount>,
    pub(crate) renewer: Arc<Renewer>,
    /// Told the scope of a call whose claim failed. Set only on
    /// `testing::probe`'s handle (its store sees the claim, not the
    /// scope); `None` on every other, in every build.
    pub(crate) on_claim_failed: Option<ScopeNote>,
}

/// What [`Inner::on_claim_failed`] is told: the call's scope.
pub(crate) type ScopeNote = Arc<dyn Fn(&dyn std::fmt::Display) + Send + Sync>;

/// The default limit on an encoded record: 1 MiB.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 1 << 20;

impl Idempotency {
    /// A handle over `store` with default settings.
    pub fn new(store: impl Store + 'static) -> Self {
        Self::builder(store).build()
    }

    /// A builder for a handle with non-default settings.
    ///
    /// ```
    /// # let store = idem::MemoryStore::new();
    /// let idem = idem::Idempotency::builder(store).max_record_bytes(64 * 1024).build();
    /// # let _ = idem;
    /// ```
    pub fn builder(store: impl Store + 'static) -> IdempotencyBuilder {
        IdempotencyBuilder {
            store: Arc::new(store),
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            local_cache: None,
        }
    }

    /// A handle that runs every body and stores nothing: for tests and
    /// local runs. Duplicates are not detected; its first call says so in
    /// one `tracing` warning (once per handle, not per call).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let idem = idem::Idempotency::disabled();
    /// let first: Result<u8, idem::Error> = idem.call("demo", "k").run(|| async { Ok(1) }).await;
    /// let again: Result<u8, idem::Error> = idem.call("demo", "k").run(|| async { Ok(2) }).await;
    /// assert_eq!((first.unwrap(), again.unwrap()), (1, 2)); // both ran
    /// # }
    /// ```
    pub fn disabled() -> Self {
        Self::new(crate::disabled::Disabled::new())
    }

    /// Removes the record of `key` in `scope`, completed or in progress,
    /// from the store and this handle's local cache, so the next call runs
    /// the body again. A key with no record is `Ok`. A body still running
    /// on a forgotten claim gets `Error::LeaseLost` when it completes (its
    /// result is not stored), unless another call claimed the key meanwhile.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let _: Result<u8, idem::Error> = idem.call("demo", "k").run(|| async { Ok(1) }).await;
    /// idem.forget("demo", "k").await.unwrap();
    /// let again: Result<u8, idem::Error> = idem.call("demo", "k").run(|| async { Ok(2) }).await;
    /// assert_eq!(again.unwrap(), 2); // ran again
    /// idem.forget("demo", "never-called").await.unwrap(); // nothing to forget: Ok
    /// # }
    /// ```
    pub async fn forget<S: KeyPart + ?Sized, K: KeyPart + ?Sized>(
        &self,
        scope: &S,
        key: &K,
    ) -> Result<(), Error> {
        self.forget_record(&RecordKey::new(scope, key)).await
    }

    /// As [`forget`](Idempotency::forget), by the hashed key (as `idem list`
    /// prints it).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let _: Result<u8, idem::Error> = idem.call("demo", "k").run(|| async { Ok(1) }).await;
    /// let key = idem::key::RecordKey::new("demo", "k");
    /// idem.forget_record(&key).await.unwrap();
    /// # }
    /// ```
    pub async fn forget_record(&self, key: &RecordKey) -> Result<(), Error> {
        let cache = self.inner.cache.as_ref();
        cache.inspect(|cache| cache.forget(key));
        self.inner.store.forget(key).await?;
        // Again: a replay that read the record before it went may have put
        // it back meanwhile.
        cache.inspect(|cache| cache.forget(key));
        Ok(())
    }

    /// The store behind this handle.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// Starts a call: `scope` namespaces `key`; both are hashed at once, so
    /// the call borrows neither.
    pub fn call<S: KeyPart + ?Sized, K: KeyPart + ?Sized>(&self, scope: &S, key: &K) -> Call {
        Call::new(self.clone(), scope, key)
    }
}

impl std::fmt::Debug for Idempotency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idempotency")
            .field("max_record_bytes", &self.inner.max_record_bytes)
            .field("local_cache", &self.inner.cache.is_some())
            .finish_non_exhaustive()
    }
}

/// Settings of an [`Idempotency`] handle. Made by [`Idempotency::builder`].
pub struct IdempotencyBuilder {
    store: Arc<dyn Store>,
    max_record_bytes: usize,
    local_cache: Option<usize>,
}

impl std::fmt::Debug for IdempotencyBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotencyBuilder")
            .field("max_record_bytes", &self.max_record_bytes)
            .field("local_cache", &self.local_cache)
            .finish_non_exhaustive()
    }
}

impl IdempotencyBuilder {
    /// The largest encoded record accepted; a larger value is
    /// `Error::Codec(CodecError::TooLarge)` and nothing is stored.
    pub fn max_record_bytes(mut self, limit: usize) -> Self {
        self.max_record_bytes = limit;
        self
    }

    /// Keeps at most `capacity` completed records in this process, so a
    /// replay that hits costs no round trip to the store; `0` keeps none.
    /// A record is kept no longer than the store said it lives; in-progress
    /// claims are never cached. Off by default.
    ///
    /// ```
    /// # let store = idem::MemoryStore::new();
    /// let idem = idem::Idempotency::builder(store).local_cache(10_000).build();
    /// # let _ = idem;
    /// ```
    pub fn local_cache(mut self, capacity: usize) -> Self {
        self.local_cache = Some(capacity);
        self
    }

    /// The handle.
    pub fn build(self) -> Idempotency {
        Idempotency {
            inner: Arc::new(Inner {
                renewer: Arc::new(Renewer::new(Arc::clone(&self.store))),
                store: self.store,
                max_record_bytes: self.max_record_bytes,
                cache: self.local_cache.and_then(LocalCache::new),
                detached: Arc::default(),
                on_claim_failed: None,
            }),
        }
    }
}

static DEFAULT: ArcSwapOption<Idempotency> = ArcSwapOption::const_empty();

/// Sets the handle that `#[idempotent]` functions without `store = …` use.
/// A later call replaces it; calls already started keep the one they began
/// with.
///
/// ```
/// # let store = idem::MemoryStore::new();
/// idem::install(idem::Idempotency::new(store));
/// assert!(idem::installed().is_ok());
/// ```
pub fn install(handle: Idempotency) {
    DEFAULT.store(Some(Arc::new(handle)));
}

/// The installed handle, or `Error::NotConfigured`, which is also logged
/// as a `tracing` error (and written to stderr once when no subscriber is
/// set), since a service missing `idem::install` fails every call.
///
/// ```
/// assert!(matches!(idem::installed(), Err(idem::Error::NotConfigured)));
/// ```
pub fn installed() -> Result<Idempotency, Error> {
    match DEFAULT.load().as_deref() {
        Some(handle) => Ok(handle.clone()),
        None => Err(not_configured()),
    }
}

#[cold]
fn not_configured() -> Error {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let error = Error::NotConfigured;
    tracing::error!(%error, "idem: call idem::install at startup");
    if !tracing::dispatcher::has_been_set() {
        WARNED.call_once(|| eprintln!("idem: {error}"));
    }
    error
}
