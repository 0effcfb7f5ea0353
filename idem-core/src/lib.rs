//! The backend-agnostic protocol of [idem](https://docs.rs/idemkit): keys,
//! fingerprints, records, the [`Store`] trait, the call runtime that
//! `#[idempotent]` expands to, and the errors.
//!
//! The store contract (the [`Store`] trait, keys, tokens, claims, store
//! errors, the admin types) is the
//! [`idem-contract`](https://docs.rs/idem-contract) crate, re-exported here
//! at the same paths; a store's crate depends on that one alone.
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

mod backoff;
mod cache;
mod call;
mod context;
mod detach;
mod disabled;
mod error;
mod idempotency;
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
// The crash kit's poll budget: the runtime counts a detached body's polls
// in every build (none is spent without a budget); only `testing` can
// install one (`testing::polls`).
#[cfg_attr(not(feature = "testing"), allow(dead_code, unreachable_pub))]
mod polls;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub mod problem;
pub mod queue;
mod record;
mod renewal;
mod step;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
pub mod transaction;

pub use idem_contract::{fingerprint, store};

pub mod key {
    //! Idempotency keys and scopes, hashed: [`RecordKey`] (what a store is
    //! given), [`ShortKey`] (what logs and errors show), [`KeyHasher`] (what
    //! a [`KeyPart`] writes into) and [`DerivedKey`] (a key derived from a
    //! fn's parameters).

    pub use idem_contract::key::*;

    mod derived;
    mod text;

    pub use derived::DerivedKey;
    pub(crate) use idem_contract::__private::hex;
    pub(crate) use idem_contract::KeyPart;
    pub(crate) use text::ScopeText;

    /// The human-readable form of a scope, for logs and errors.
    pub(crate) fn describe<S: KeyPart + ?Sized>(scope: &S) -> String {
        let mut out = String::new();
        scope.describe(&mut out);
        out
    }
}

pub mod admin {
    //! Operating records: listing, inspecting, purging and counting them, for
    //! the `idem` CLI and for operators' own tools. A store that keeps enough
    //! per record (state, creation time, the call site's name) implements
    //! [`Admin`]; forgetting one key is
    //! [`Store::forget`](crate::Store::forget). A stored record's bytes read
    //! without its call's types with [`decode_record_json`].

    pub use idem_contract::admin::*;

    mod codec;
    mod display;
    mod schedule;

    pub use codec::{RecordParts, decode_record, decode_record_json, encode_record};
    pub use display::display_value;
    pub use schedule::{PurgeTask, spawn_purge};
}

pub use call::{
    Body, Call, DEFAULT_LEASE, DEFAULT_TTL, Failed, MAX_DURATION, Mismatch, NoReconcile, Ran,
    Reconcile, Reported,
};
pub use context::child_key;
pub use error::{CodecError, Error};
pub use idem_contract::{KeyPart, Store, StoreError, StoreErrorKind};
pub use idempotency::{
    DEFAULT_MAX_RECORD_BYTES, Idempotency, IdempotencyBuilder, install, installed,
};
pub use observe::CallSite;
pub use policy::{ErrorPolicy, ReleaseErrors, ReplayErrors, replay_errors, replay_errors_if};
pub use step::step;

// Crate-internal shorthands for items of the public modules.
pub(crate) use fingerprint::{Digester, Fingerprint, FingerprintError};
pub(crate) use key::{KeyHasher, RecordKey};
pub(crate) use store::{Claim, ClaimOutcome, Fence, StepId, Token};

#[doc(hidden)]
#[path = "private.rs"]
#[allow(missing_docs)]
pub mod __private;
