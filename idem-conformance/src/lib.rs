//! The conformance suite of [idem](https://docs.rs/idemkit)'s
//! [`Store`](idem::Store) trait: every protocol rule a store must keep,
//! written once, as one test per rule. Every built-in store runs it, and so
//! must yours.
//!
//! The rules: a key runs its body once however many duplicates arrive at
//! once; every `Ok` value replays as itself; errors are released or stored
//! as the policy says; another payload under a used key is refused; claims
//! are fenced by their token, renewed while the body runs, released when
//! the call is dropped, and expire by the store's clock; records expire
//! with their TTL; steps are saved, fenced and replayed; `forget` removes
//! a record; only a takeover of a vanished holder reconciles; a tombstone
//! answers a late duplicate `Expired` until it passes; a state update
//! (`mismatch = "rerun"`) replays its key's last payload, replaces the
//! record for another in the claim's one step, and runs one at a time.
//!
//! # Running it against your store
//!
//! Add the crate as a dev-dependency beside `idemkit`, and give
//! [`suite!`] an `async` block that builds a handle on a store of yours.
//! It expands to one `#[test]` per case, named after the case, each
//! running on a multi-thread runtime of its own:
//!
//! ```toml
//! [dev-dependencies]
//! idem-conformance = "0.1"
//! ```
//!
//! ```
//! // tests/conformance.rs
//! use idem::{Idempotency, MemoryStore};
//!
//! idem_conformance::suite!(async { Idempotency::new(MemoryStore::new()) });
//! # fn main() {}
//! ```
//!
//! The block runs once per case, so each case may get a store of its own
//! (a fresh file, a fresh table) or share one: every case works in a scope
//! no other case or run uses. Cases sleep a few leases of a few hundred
//! milliseconds; `cargo test` runs them in parallel.
//!
//! A store on its way to conformance may run a chosen subset, by name, and
//! any case can be awaited on its own:
//!
//! ```
//! use idem::{Idempotency, MemoryStore};
//!
//! idem_conformance::suite!(
//!     async { Idempotency::new(MemoryStore::new()) };
//!     fencing_at_the_store, release_lets_the_next_caller_in,
//! );
//!
//! # #[tokio::main] async fn main() {
//! idem_conformance::cases::fencing_at_the_store(Idempotency::new(MemoryStore::new())).await;
//! # }
//! ```
//!
//! A case that fails panics with what the store did wrong, as a test does.

pub mod cases;
mod support;

pub use support::{Counter, SharedStore, new_claim, scope};

/// One `#[test]` per conformance case, each on a fresh handle from an
/// `async` block (an expression whose output is an
/// [`Idempotency`](idem::Idempotency)).
///
/// `suite!(make)` runs every case; `suite!(make; case, case, …)` the named
/// ones of [`cases`]; `suite!(make; without_takeover)` every case but the
/// six that need a store to report `ClaimOutcome::Won::took_over` (for a
/// store of your own that cannot tell a lapsed claim from a free key yet);
/// `suite!(make; without_rerun)` every case but the three of state
/// updates (`mismatch = "rerun"`, [`Claim::rerun`](idem::store::Claim::rerun)),
/// for a store that does not replace records yet.
/// See the [crate docs](crate) for an example.
#[macro_export]
macro_rules! suite {
    ($make:expr $(,)?) => {
        $crate::suite!($make; without_rerun);
        $crate::suite!($make;
            a_rerun_replays_the_same_update_and_runs_another,
            a_rerun_claim_replaces_the_record_at_the_store, concurrent_updates_run_one_at_a_time,
        );
    };
    ($make:expr; without_rerun $(,)?) => {
        $crate::suite!($make; without_takeover);
        $crate::suite!($make;
            a_takeover_reconciles_once_and_skips_the_body,
            a_reconcile_that_finds_nothing_runs_the_body,
            takeover_is_reported_only_for_a_lapsed_claim,
            a_lapsed_claim_of_another_payload_is_a_mismatch,
            a_takeover_dropped_while_reconciling_stands, a_renewal_to_zero_lapses_the_claim,
        );
    };
    ($make:expr; without_takeover $(,)?) => {
        $crate::suite!($make;
            replays_every_ok_value, concurrent_duplicates_run_once_and_get_in_progress,
            concurrent_duplicates_wait_for_the_value, released_errors_run_again,
            replayed_errors_come_back, error_predicate_decides_per_error,
            other_payload_is_refused_without_running, ttl_expiry_runs_again,
            lease_expiry_allows_takeover_and_fences_the_late_holder,
            renewal_keeps_a_long_body_claimed, dropped_call_releases_its_claim,
            scopes_are_independent, fencing_at_the_store, a_completion_sent_again_knows_its_own,
            corrupt_record_is_a_codec_error,
            changed_type_is_a_codec_error_with_both_names, child_key_is_stable_across_retries,
            empty_key_is_refused, oversized_value_settles_the_key,
            release_lets_the_next_caller_in, in_progress_reports_retry_after,
            a_body_that_blocks_its_thread_keeps_its_lease, a_lapsed_claim_is_lost_as_expired,
            steps_resume_after_a_failed_middle_step,
            steps_in_a_loop_resume_at_the_first_unfinished_line,
            a_call_dropped_mid_step_resumes_at_that_step,
            steps_under_concurrent_duplicates_run_once, steps_of_another_payload_are_refused,
            steps_expire_with_the_ttl, misused_steps_are_errors, step_fencing_at_the_store,
            unsaveable_step_values_settle_the_step,
            a_call_with_steps_runs_inside_another_calls_step,
            replays_values_json_cannot_carry, replays_every_serde_form,
            unencodable_value_settles_the_key,
            forget_removes_completed_and_in_progress_records, a_normal_call_never_reconciles,
            a_replayed_key_answers_what_it_holds_now,
            a_tombstone_answers_expired_then_frees_the_key, a_tombstone_fences_the_late_holder,
            a_zero_tombstone_is_refused, a_claim_answered_late_holds_a_whole_lease,
            durations_past_the_longest_are_refused_before_the_claim,
        );
    };
    ($make:expr; $($case:ident),+ $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::__run(async { $crate::cases::$case($make.await).await });
            }
        )+
    };
}

/// Runs one case to its end on a multi-thread runtime of its own: some
/// cases block a worker thread on purpose, and the lease must still be
/// renewed from another.
#[doc(hidden)]
pub fn __run(case: impl Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("a tokio runtime for the case")
        .block_on(case);
}
