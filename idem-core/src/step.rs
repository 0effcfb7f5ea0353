//! Recovery points: `idem::step` saves each finished step of a call, so a
//! retried call replays them and resumes at the first unfinished one.

use std::sync::PoisonError;

use bytes::Bytes;
use serde::{Serialize, de::DeserializeOwned};

use crate::context::{self, StepCall};
use crate::key::{self, KeyPart};
use crate::record::{self, Kind};
use crate::{Body, Error, Fence, Fingerprint, RecordKey, StepId};

tokio::task_local! {
    /// The key of the call whose step's body is running. A step of that
    /// same call inside it is refused; another call started inside it has
    /// its own key (and context), so its steps run: library functions
    /// that use steps compose.
    static IN_STEP: RecordKey;
}

const OUTSIDE: &str = "called outside a running idempotent body (`#[idempotent]` or `Call::run`)";
const NESTED: &str = "called inside another step of the same call; steps do not nest (a separate idempotent call inside a step may use steps of its own)";
const NO_ROOM: &str = "the handle's `max_record_bytes` is smaller than the smallest record of the step's type, so its value could never be saved";
/// The most of a codec error's text kept in a step's not-stored marker.
const REASON_BYTES: usize = 512;
const TWICE: &str = "its name was already used by a finished or running step of this call; give each step its own name (e.g. `(\"line\", i)` in a loop)";
pub(crate) const BORROWED: &str = "the call runs on a borrowed store (`Call::on`), which cannot record steps: a step saved inside the caller's transaction would roll back with it";
pub(crate) const UNSUPPORTED: &str = "the call's store does not record steps (`Store::records_steps` is false): a transactional store, whose saved steps would roll back with its transaction, or one without `Store::save_step`";

/// Runs one step of the running idempotent call, or replays it.
///
/// If an earlier attempt of this call (one that returned a released `Err`,
/// was dropped, crashed, or lost its lease) finished the step named `name`,
/// its stored `Ok` value is returned and `body` does not run. Otherwise
/// `body` runs; its `Ok` value is saved under the call (one store round
/// trip, fenced by the call's claim) before it is returned, and its `Err`
/// is returned unsaved, so a retry runs the step again. Steps expire with
/// the call's record (its `ttl`).
///
/// `name` is any key part: `"charge"`, or `("line", i)` in a loop. The
/// step sees the call's [`child_key`](crate::child_key)s, so a step that
/// was in flight when its process died sends a downstream API the same key
/// again when it reruns.
///
/// A value that cannot be saved (its record is larger than the handle's
/// `max_record_bytes`, or its `Serialize` fails) still settles the step,
/// as an unstorable result settles a whole call: a not-stored marker is
/// saved in its place, and this attempt and every retry of the call get
/// `Error::Codec(`[`CodecError::StepNotStored`](crate::CodecError::StepNotStored)`)` at that step
/// without running `body` again, until the call's steps expire with its
/// `ttl` (or the key is forgotten). The value's size and `Serialize` are
/// only known once `body` made it; what can be known before (a limit too
/// small for any record of `T`) is refused before `body` runs.
///
/// Steps compose across calls: a function that makes an idempotent call of
/// its own, with steps of its own, may run inside a step of another call
/// (its call has its own key, context and steps). Within one call, a step
/// inside a step is refused.
///
/// `Err(Error::InvalidStep)` (converted into `E`), before `body` runs, never
/// a panic: outside an idempotent body, inside another step of the same
/// call, for a name already used by a finished step of this call, for a
/// `T` whose smallest record exceeds `max_record_bytes`, or in a call whose
/// store cannot keep steps (`Call::on`, a transaction's handle: see
/// [`Store::records_steps`](crate::Store::records_steps)).
/// A store failure while saving is `Error::Store`; a claim lost to another
/// caller is `Error::LeaseLost`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
/// let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let (charges, carrier_up) = (AtomicU32::new(0), AtomicBool::new(false));
/// let order = || async {
///     let receipt: u32 = idem::step("charge", || async {
///         Ok::<_, idem::Error>(100 + charges.fetch_add(1, SeqCst))
///     })
///     .await?;
///     if !carrier_up.load(SeqCst) {
///         // A released error: the call may be retried.
///         return Err(idem::Error::InvalidKey("carrier down".into()));
///     }
///     Ok(receipt)
/// };
/// assert!(idem.call("orders", "o-1").run(order).await.is_err());
/// carrier_up.store(true, SeqCst);
/// let receipt: u32 = idem.call("orders", "o-1").run(order).await.unwrap();
/// assert_eq!(receipt, 100); // the charge was replayed, not run again
/// assert_eq!(charges.load(SeqCst), 1);
/// # }
/// ```
///
/// A value too large to save runs once; the call fails at it every time:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
/// use idem::{CodecError, Error};
/// let store = idem::MemoryStore::new();
/// let idem = idem::Idempotency::builder(store).max_record_bytes(1024).build();
/// let renders = AtomicU32::new(0);
/// let order = || async {
///     let _page: String = idem::step("render", || async {
///         renders.fetch_add(1, SeqCst);
///         Ok::<_, Error>("x".repeat(4096))
///     })
///     .await?;
///     Ok::<_, Error>(())
/// };
/// for _ in 0..2 {
///     let err = idem.call("orders", "o-2").run(order).await.unwrap_err();
///     assert!(matches!(err, Error::Codec(CodecError::StepNotStored { .. })));
/// }
/// assert_eq!(renders.load(SeqCst), 1);
/// # }
/// ```
pub async fn step<N, T, E, F>(name: N, body: F) -> Result<T, E>
where
    N: KeyPart,
    T: Serialize + DeserializeOwned,
    E: From<Error>,
    F: Body<T, E>,
{
    let id = StepId::new(&name);
    let refuse = |reason: &'static str| {
        Err(Error::InvalidStep {
            step: key::describe(&name),
            reason,
        }
        .into())
    };
    let entered = context::with_running(|running| {
        if IN_STEP.try_with(|outer| *outer == running.key) == Ok(true) {
            return Err(NESTED);
        }
        let call = running.steps.as_ref().map_err(|reason| *reason)?;
        if !record::has_room::<T>(call.limit) {
            return Err(NO_ROOM);
        }
        enter(call, id).map(|stored| (running.key, call.prepared(), stored))
    });
    let (key, call, stored) = match entered {
        None => return refuse(OUTSIDE),
        Some(Err(reason)) => return refuse(reason),
        Some(Ok(entered)) => entered,
    };
    let mut guard = Entered { id, done: false };
    if let Some(stored) = stored {
        guard.done = true;
        tracing::debug!(scope = %call.scope, key = %key.short(), step = %key::describe(&name), "idem: step replayed");
        return replay(&stored, call.version, || key::describe(&name))
            .map_err(|err| Error::Codec(err).into());
    }
    let value = IN_STEP.scope(key, body()).await?;
    // A value that cannot be saved still settles the step, with a marker:
    // its effect happened, so a retry must not run it again.
    let (bytes, unsaved) = match encoded(&value, &call) {
        Ok(bytes) => (bytes, None),
        Err(err) => {
            let reason = bounded(err.to_string());
            (marker(&reason, &call), Some(reason))
        }
    };
    match call
        .store
        .save_step(&key, call.token, id, &bytes, call.ttl)
        .await
    {
        Ok(Fence::Held) => {
            guard.done = true;
            let step = key::describe(&name);
            let Some(reason) = unsaved else {
                tracing::debug!(scope = %call.scope, key = %key.short(), %step, "idem: step saved");
                return Ok(value);
            };
            tracing::warn!(scope = %call.scope, key = %key.short(), %step, %reason, "idem: step's value cannot be saved; it is settled as not stored, and this call's attempts fail at it until its steps expire");
            Err(Error::Codec(crate::CodecError::StepNotStored { step, reason }).into())
        }
        Ok(lost) => {
            let taken_over = lost == Fence::Lost;
            tracing::warn!(scope = %call.scope, key = %key.short(), taken_over, "idem: lease lost; step not saved");
            Err(Error::LeaseLost {
                scope: call.scope.to_string(),
                key: key.short(),
                taken_over,
            }
            .into())
        }
        Err(err) => {
            tracing::warn!(scope = %call.scope, key = %key.short(), error = %err, "idem: step not saved");
            Err(Error::Store(err).into())
        }
    }
}

/// Marks `id` as reached in this attempt and returns its stored value if an
/// earlier attempt finished it.
fn enter(call: &StepCall, id: StepId) -> Result<Option<Bytes>, &'static str> {
    let mut seen = call.seen.lock().unwrap_or_else(PoisonError::into_inner);
    if seen.contains(&id) {
        return Err(TWICE);
    }
    seen.push(id);
    Ok(call
        .finished
        .iter()
        .find(|(finished, _)| *finished == id)
        .map(|(_, bytes)| bytes.clone()))
}

/// Forgets a step that did not finish (its body failed or was dropped), so
/// the body may run it again in this attempt.
struct Entered {
    id: StepId,
    done: bool,
}

impl Drop for Entered {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let id = self.id;
        context::with_running(|running| {
            if let Ok(call) = &running.steps {
                let mut seen = call.seen.lock().unwrap_or_else(PoisonError::into_inner);
                seen.retain(|seen| *seen != id);
            }
        });
    }
}

/// A step's value as saved: the call's fingerprint, then the record.
fn encoded<T: Serialize>(value: &T, call: &Prepared) -> Result<Vec<u8>, crate::CodecError> {
    let mut record = record::encode(Kind::Ok, value, call.limit)?;
    record::set_version(&mut record, call.version);
    let mut bytes = Vec::with_capacity(32 + record.len());
    bytes.extend_from_slice(call.fingerprint.as_bytes());
    bytes.extend_from_slice(&record);
    Ok(bytes)
}

/// The marker that settles a step whose value could not be saved: the
/// call's fingerprint, then a not-stored record, so stores keep it as any
/// step's bytes.
fn marker(reason: &str, call: &Prepared) -> Vec<u8> {
    let record = record::not_stored(reason);
    let mut bytes = Vec::with_capacity(32 + record.len());
    bytes.extend_from_slice(call.fingerprint.as_bytes());
    bytes.extend_from_slice(&record);
    bytes
}

/// `reason` cut to [`REASON_BYTES`] (on a char boundary): a value's own
/// error text must not make the marker too large to save.
fn bounded(mut reason: String) -> String {
    if reason.len() > REASON_BYTES {
        let mut end = REASON_BYTES;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
        reason.push('…');
    }
    reason
}

/// A saved step's value, or the error its not-stored marker stands for.
fn replay<T: DeserializeOwned>(
    bytes: &[u8],
    version: u32,
    step: impl FnOnce() -> String,
) -> Result<T, crate::CodecError> {
    let record = bytes.get(32..).ok_or(crate::CodecError::Corrupt(
        "step value shorter than its header",
    ))?;
    let parsed = record::parse(record)?;
    if parsed.kind == Kind::NotStored {
        return Err(crate::CodecError::StepNotStored {
            step: step(),
            reason: parsed.not_stored_reason(),
        });
    }
    parsed.check_version(version)?;
    parsed.decode()
}

/// Whether every finished step was saved by a call with a matching payload:
/// a retry with another payload must not replay the first one's steps.
pub(crate) fn steps_match(finished: &[(StepId, Bytes)], fingerprint: &Fingerprint) -> bool {
    finished.iter().all(|(_, bytes)| {
        bytes.get(..32).is_some_and(|stored| {
            let stored: [u8; 32] = stored.try_into().unwrap_or([0; 32]);
            fingerprint.matches(&Fingerprint::from_bytes(stored))
        })
    })
}

/// The call's settings a step needs across its awaits.
pub(crate) struct Prepared {
    store: std::sync::Arc<dyn crate::Store>,
    token: crate::Token,
    ttl: std::time::Duration,
    limit: usize,
    version: u32,
    fingerprint: Fingerprint,
    scope: crate::key::ScopeText,
}

impl StepCall {
    fn prepared(&self) -> Prepared {
        Prepared {
            store: self.store.clone(),
            token: self.token,
            ttl: self.ttl,
            limit: self.limit,
            version: self.version,
            fingerprint: self.fingerprint,
            scope: self.scope.clone(),
        }
    }
}
