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
#[doc(hidden)]
pub mod polls;
mod probe;
pub(crate) mod sites;

pub use faulty::{FaultyStore, Op};
pub(crate) use probe::Seen;
pub use probe::{Probe, probe};
pub use sites::{Site, sites};
