//! Idempotency keys on the client: made once per logical request, sent as a
//! structured-field string, and shown in spans only as a short hash.

use reqwest::header::{HeaderName, HeaderValue};
use sha2::{Digest as _, Sha256};

/// The header the key travels in.
pub(crate) const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// A fresh idempotency key: a random UUID v4, 36 characters.
///
/// The middleware makes one for each logical request that has none. Call it
/// yourself when the key must outlive the process: make it *before* the
/// operation is confirmed and keep it (in an outbox row, a job's payload),
/// so a crash or an exhausted deadline between the send and the answer is
/// retried later with the same key, never a new one.
///
/// ```
/// let key = idem::client::new_key();
/// assert_eq!(key.len(), 36);
/// assert_ne!(key, idem::client::new_key());
/// // Set it as the caller's own key: the middleware keeps it.
/// let header = format!("\"{key}\"");
/// # assert!(header.starts_with('"'));
/// ```
pub fn new_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The `Idempotency-Key` header value of `key`: an RFC 8941 string. A UUID
/// holds only hex digits and dashes, so it needs no escaping.
pub(crate) fn header_value(key: &str) -> HeaderValue {
    HeaderValue::try_from(format!("\"{key}\""))
        .expect("a UUID's characters are valid in a header value")
}

/// The first 8 hex digits of the SHA-256 of the header's value: enough to
/// follow one logical request's attempts in logs, nothing of the key.
pub(crate) fn key_hash(value: &HeaderValue) -> String {
    let digest = Sha256::digest(value.as_bytes());
    digest[..4]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}
