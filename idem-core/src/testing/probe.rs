//! [`probe`]: the scope, key and fingerprint a call would claim, without
//! running it.

use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::key::hex;
use crate::store::{Claim, ClaimOutcome};
use crate::{Fingerprint, Idempotency, RecordKey, Store, StoreError};

/// What a call claims: its scope as text, and its record key and
/// fingerprint as 64 lowercase hex digits each, as a store keeps them
/// (`RecordKey::to_hex`, and the fingerprint's bytes).
///
/// Pin them in a test: a refactor that changes a derived key or
/// fingerprint (a renamed parameter's type, a new field, a moved scope)
/// would make every live record miss, silently.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Probe {
    /// The call's scope, as its `Display` writes it.
    pub scope: String,
    /// The record key: SHA-256 of scope and key, in hex.
    pub key: String,
    /// The fingerprint, in hex (64 zeros with `fingerprint = false`).
    pub fingerprint: String,
}

/// Runs `call` against a store that records the first claim and refuses
/// it, so no body runs, and returns what was claimed.
///
/// The call must run on the handle it is given (`store = idem` in the
/// attribute, or `idem.call(…)`).
///
/// # Panics
///
/// When the call made no claim (it never ran on the handle, or failed
/// before its claim, e.g. an empty key): there is nothing to pin, and a
/// test should say so.
///
/// ```
/// use idem::testing::probe;
/// use idem::{idempotent, Idempotency};
///
/// #[idempotent(key = order_id, scope = "payments", store = idem, skip(idem))]
/// async fn charge(idem: &Idempotency, order_id: &str, cents: u64) -> Result<u64, idem::Error> {
///     Ok(cents)
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let probe = probe(|idem| async move { charge(&idem, "order-1", 1200).await }).await;
/// assert_eq!(probe.scope, "payments");
/// assert_eq!(probe.key, idem::key::RecordKey::new(&"payments", &"order-1").to_hex());
/// assert_eq!(probe.fingerprint.len(), 64);
/// # }
/// ```
pub async fn probe<F, Fut>(call: F) -> Probe
where
    F: FnOnce(Idempotency) -> Fut,
    Fut: Future,
{
    let seen = Arc::new(Seen::default());
    let mut idem = Idempotency::new(Refusing(Arc::clone(&seen)));
    let noted = Arc::clone(&seen);
    Arc::get_mut(&mut idem.inner)
        .expect("a handle just built is not shared")
        .on_claim_failed = Some(Arc::new(move |scope| noted.scope(scope)));
    let _ = call(idem).await;
    let claimed = *seen.claim.lock().unwrap_or_else(PoisonError::into_inner);
    let (key, fingerprint) =
        claimed.expect("idem::testing::probe: the call made no claim on the handle it was given");
    Probe {
        scope: seen.scope.get().cloned().unwrap_or_default(),
        key: key.to_hex(),
        fingerprint: hex(fingerprint.as_bytes()),
    }
}

/// What the probe saw: the first call's scope (noted by the protocol)
/// and its claim.
#[derive(Default)]
struct Seen {
    scope: OnceLock<String>,
    claim: Mutex<Option<(RecordKey, Fingerprint)>>,
}

impl Seen {
    /// Notes a call's scope; only the first call's is kept.
    fn scope(&self, scope: &dyn std::fmt::Display) {
        let _ = self.scope.get_or_init(|| scope.to_string());
    }
}

/// Records the first claim, refuses every one.
struct Refusing(Arc<Seen>);

#[async_trait::async_trait]
impl Store for Refusing {
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        let mut seen = self.0.claim.lock().unwrap_or_else(PoisonError::into_inner);
        seen.get_or_insert((*key, claim.fingerprint));
        Err(refused())
    }

    async fn complete(
        &self,
        _: &RecordKey,
        _: crate::Token,
        _: &[u8],
        _: crate::store::Retention,
    ) -> Result<crate::Fence, StoreError> {
        Err(refused())
    }

    async fn release(&self, _: &RecordKey, _: crate::Token) -> Result<crate::Fence, StoreError> {
        Ok(crate::Fence::Held)
    }

    async fn renew(
        &self,
        _: &RecordKey,
        _: crate::Token,
        _: std::time::Duration,
    ) -> Result<crate::Fence, StoreError> {
        Err(refused())
    }

    async fn forget(&self, _: &RecordKey) -> Result<(), StoreError> {
        Err(refused())
    }
}

fn refused() -> StoreError {
    StoreError::new(
        "probe",
        std::io::Error::other("idem::testing::probe refuses every claim"),
    )
}
