//! What the cases share: unique scopes, run counters, direct claims, and
//! a few value and error types.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Fence, Retention, StepId, Token};
use idem::{Error, Idempotency};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A scope no other case or run uses, named after `case`: cases (and
/// runs) may share one store, or one server, and run in parallel.
///
/// ```
/// let a = idem_conformance::scope("burst");
/// assert!(a.starts_with("conformance/burst/"));
/// assert_ne!(a, idem_conformance::scope("burst"));
/// ```
pub fn scope(case: &str) -> String {
    format!("conformance/{case}/{:x}", rand_u64())
}

fn rand_u64() -> u64 {
    Token::random().to_u128() as u64
}

/// Counts body runs, shared by its clones.
///
/// ```
/// let runs = idem_conformance::Counter::default();
/// assert_eq!(runs.clone().bump(), 1);
/// assert_eq!(runs.get(), 1);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Counter(Arc<AtomicUsize>);

impl Counter {
    /// Adds one run; returns the count with it.
    pub fn bump(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The runs counted so far.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Receipt {
    pub(crate) id: u64,
    pub(crate) note: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Shape {
    Circle(u32),
    Square { side: u32 },
    Empty,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum AppError {
    Declined(String),
    Timeout,
    Idem(String),
}

impl From<Error> for AppError {
    fn from(err: Error) -> Self {
        AppError::Idem(err.to_string())
    }
}

/// Stores `value`, and replays it twice: the body runs once.
pub(crate) async fn twice<T>(idem: &Idempotency, case: &str, value: T)
where
    T: Serialize + DeserializeOwned + Clone + PartialEq + std::fmt::Debug + Send,
{
    twice_checked(idem, case, value, PartialEq::eq).await;
}

/// Stores `value`, replays it twice, and checks every answer with `same`
/// (for values `PartialEq` cannot compare, such as NaN).
pub(crate) async fn twice_checked<T>(
    idem: &Idempotency,
    case: &str,
    value: T,
    same: fn(&T, &T) -> bool,
) where
    T: Serialize + DeserializeOwned + Clone + std::fmt::Debug + Send,
{
    let scope = scope(case);
    let runs = Counter::default();
    for _ in 0..3 {
        let out: Result<T, Error> = idem
            .call(&scope, "k")
            .run(|| async {
                runs.bump();
                Ok(value.clone())
            })
            .await;
        let out = out.unwrap_or_else(|err| panic!("{case}: {err}"));
        assert!(same(&out, &value), "{case}: {out:?} is not {value:?}");
    }
    assert_eq!(runs.get(), 1, "{case}: the body ran more than once");
}

/// A claim with a fresh token, for cases that call the store directly.
///
/// ```
/// use std::time::Duration;
/// use idem::fingerprint::Fingerprint;
///
/// let a = idem_conformance::new_claim(Fingerprint::NONE, Duration::from_secs(5));
/// let b = idem_conformance::new_claim(Fingerprint::NONE, Duration::from_secs(5));
/// assert_ne!(a.token, b.token);
/// ```
pub fn new_claim(fingerprint: Fingerprint, lease: Duration) -> Claim {
    Claim::new(Token::random(), fingerprint, lease, "conformance")
}

/// Completes `key` in `scope` with raw record bytes, as an older or broken
/// writer would.
pub(crate) async fn plant(idem: &Idempotency, scope: &str, key: &str, record: &[u8]) {
    let key = RecordKey::new(scope, key);
    let claim = new_claim(Fingerprint::NONE, Duration::from_secs(5));
    assert!(matches!(
        idem.store().claim(&key, &claim).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    let done = idem
        .store()
        .complete(
            &key,
            claim.token,
            record,
            Retention::new(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    assert_eq!(done, Fence::Held);
}

/// Shares a store between handles with different settings, and counts
/// the claims that reach it: a case that needs a second handle (another
/// `max_record_bytes`) wraps the store under test in one, and a test of a
/// local cache counts the claims the cache saved.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::Arc;
/// use std::sync::atomic::Ordering;
/// use idem::{Error, Idempotency, MemoryStore};
///
/// let store = idem_conformance::SharedStore::new(Arc::new(MemoryStore::new()));
/// let claims = store.claims.clone();
/// let idem = Idempotency::new(store);
/// let out: Result<u8, Error> = idem.call("s", "k").run(|| async { Ok(1) }).await;
/// assert_eq!((out.unwrap(), claims.load(Ordering::SeqCst)), (1, 1));
/// # }
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct SharedStore {
    /// The store every call goes to.
    pub inner: Arc<dyn idem::Store>,
    /// How many claims reached `inner`.
    pub claims: Arc<AtomicUsize>,
    /// How long each claim's answer is held back after `inner` gave it
    /// (a slow network, a claim that waited on a row lock).
    pub claim_answer_delay: Duration,
}

impl std::fmt::Debug for SharedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedStore")
            .field("claims", &self.claims)
            .field("claim_answer_delay", &self.claim_answer_delay)
            .finish_non_exhaustive()
    }
}

impl SharedStore {
    /// Wraps `inner`, with no claim counted yet.
    pub fn new(inner: Arc<dyn idem::Store>) -> Self {
        Self {
            inner,
            claims: Arc::default(),
            claim_answer_delay: Duration::ZERO,
        }
    }

    /// The same store, answering each claim `delay` after `inner` did.
    pub fn answering_claims_after(mut self, delay: Duration) -> Self {
        self.claim_answer_delay = delay;
        self
    }
}

#[idem::store::async_trait]
impl idem::Store for SharedStore {
    async fn claim(
        &self,
        key: &RecordKey,
        claim: &Claim,
    ) -> Result<ClaimOutcome, idem::StoreError> {
        self.claims.fetch_add(1, Ordering::SeqCst);
        let answer = self.inner.claim(key, claim).await;
        if !self.claim_answer_delay.is_zero() {
            tokio::time::sleep(self.claim_answer_delay).await;
        }
        answer
    }
    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, idem::StoreError> {
        self.inner.complete(key, token, record, kept).await
    }
    async fn complete_again(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, idem::StoreError> {
        self.inner.complete_again(key, token, record, kept).await
    }
    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, idem::StoreError> {
        self.inner.release(key, token).await
    }
    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, idem::StoreError> {
        self.inner.renew(key, token, lease).await
    }
    async fn save_step(
        &self,
        key: &RecordKey,
        token: Token,
        step: StepId,
        value: &[u8],
        ttl: Duration,
    ) -> Result<Fence, idem::StoreError> {
        self.inner.save_step(key, token, step, value, ttl).await
    }
    fn records_steps(&self) -> bool {
        self.inner.records_steps()
    }
    async fn forget(&self, key: &RecordKey) -> Result<(), idem::StoreError> {
        self.inner.forget(key).await
    }
}
