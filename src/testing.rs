//! Prove your own idempotent functions (feature `testing`; enable it in
//! `[dev-dependencies]`).
//!
//! idem proves itself with a conformance suite and chaos tests; these
//! prove *your* functions: that a crash between two effects does not
//! repeat the first, that a refactor did not change a derived key, that a
//! handler behaves when the store fails, and which functions are
//! idempotent at all.
//!
//! - [`CrashPoints`] crashes a call at each of its await points (the
//!   claim stays held, as after a killed process), lets the lease lapse
//!   on tokio's paused clock, recovers, and checks your invariant.
//! - [`FaultyStore`] wraps any store and fails, loses the answer of, or
//!   delays chosen operations ([`Op`]).
//! - [`probe`] returns the scope, record key and fingerprint a call would
//!   claim, without running it, so a test pins them.
//! - [`sites`] lists every `#[idempotent]` function linked into the
//!   binary, with its options as written.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use idem::testing::CrashPoints;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let debits = Arc::new(AtomicU32::new(0));
//! let credits = Arc::new(AtomicU32::new(0));
//! let (d, c) = (debits.clone(), credits.clone());
//! let report = CrashPoints::new(move |idem: idem::Idempotency| {
//!     let (d, c) = (d.clone(), c.clone());
//!     async move {
//!         idem.call("transfers", "t-1")
//!             .run(|| async move {
//!                 // Each effect in a step: a recovered call resumes after it.
//!                 idem::step("debit", || async {
//!                     tokio::task::yield_now().await; // the bank's round trip
//!                     d.fetch_add(1, Ordering::SeqCst);
//!                     Ok::<_, idem::Error>(())
//!                 }).await?;
//!                 idem::step("credit", || async {
//!                     tokio::task::yield_now().await;
//!                     c.fetch_add(1, Ordering::SeqCst);
//!                     Ok::<_, idem::Error>(())
//!                 }).await?;
//!                 Ok::<_, idem::Error>(())
//!             })
//!             .await
//!     }
//! })
//! .reset({ let (d, c) = (debits.clone(), credits.clone()); move || { d.store(0, Ordering::SeqCst); c.store(0, Ordering::SeqCst); } })
//! .invariant(move || debits.load(Ordering::SeqCst) == 1 && credits.load(Ordering::SeqCst) == 1)
//! .run()
//! .await;
//! assert!(report.passed(), "{report}");
//! # }
//! ```

mod crash;

pub use crash::{CrashPoints, CrashReport};
pub use idem_core::testing::{FaultyStore, Op, Probe, Site, probe, sites};
