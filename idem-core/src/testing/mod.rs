//! Prove your own idempotent functions: faults, probes and an inventory
//! (feature `testing`).
//!
//! - [`FaultyStore`] wraps any store and fails, loses the answer of, or
//!   delays chosen operations ([`Op`]), so a test sees what its caller
//!   does when the store misbehaves.
//! - [`probe`] returns the scope, record key and fingerprint a call would
//!   claim, without running it, so a test pins them against refactors.
//! - [`sites`] lists every `#[idempotent]` function linked into the binary,
//!   with its options as written.
//!
//! The facade's `idem::testing` adds `CrashPoints`, which crashes a call
//! at each of its await points and checks that recovery keeps your
//! invariant.

mod faulty;
/// The poll budget of the facade's `CrashPoints`: installed here, spent by
/// the runtime (`crate::polls`, compiled in every build).
#[doc(hidden)]
pub mod polls {
    pub use crate::polls::{Budget, Installed, counted};
}
mod probe;
pub(crate) mod sites;

pub use faulty::{FaultyStore, Op};
pub use probe::{Probe, probe};
pub use sites::{Site, sites};
