//! The crate `idempotent` 0.3.0 (features `valkey, memory, tokio, serde`),
//! its latest release that builds on this toolchain, as a peer baseline.
//!
//! 0.3.0 has no call wrapper: its API is the store (`try_insert`, then
//! `complete` with a `CachedResponse`), which is what its users call
//! around a handler. Its Valkey store speaks to Redis over one
//! `ConnectionManager` (multiplexed), with two Lua scripts (claim: `HGET`,
//! `HSET`, `PEXPIRE`; complete: `HGET`, `HSET`, `HDEL`, `PEXPIRE`) and
//! postcard-encoded entries.

use std::time::Duration;

use idempotent::fingerprint::{DefaultFingerprintStrategy, FingerprintStrategy};
use idempotent::store::valkey::ValkeyStore;
use idempotent::store::{IdempotencyStore, InsertResult};
use idempotent::{CachedResponse, IdempotencyEntry, IdempotencyKey, Metadata};

const TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// `idempotent`'s Valkey store under its own key prefix.
pub(crate) struct Peer(ValkeyStore);

impl Peer {
    pub(crate) async fn connect(client: redis::Client, prefix: &str) -> Self {
        Self(
            ValkeyStore::with_prefix(client, Some(prefix))
                .await
                .expect("idempotent's Valkey store"),
        )
    }

    /// One call as its users make it: claim; if won, run the (no-op) body
    /// and complete with the response; if the key exists, check the
    /// fingerprint and take the stored response.
    pub(crate) async fn call(&self, key: String, i: u64) {
        let key = IdempotencyKey::new(key).expect("peer key");
        let fingerprint = DefaultFingerprintStrategy.compute("bench", &i.to_le_bytes());
        let entry = IdempotencyEntry::new(fingerprint, TTL);
        match self.0.try_insert(&key, entry).await.expect("peer claim") {
            InsertResult::Claimed { fencing_token } => {
                let response = CachedResponse {
                    status_code: 200,
                    metadata: Metadata::default(),
                    body: bytes::Bytes::from(i.to_le_bytes().to_vec()),
                };
                let completed = IdempotencyEntry::new(fingerprint, TTL).complete(response);
                self.0
                    .complete(&key, completed, fencing_token)
                    .await
                    .expect("peer complete");
            }
            InsertResult::Exists(existing) => {
                if let idempotent::entry::ExistingEntry::Completed(entry) = existing {
                    assert!(entry.fingerprint_matches(fingerprint));
                    std::hint::black_box(entry.into_response());
                }
            }
        }
    }
}
