//! The backend-agnostic protocol of [idem](https://docs.rs/idemkit): keys,
//! fingerprints, records, the [`Store`] trait, the call runtime that
//! `#[idempotent]` expands to, and the errors.
//!
//! Users depend on the `idem` crate, which re-exports everything here.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let idem = idem::Idempotency::new(idem::MemoryStore::new());
//! let charge = || async { Ok::<_, idem::Error>(format!("receipt-{}", 1)) };
//! let first: String = idem.call("payments", "order-1").run(charge).await.unwrap();
//! let again: Result<String, idem::Error> =
//!     idem.call("payments", "order-1").run(|| async { unreachable!() }).await;
//! assert_eq!(first, again.unwrap());
//! # }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod cache;
mod call;
mod context;
mod detach;
mod disabled;
mod error;
pub mod fingerprint;
mod idempotency;
pub mod key;
mod observe;
/// Where a call runs: the last type parameter of [`Call`], chosen by its
/// settings [`Call::detach`] and [`Call::on`] (the default: [`Attached`](place::Attached),
/// on the handle's store in the caller's task).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let borrowed = idem::MemoryStore::new();
/// let here: Result<u8, idem::Error> = idem.call("demo", "a").run(|| async { Ok(1) }).await;
/// let own_task: Result<u8, idem::Error> = idem.call("demo", "b").detach().run(|| async { Ok(2) }).await;
/// let on: Result<u8, idem::Error> = idem.call("demo", "c").on(&borrowed).run(|| async { Ok(3) }).await;
/// assert_eq!((here.unwrap(), own_task.unwrap(), on.unwrap()), (1, 2, 3));
/// # }
/// ```
pub mod place {
    pub use crate::call::place::{Attached, Borrowed, Detached, Place};
}
mod policy;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub mod problem;
pub mod queue;
mod record;
mod renewal;
mod step;
pub mod store;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub mod admin;

pub use call::{
    Body, Call, DEFAULT_LEASE, DEFAULT_TTL, Failed, MAX_DURATION, NoReconcile, Ran, Reconcile,
    Reported,
};
pub use context::child_key;
pub use error::{CodecError, Error, StoreError, StoreErrorKind};
pub use idempotency::{
    DEFAULT_MAX_RECORD_BYTES, Idempotency, IdempotencyBuilder, install, installed,
};
pub use key::part::KeyPart;
pub use observe::CallSite;
pub use policy::{ErrorPolicy, ReleaseErrors, ReplayErrors, replay_errors, replay_errors_if};
pub use step::step;
pub use store::contract::Store;

// Crate-internal shorthands for items of the public modules.
pub(crate) use fingerprint::{Digester, Fingerprint, FingerprintError};
pub(crate) use key::{KeyHasher, RecordKey};
pub(crate) use store::{Claim, ClaimOutcome, Fence, StepId, Token};

#[doc(hidden)]
#[path = "private.rs"]
#[allow(missing_docs)]
pub mod __private;
