//! The cases, one `async fn` each, taking the handle under test. Each works
//! in a scope of its own ([`scope`](crate::scope)), so cases may share one
//! store and run in parallel; some sleep for a few leases of a few hundred
//! milliseconds, and some block a worker thread, so run them on a
//! multi-thread runtime (as [`suite!`](crate::suite) does).

mod concurrency;
mod errors;
mod interactions;
mod keys;
mod leases;
mod reconcile;
mod rerun;
mod serde_forms;
mod steps;
mod steps_nested;
mod steps_unsaved;
mod store;
mod tombstones;
mod values;

pub use concurrency::{
    concurrent_duplicates_run_once_and_get_in_progress, concurrent_duplicates_wait_for_the_value,
};
pub use errors::{
    changed_type_is_a_codec_error_with_both_names, corrupt_record_is_a_codec_error,
    error_predicate_decides_per_error, other_payload_is_refused_without_running,
    oversized_value_settles_the_key, released_errors_run_again, replayed_errors_come_back,
};
pub use interactions::{
    a_claim_answered_late_holds_a_whole_lease, a_lapsed_claim_of_another_payload_is_a_mismatch,
    a_renewal_to_zero_lapses_the_claim, a_takeover_dropped_while_reconciling_stands,
    durations_past_the_longest_are_refused_before_the_claim,
};
pub use keys::{child_key_is_stable_across_retries, empty_key_is_refused, scopes_are_independent};
pub use leases::{
    a_body_that_blocks_its_thread_keeps_its_lease, a_lapsed_claim_is_lost_as_expired,
    dropped_call_releases_its_claim, lease_expiry_allows_takeover_and_fences_the_late_holder,
    renewal_keeps_a_long_body_claimed, ttl_expiry_runs_again,
};
pub use reconcile::{
    a_normal_call_never_reconciles, a_reconcile_that_finds_nothing_runs_the_body,
    a_takeover_reconciles_once_and_skips_the_body, takeover_is_reported_only_for_a_lapsed_claim,
};
pub use rerun::{
    a_rerun_claim_replaces_the_record_at_the_store,
    a_rerun_replays_the_same_update_and_runs_another, concurrent_updates_run_one_at_a_time,
};
pub use serde_forms::{replays_every_serde_form, unencodable_value_settles_the_key};
pub use steps::{
    a_call_dropped_mid_step_resumes_at_that_step, misused_steps_are_errors,
    step_fencing_at_the_store, steps_expire_with_the_ttl,
    steps_in_a_loop_resume_at_the_first_unfinished_line, steps_of_another_payload_are_refused,
    steps_resume_after_a_failed_middle_step, steps_under_concurrent_duplicates_run_once,
};
pub use steps_nested::a_call_with_steps_runs_inside_another_calls_step;
pub use steps_unsaved::unsaveable_step_values_settle_the_step;
pub use store::{
    a_completion_sent_again_knows_its_own, a_replayed_key_answers_what_it_holds_now,
    fencing_at_the_store, forget_removes_completed_and_in_progress_records,
    in_progress_reports_retry_after, release_lets_the_next_caller_in,
};
pub use tombstones::{
    a_tombstone_answers_expired_then_frees_the_key, a_tombstone_fences_the_late_holder,
    a_zero_tombstone_is_refused,
};
pub use values::{replays_every_ok_value, replays_values_json_cannot_carry};
