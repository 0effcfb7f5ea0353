//! Reliability under faults: what each store does when things break.
//!
//! The stores were probed on private servers (never the shared ones) with the
//! faults an SRE tries before production. Fail closed and fencing held
//! throughout: no body ran without a won claim. These are the cases that
//! used to go wrong, and what they do now; each is a test
//! (`integration/tests/all/redis_fault.rs`, `postgres.rs`, `sqlite.rs`, the
//! conformance suite on every store):
//!
//! | fault | before | now | test |
//! | --- | --- | --- | --- |
//! | a result larger than `max_record_bytes` (1 MiB + 25 B), called 3 times | the body ran 3 times, each `Error::Codec` | the body runs once; the caller gets its value; duplicates get `CodecError::NotStored` for the TTL | `oversized_value_settles_the_key`, every store |
//! | a step's value larger than `max_record_bytes`, or whose `Serialize` fails, the call retried 3 times | the step ran 3 times (its effect repeated), each `Error::Codec` | the step runs once and is settled with a not-stored marker; every attempt gets `CodecError::StepNotStored`; the steps after it never run | `unsaveable_step_values_settle_the_step`, every store |
//! | a struct holding an integer-keyed map of itself 40 levels deep; a `u128` inside an untagged enum or `#[serde(flatten)]`; `-NaN` | stored, then every duplicate got `CodecError::ShapeChanged` for the whole TTL (recursion limit; "expected any value"); `-NaN` replayed as `NaN` | the tree replays (up to 256 nested levels); the wide integer is refused before it is stored (`Unreplayable`: the caller gets its value, duplicates `NotStored`); every NaN bit replays | `replays_values_json_cannot_carry`, `unencodable_value_settles_the_key`, every store |
//! | a body that blocks its thread 3 leases long, a duplicate after 2 leases (multi-thread runtime) | the duplicate took over and ran the body: two effects | the lease is renewed from a task of its own; the duplicate gets `InProgress`; one run | `a_body_that_blocks_its_thread_keeps_its_lease`, every store |
//! | PostgreSQL stops answering (answers held back, as by SIGSTOP) | callers hung as long as the stall (20 s) | `Error::Store` naming `response_timeout` after 0.5 s (the test's setting; default 5 s); calls work again after | `a_stalled_server_fails_callers_within_the_response_timeout` |
//! | Redis at `maxmemory` (noeviction), duplicates of completed records | 200/200 `Error::Store` (the claim is a write) | replayed from a read; new keys fail closed with the server's `OOM` | `a_full_redis_still_replays_completed_records` |
//! | PostgreSQL refusing writes (a read-only session, as on a standby) | — | completed records replay (the claim reads first); new keys fail closed | `a_read_only_server_still_replays_completed_records` |
//! | a Redis claim whose answer timed out (server paused 1.5 s by `CLIENT PAUSE`), applied afterwards | the key answered `InProgress` for the rest of the lease (~24 s) with no holder | the runtime ends the claim by its token once the server answers, letting it lapse rather than releasing it (it may have been a takeover, whose evidence a release would erase): the key ran again 1.36 s after the timed-out call returned, about 0.2 s after the pause ended (3 runs, measured when it released) | `a_claim_applied_after_its_timeout_lapses` |
//! | a PostgreSQL connection killed under a step, on a fresh connection | not re-sent: the body ran, the caller got `Error::Store`, the key ran again after the lease | the step is sent once more on a new connection, whether the lost one was idle or fresh (claims and completions are written to be repeated) | the connection-loss tests in `postgres.rs` |
//! | the SQLite file deleted or replaced while open, a second process opening the path | both sides ran every key (200/200 twice), no error | the open store's claims fail closed saying the file was deleted or replaced; reopen the store | `a_deleted_or_replaced_file_fails_closed` |
//! | a Redis connection lost after a completion reached the server, before its answer came back | the body ran and the record was stored, but the caller got `Error::Store` | the completion is sent once more on a new connection; it finds its own record (same TTL and bytes) and holds: the caller gets its value, duplicates replay it (5/5 keys) | `a_completion_whose_answer_was_lost_is_sent_again` |
//! | the PostgreSQL server itself frozen (SIGSTOP on the postmaster and every backend of a private server, 3 s) | — | each caller fails within its bound with the cause named: 0.50 s `response_timeout` on an open connection, 0.80 s `acquire_timeout` for a new one (the test's settings; defaults 5 s), "the server is stalled or unreachable"; the same store works after SIGCONT | `a_sigstopped_server_fails_callers_within_the_response_timeout` |
//! | a holder whose lease ran out with nobody else calling | `LeaseLost` said "another call may have taken the key over" | `LeaseLost { taken_over: false }` says the claim expired and the next call runs again; `taken_over: true` when another call holds or completed the key (every store tells the two apart) | `a_lapsed_claim_is_lost_as_expired`, `fencing_at_the_store` |
//!
//! With `wait_for_replicas`, a Redis completion is pipelined with `WAIT` and
//! not re-sent after a lost connection: the caller gets `Error::Store` and the
//! claim ends with its lease.
