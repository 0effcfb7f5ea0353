//! Testing your own idempotent code with `idem::testing` (feature `testing`).
//!
//! idem proves itself (the conformance suite, the [fault tests](super::faults)); the
//! `testing` feature lets you prove *your* functions. Enable it for tests
//! only, since it turns on tokio's `test-util`:
//!
//! ```toml
//! [dev-dependencies]
//! idemkit = { version = "0.1", features = ["testing"] }
//! ```
//!
//! `idem::testing` holds four tools:
//!
//! - `CrashPoints::new(|idem| async move { … })` counts the await points of
//!   your call (a `detach`ed body's included), then crashes it at each one:
//!   the claim stays held, as after a killed process, the lease lapses on
//!   tokio's paused clock, the call runs again to the end, and your
//!   `.invariant(|| …)` is checked (`.reset(|| …)` clears your effects
//!   first). The report names every failing point. A body with two effects
//!   (debit, credit) fails at the point between them; the same body with
//!   each effect in an `idem::step` passes.
//! - `FaultyStore::new(store)` fails (`fail_next`), loses the answer of
//!   (`lose_answer_next`: applied, then the caller sees `Error::Store`) or
//!   delays (`delay`) chosen operations; it is `Clone`, so arm it after
//!   handing it to a handle. The runtime sends a failed completion again
//!   while the claim's lease lasts, so one failure is absorbed: a store
//!   down for the whole lease is `fail_next(Op::Complete, u32::MAX)`.
//! - `probe(|idem| async { … })` returns the scope, record key and
//!   fingerprint a call would claim, in hex, without running it: pin them,
//!   and a refactor that changes a derived key (which would make every live
//!   record miss) fails a test instead.
//! - `sites()` lists every `#[idempotent]` function linked into the test
//!   binary, with its key, scope and fingerprint expressions as written and
//!   its options: assert coverage, or generate the table of mutating entry
//!   points. The registration is a static the linker collects; without the
//!   feature the attribute emits none, and either way a call does no work
//!   for it.
//!
//! The calls under test must run on the handle the kit gives them
//! (`store = idem` with `skip(idem)` on the attribute, or `idem.call(…)`).
//! `integration/tests/all/testing_kit_example.rs` is a file to copy: a payment
//! with two effects, crash-tested, its key and fingerprint pinned, a store
//! fault, and the reviewed inventory.
