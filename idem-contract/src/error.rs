//! A store's failure, [`StoreError`], and its kind.

/// A store's failure: unreachable, timed out, refused, or a record it could
/// not read. Its [`kind`](StoreError::kind) tells a caller whether trying
/// again can help.
///
/// ```
/// use idem_contract::{StoreError, StoreErrorKind};
///
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
/// let err = StoreError::new("redis", io);
/// assert_eq!(err.to_string(), "redis store failed: refused");
/// assert_eq!(err.kind(), StoreErrorKind::Unavailable);
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{backend} store failed: {source}")]
pub struct StoreError {
    backend: &'static str,
    kind: StoreErrorKind,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

/// Whether a store's failure may pass by itself.
///
/// ```
/// use idem_contract::StoreErrorKind;
/// assert!(StoreErrorKind::Unavailable.is_transient());
/// assert!(!StoreErrorKind::Misconfigured.is_transient());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// Unreachable, timed out, failed over, or refused for now: the same
    /// call may succeed later.
    Unavailable,
    /// The store or its settings cannot work (a Redis that may evict keys,
    /// missing tables, a bad URL): an operator must act before any call
    /// can succeed.
    Misconfigured,
    /// The store cannot do what was asked of it (a feature it lacks).
    Unsupported,
}

impl StoreErrorKind {
    /// Whether trying the same call again later can succeed.
    pub const fn is_transient(self) -> bool {
        matches!(self, StoreErrorKind::Unavailable)
    }
}

impl StoreError {
    /// Wraps a backend's own error as [`StoreErrorKind::Unavailable`].
    pub fn new(
        backend: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::with_kind(backend, StoreErrorKind::Unavailable, source)
    }

    /// Wraps a backend's own error as [`StoreErrorKind::Misconfigured`].
    ///
    /// ```
    /// let err = idem_contract::StoreError::misconfigured("redis", "maxmemory-policy allkeys-lru may evict claims");
    /// assert_eq!(err.kind(), idem_contract::StoreErrorKind::Misconfigured);
    /// ```
    pub fn misconfigured(
        backend: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::with_kind(backend, StoreErrorKind::Misconfigured, source)
    }

    /// Wraps a backend's own error as [`StoreErrorKind::Unsupported`].
    ///
    /// ```
    /// let err = idem_contract::StoreError::unsupported("memory", "no transactions");
    /// assert_eq!(err.kind(), idem_contract::StoreErrorKind::Unsupported);
    /// ```
    pub fn unsupported(
        backend: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::with_kind(backend, StoreErrorKind::Unsupported, source)
    }

    fn with_kind(
        backend: &'static str,
        kind: StoreErrorKind,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            backend,
            kind,
            source: source.into(),
        }
    }

    /// Which backend failed (`"memory"`, `"redis"`, …).
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    /// Whether the failure may pass by itself.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }
}
