//! The store contract of [idem](https://docs.rs/idemkit): the [`Store`]
//! trait and what a store author needs to implement it, and nothing of the
//! call runtime.
//!
//! A store sees hashed keys ([`key::RecordKey`]), fencing tokens
//! ([`store::Token`]), claims and its answers to them ([`store::Claim`],
//! [`store::ClaimOutcome`], [`store::Fence`], [`store::Retention`]), step ids
//! ([`store::StepId`]), payload fingerprints
//! ([`fingerprint::Fingerprint`]) and opaque record bytes; it fails with a
//! [`StoreError`]. A store that operators can list and purge implements
//! [`admin::Admin`] too.
//!
//! A store's crate depends on this crate alone: not on the runtime
//! (`idem-core`), tokio's runtime, `metrics` or `arc-swap`, so the runtime
//! can change without a release of the store. Applications reach every item
//! here through `idemkit` at the same path (`idem::Store`,
//! `idem::store::Claim`, `idem::key::RecordKey`, `idem::admin::Admin`,
//! `idem::StoreError`): the same items, re-exported.
//!
//! Every store must pass the conformance suite,
//! [`idem-conformance`](https://docs.rs/idem-conformance): one test per
//! protocol rule, run against a handle on the store
//! (`idem_conformance::suite!(async { idem::Idempotency::new(MyStore::new()) })`
//! in the store's tests, with `idemkit` and `idem-conformance` as
//! dev-dependencies).
//!
//! # A store
//!
//! A sketch of a store in a map: a claim holds the key for its lease, a
//! completed record for its TTL, each judged by the store's own clock, and
//! every later operation of a claim is fenced by its token. (It keeps no
//! tombstones, no steps and no lapsed claims for
//! [`LAPSED_CLAIM_KEPT`](store::LAPSED_CLAIM_KEPT); `idem::MemoryStore` is
//! the full one.)
//!
//! ```
//! use std::collections::HashMap;
//! use std::sync::Mutex;
//! use std::time::{Duration, Instant};
//!
//! use bytes::Bytes;
//! use idem_contract::fingerprint::Fingerprint;
//! use idem_contract::key::RecordKey;
//! use idem_contract::store::{async_trait, Claim, ClaimOutcome, Fence, Retention, Token};
//! use idem_contract::{Store, StoreError};
//!
//! struct Entry {
//!     token: Token,
//!     fingerprint: Fingerprint,
//!     /// `None` while the claim runs.
//!     record: Option<Bytes>,
//!     /// When the lease or the TTL ends.
//!     until: Instant,
//! }
//!
//! #[derive(Default)]
//! struct MapStore(Mutex<HashMap<RecordKey, Entry>>);
//!
//! /// Whether `token` still holds the claim on `key`.
//! fn fence(map: &HashMap<RecordKey, Entry>, key: &RecordKey, token: Token) -> Fence {
//!     match map.get(key) {
//!         Some(held) if held.token != token || held.record.is_some() => Fence::Lost,
//!         Some(held) if held.until > Instant::now() => Fence::Held,
//!         _ => Fence::Expired,
//!     }
//! }
//!
//! #[async_trait]
//! impl Store for MapStore {
//!     async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
//!         let mut map = self.0.lock().unwrap();
//!         let now = Instant::now();
//!         let mut took_over = false;
//!         if let Some(held) = map.get(key) {
//!             let left = held.until.saturating_duration_since(now);
//!             match &held.record {
//!                 Some(record) if !left.is_zero() => {
//!                     return Ok(ClaimOutcome::completed(held.fingerprint, record.clone(), left));
//!                 }
//!                 // A lapsed claim is taken over by its own payload only.
//!                 None if !left.is_zero() || !claim.fingerprint.matches(&held.fingerprint) => {
//!                     return Ok(ClaimOutcome::in_progress(held.fingerprint, left));
//!                 }
//!                 None => took_over = true,
//!                 Some(_) => {} // expired: the key is free
//!             }
//!         }
//!         let until = now + claim.lease;
//!         let entry = Entry { token: claim.token, fingerprint: claim.fingerprint, record: None, until };
//!         map.insert(*key, entry);
//!         Ok(ClaimOutcome::won(took_over, Vec::new()))
//!     }
//!
//!     async fn complete(&self, key: &RecordKey, token: Token, record: &[u8], kept: Retention) -> Result<Fence, StoreError> {
//!         let mut map = self.0.lock().unwrap();
//!         let fence = fence(&map, key, token);
//!         if let (Fence::Held, Some(held)) = (fence, map.get_mut(key)) {
//!             held.record = Some(Bytes::copy_from_slice(record));
//!             held.until = Instant::now() + kept.ttl;
//!         }
//!         Ok(fence)
//!     }
//!
//!     async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
//!         let mut map = self.0.lock().unwrap();
//!         let fence = fence(&map, key, token);
//!         if fence.is_held() {
//!             map.remove(key);
//!         }
//!         Ok(fence)
//!     }
//!
//!     async fn renew(&self, key: &RecordKey, token: Token, lease: Duration) -> Result<Fence, StoreError> {
//!         let mut map = self.0.lock().unwrap();
//!         let fence = fence(&map, key, token);
//!         if let (Fence::Held, Some(held)) = (fence, map.get_mut(key)) {
//!             held.until = Instant::now() + lease;
//!         }
//!         Ok(fence)
//!     }
//!
//!     async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
//!         self.0.lock().unwrap().remove(key);
//!         Ok(())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), StoreError> {
//! let store = MapStore::default();
//! let key = RecordKey::new(&"payments", &"order-1");
//! let payload = Fingerprint::of(&("alice", 1200)).unwrap();
//! let claim = Claim::new(Token::random(), payload, Duration::from_secs(30), "app::charge");
//!
//! let first = store.claim(&key, &claim).await?;
//! assert!(matches!(first, ClaimOutcome::Won { took_over: false, .. }));
//! let kept = Retention::new(Duration::from_secs(60));
//! assert_eq!(store.complete(&key, claim.token, b"receipt-1", kept).await?, Fence::Held);
//!
//! // A duplicate gets the record; a late holder's operation is fenced off.
//! let again = Claim::new(Token::random(), payload, Duration::from_secs(30), "app::charge");
//! match store.claim(&key, &again).await? {
//!     ClaimOutcome::Completed { record, .. } => assert_eq!(&record[..], b"receipt-1"),
//!     other => panic!("expected the record, got {other:?}"),
//! }
//! assert_eq!(store.release(&key, claim.token).await?, Fence::Lost);
//! # Ok(())
//! # }
//! ```
//!
//! # What this crate builds
//!
//! A store crate that depends on this one alone builds no runtime: from
//! `integration/third-party-store/` in idem's repository (a store written
//! against this crate, which passes conformance cases),
//! `cargo tree -p idem-third-party-store --edges normal` lists
//! `async-trait`, `bytes`, `rand`, `serde`, `sha2` and `thiserror` and
//! their own dependencies: no tokio, `metrics` or `arc-swap`
//! (ARCHITECTURE.md, "Layers", holds the whole tree).

#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_debug_implementations)]

pub mod admin;
mod error;
pub mod fingerprint;
pub mod key;
pub mod store;

pub use error::{StoreError, StoreErrorKind};
pub use key::part::KeyPart;
pub use store::contract::Store;

/// What `idem-core` shares with this crate beyond the public API (with
/// `RecordKey::checked` and `RecordKey::child`, hidden too): not API, it
/// may change in any release.
#[doc(hidden)]
pub mod __private {
    /// `bytes` as lowercase hex digits, as keys and fingerprints show.
    pub fn hex(bytes: &[u8]) -> String {
        crate::key::hex(bytes)
    }
}
