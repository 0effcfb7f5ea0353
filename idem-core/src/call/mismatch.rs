//! What a call does when its key's completed record was made with another
//! payload: [`Mismatch`], set with [`Call::mismatch`].

use super::Call;

/// What a call whose fingerprint differs from its key's completed record
/// gets (SPEC §3, the attribute's `mismatch = "refuse" | "rerun"`).
///
/// - [`Refuse`](Mismatch::Refuse), the default: the key names one
///   request, so another payload under it is
///   [`Error::FingerprintMismatch`](crate::Error::FingerprintMismatch).
/// - [`Rerun`](Mismatch::Rerun): the key names a *resource* (an order's
///   status, a user's profile), and the call is a state update. A call
///   whose payload is the one the last completed call had replays that
///   call's value without running (no second update, `update_time`,
///   message or cache invalidation); another payload runs, and its record
///   replaces the old one. The store replaces the record in the claim's
///   one atomic round trip, so a stale duplicate can never slip in
///   between.
///
/// Under either, a call never runs beside another holder of the key: the
/// claim is the lock, so the updates of one resource run one at a time.
/// A call that finds the key held (by any payload) waits up to its
/// [`wait`](Call::wait), then gets `Error::InProgress`. What the other
/// rules mean under `Rerun`:
///
/// - **Fencing**: unchanged. A holder whose lease ran out and was taken
///   over gets `Error::LeaseLost`; its value is not stored.
/// - **Steps**: the steps of a replaced call are dropped with its record;
///   a new run starts from its first step. Steps still resume a retry of
///   the same payload after a released error, a drop or a crash.
/// - **Reconcile and lapsed claims**: a claim whose holder vanished is
///   taken over, and reconciled, only by a call of its own payload, as
///   under `Refuse`: the vanished holder may have had its effect. A call
///   with another payload is answered `Error::FingerprintMismatch` until
///   that payload's retry (or `forget`) settles the key.
/// - **Tombstones**: a tombstone of the same payload still answers
///   `Error::Expired`; one of another payload is replaced like a record.
/// - **A local cache** ([`IdempotencyBuilder::local_cache`](crate::IdempotencyBuilder::local_cache))
///   is not consulted or filled: another host may have replaced the
///   record meanwhile.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use idem::Mismatch;
/// let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let set_status = |status: &'static str| {
///     idem.call("orders", "7/status")
///         .mismatch(Mismatch::Rerun)
///         .fingerprint(&status)
///         .run(move || async move { Ok::<_, idem::Error>(format!("now {status}")) })
/// };
/// assert_eq!(set_status("paid").await.unwrap(), "now paid");
/// assert_eq!(set_status("paid").await.unwrap(), "now paid"); // replayed, not run
/// assert_eq!(set_status("shipped").await.unwrap(), "now shipped"); // ran, replaced
/// assert_eq!(set_status("paid").await.unwrap(), "now paid"); // a change again: ran
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mismatch {
    /// Another payload under a completed key is
    /// `Error::FingerprintMismatch` (the default).
    #[default]
    Refuse,
    /// Another payload under a completed key runs, and its record replaces
    /// the old one; the last completed payload replays.
    Rerun,
}

impl<P, R, W> Call<P, R, W> {
    /// What a payload other than the completed record's gets:
    /// [`Mismatch::Refuse`] (the default) or [`Mismatch::Rerun`], for a
    /// key that names a resource. See [`Mismatch`].
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let call = idem.call("orders", "7/status").mismatch(idem::Mismatch::Rerun);
    /// # let _ = call;
    /// ```
    pub fn mismatch(mut self, mismatch: Mismatch) -> Self {
        self.reruns = mismatch == Mismatch::Rerun;
        self
    }
}
