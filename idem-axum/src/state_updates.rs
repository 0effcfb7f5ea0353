//! State updates without a key (SPEC §7): requests of the methods an
//! application marks are keyed by the resource they update, and another
//! body reruns (`Mismatch::Rerun`).

use axum::http::Method;
use axum::http::request::Parts;

use crate::IdempotencyLayer;

impl IdempotencyLayer {
    /// The methods whose requests are *state updates*: keyed by their
    /// method, route, path and [principal](Self::principal) instead of an
    /// `Idempotency-Key` header (none is required, and one sent is not
    /// read), with `mismatch = "rerun"`
    /// ([`Mismatch::Rerun`](idem_core::Mismatch::Rerun)). None by default;
    /// PUT and DELETE are the usual ones. These methods are handled
    /// whether or not they are among [`methods`](Self::methods).
    ///
    /// - The same body as the last completed update of the resource
    ///   replays its stored response: the handler does not run, so no
    ///   second `update_time`, message or cache invalidation.
    /// - Another body runs the handler, and its response replaces the
    ///   record; the first body again is a change from the current state,
    ///   and runs too.
    /// - Two updates of one resource never run at once: one holds the
    ///   claim and the other waits up to [`wait`](Self::wait), then gets
    ///   409 with `Retry-After`, as a concurrent duplicate does.
    ///
    /// The body is fingerprinted as for keyed requests, with the path and
    /// query (so a JSON body's key order and whitespace do not matter here
    /// either, unless [`exact_bytes`](Self::exact_bytes)). A status that is
    /// not stored (by default 5xx, 408, 409, 425, 429) releases the claim:
    /// the retry runs again.
    ///
    /// ```
    /// use axum::http::Method;
    /// use axum::{Router, routing::put};
    /// use idem::http::IdempotencyLayer;
    ///
    /// let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let app: Router = Router::new()
    ///     .route("/orders/{id}/status", put(|body: String| async move { body }))
    ///     .layer(
    ///         IdempotencyLayer::new(idem).state_updates([Method::PUT, Method::DELETE]),
    ///     );
    /// # let _ = app;
    /// ```
    pub fn state_updates(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.config_mut().state_updates = methods.into_iter().collect();
        self
    }
}

/// The key of a state update: the resource, its path (the query is part
/// of the fingerprint, not the key).
pub(crate) fn resource(parts: &Parts) -> String {
    parts.uri.path().to_owned()
}
