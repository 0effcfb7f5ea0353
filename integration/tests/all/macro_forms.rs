//! `#[idempotent]` at run time, form by form: each supported kind of fn runs
//! its body once and replays, and each option (`key`, `scope`, `ttl`,
//! `lease`, `wait`, `fingerprint`, `skip`, `errors`, `store`) does what the
//! attribute's docs say.
//!
//! Every fn names its store with `store = …` (`idem::install` is process
//! wide), and counts how often its body really ran.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use idem::{Idempotency, MemoryStore, idempotent};
use serde::{Deserialize, Serialize};

fn handle() -> Idempotency {
    Idempotency::new(MemoryStore::new())
}

/// A store per fn (or group of fns), so tests do not share records.
macro_rules! store {
    ($name:ident) => {
        static $name: LazyLock<Idempotency> = LazyLock::new(handle);
    };
}

/// A body counter per fn.
macro_rules! counter {
    ($name:ident) => {
        static $name: AtomicU32 = AtomicU32::new(0);
    };
}

fn count(counter: &AtomicU32) -> u32 {
    counter.fetch_add(1, Ordering::SeqCst) + 1
}

// ---- forms -------------------------------------------------------------

store!(FREE);
counter!(FREE_RUNS);

#[idempotent(store = FREE)]
async fn free(order: String, amount: u64) -> Result<(u32, u64), idem::Error> {
    let _ = order;
    Ok((count(&FREE_RUNS), amount))
}

#[tokio::test]
async fn free_fn_runs_once_and_replays() {
    let first = free("o-1".into(), 5).await.unwrap();
    assert_eq!(first, (1, 5));
    assert_eq!(free("o-1".into(), 5).await.unwrap(), first);
    assert_eq!(free("o-2".into(), 5).await.unwrap(), (2, 5));
    assert_eq!(FREE_RUNS.load(Ordering::SeqCst), 2);
}

struct Service {
    idem: Idempotency,
    runs: AtomicU32,
    log: Vec<String>,
}

impl Service {
    fn new() -> Self {
        Service {
            idem: handle(),
            runs: AtomicU32::new(0),
            log: Vec::new(),
        }
    }

    #[idempotent(store = self.idem)]
    async fn by_ref(&self, order: u64) -> Result<u32, idem::Error> {
        let _ = order;
        Ok(count(&self.runs))
    }

    #[idempotent(store = self.idem.clone())]
    async fn by_mut(&mut self, entry: String) -> Result<usize, idem::Error> {
        self.log.push(entry);
        Ok(self.log.len())
    }

    #[idempotent(store = self.idem)]
    async fn by_arc(self: Arc<Self>, order: u64) -> Result<u32, idem::Error> {
        let _ = order;
        Ok(count(&self.runs))
    }
}

#[tokio::test]
async fn ref_self_method_runs_once_and_replays() {
    let service = Service::new();
    assert_eq!(service.by_ref(1).await.unwrap(), 1);
    assert_eq!(service.by_ref(1).await.unwrap(), 1);
    assert_eq!(service.by_ref(2).await.unwrap(), 2);
}

#[tokio::test]
async fn mut_self_method_runs_once_and_replays() {
    let mut service = Service::new();
    assert_eq!(service.by_mut("a".into()).await.unwrap(), 1);
    assert_eq!(service.by_mut("a".into()).await.unwrap(), 1);
    assert_eq!(service.by_mut("b".into()).await.unwrap(), 2);
    assert_eq!(service.log, ["a", "b"]);
}

#[tokio::test]
async fn arc_self_method_runs_once_and_replays() {
    let service = Arc::new(Service::new());
    assert_eq!(Arc::clone(&service).by_arc(1).await.unwrap(), 1);
    assert_eq!(Arc::clone(&service).by_arc(1).await.unwrap(), 1);
    assert_eq!(service.runs.load(Ordering::SeqCst), 1);
}

store!(GENERIC);
counter!(GENERIC_RUNS);

#[idempotent(store = GENERIC)]
async fn generic<T: Serialize + Send>(item: T) -> Result<u32, idem::Error> {
    let _ = item;
    Ok(count(&GENERIC_RUNS))
}

#[tokio::test]
async fn generic_fn_runs_once_and_replays() {
    assert_eq!(generic("a").await.unwrap(), 1);
    assert_eq!(generic("a").await.unwrap(), 1);
    assert_eq!(generic(vec![1u8, 2]).await.unwrap(), 2);
    assert_eq!(GENERIC_RUNS.load(Ordering::SeqCst), 2);
}

trait Handler {
    async fn handle(&self, message_id: String) -> Result<u32, idem::Error>;
}

struct Consumer {
    idem: Idempotency,
    runs: AtomicU32,
}

impl Handler for Consumer {
    #[idempotent(store = self.idem, key = message_id, scope = "consumer")]
    async fn handle(&self, message_id: String) -> Result<u32, idem::Error> {
        Ok(count(&self.runs))
    }
}

#[tokio::test]
async fn trait_impl_method_runs_once_and_replays() {
    let consumer = Consumer {
        idem: handle(),
        runs: AtomicU32::new(0),
    };
    assert_eq!(consumer.handle("m-1".into()).await.unwrap(), 1);
    assert_eq!(consumer.handle("m-1".into()).await.unwrap(), 1);
    assert_eq!(consumer.handle("m-2".into()).await.unwrap(), 2);
}

store!(SPAWNED);

#[idempotent(store = SPAWNED, key = id)]
async fn spawned(id: String) -> Result<String, idem::Error> {
    tokio::task::yield_now().await;
    Ok(id)
}

#[tokio::test]
async fn futures_of_annotated_fns_are_send() {
    fn assert_send<F: Future + Send>(future: F) -> F {
        future
    }
    let task = tokio::spawn(assert_send(spawned("s-1".into())));
    assert_eq!(task.await.unwrap().unwrap(), "s-1");
}

// ---- key, scope, skip, fingerprint -------------------------------------

#[derive(Debug, PartialEq, Serialize, Deserialize)]
enum AppError {
    Declined,
    Timeout,
    Idem(String),
}

impl From<idem::Error> for AppError {
    fn from(error: idem::Error) -> Self {
        AppError::Idem(match error {
            idem::Error::FingerprintMismatch { .. } => "mismatch".into(),
            idem::Error::NotConfigured => "not configured".into(),
            other => other.to_string(),
        })
    }
}

fn mismatch() -> AppError {
    AppError::Idem("mismatch".into())
}

store!(SKIP);
counter!(SKIP_RUNS);

#[idempotent(store = SKIP, skip(note))]
async fn with_skip(order: u64, note: String) -> Result<u32, AppError> {
    let _ = (order, note);
    Ok(count(&SKIP_RUNS))
}

#[tokio::test]
async fn a_skipped_parameter_is_not_in_the_derived_key_nor_fingerprint() {
    assert_eq!(with_skip(1, "first".into()).await, Ok(1));
    // Another note, same order: the same record, replayed.
    assert_eq!(with_skip(1, "second".into()).await, Ok(1));
    // Another order: another record.
    assert_eq!(with_skip(2, "first".into()).await, Ok(2));
}

store!(KEYED);
counter!(KEYED_RUNS);

#[idempotent(store = KEYED, key = order)]
async fn keyed(order: String, amount: u64) -> Result<u32, AppError> {
    let _ = amount;
    Ok(count(&KEYED_RUNS))
}

#[tokio::test]
async fn an_explicit_key_keeps_the_derived_fingerprint() {
    assert_eq!(keyed("o-1".into(), 5).await, Ok(1));
    assert_eq!(keyed("o-1".into(), 5).await, Ok(1));
    // Same key, other payload: refused, converted into the fn's own error.
    assert_eq!(keyed("o-1".into(), 6).await, Err(mismatch()));
    assert_eq!(keyed("o-2".into(), 6).await, Ok(2));
}

store!(UNCHECKED);
counter!(UNCHECKED_RUNS);

#[idempotent(store = UNCHECKED, key = order, fingerprint = false)]
async fn unchecked(order: String, amount: u64) -> Result<u32, AppError> {
    let _ = amount;
    Ok(count(&UNCHECKED_RUNS))
}

#[tokio::test]
async fn fingerprint_false_replays_whatever_the_payload() {
    assert_eq!(unchecked("o-1".into(), 5).await, Ok(1));
    assert_eq!(unchecked("o-1".into(), 6).await, Ok(1));
}

#[derive(Serialize)]
struct Charge {
    key: String,
    amount: u64,
    trace_id: u64,
}

store!(PAYLOAD);
counter!(PAYLOAD_RUNS);

#[idempotent(store = PAYLOAD, key = req.key, fingerprint = req.amount)]
async fn fingerprinted(req: Charge) -> Result<u32, AppError> {
    let _ = (req.key, req.trace_id);
    Ok(count(&PAYLOAD_RUNS))
}

#[tokio::test]
async fn fingerprint_expr_is_what_must_match() {
    let charge = |amount, trace_id| Charge {
        key: "o-1".into(),
        amount,
        trace_id,
    };
    assert_eq!(fingerprinted(charge(5, 1)).await, Ok(1));
    // Another trace id is not in the fingerprint: replayed.
    assert_eq!(fingerprinted(charge(5, 2)).await, Ok(1));
    assert_eq!(fingerprinted(charge(6, 1)).await, Err(mismatch()));
}

store!(SCOPES);
counter!(SCOPE_RUNS);

#[idempotent(store = SCOPES, key = id, scope = "refunds")]
async fn refund(id: String) -> Result<u32, AppError> {
    Ok(count(&SCOPE_RUNS))
}

#[idempotent(store = SCOPES, key = id, scope = "refunds")]
async fn refund_again(id: String) -> Result<u32, AppError> {
    let _ = id;
    Ok(1000 + count(&SCOPE_RUNS))
}

#[idempotent(store = SCOPES, key = id, scope = ("payouts", tenant))]
async fn payout(tenant: u64, id: String) -> Result<u32, AppError> {
    Ok(count(&SCOPE_RUNS))
}

#[tokio::test]
async fn scope_namespaces_the_key() {
    assert_eq!(refund("k".into()).await, Ok(1));
    // Same scope, same key: the same record, even from another fn.
    assert_eq!(refund_again("k".into()).await, Ok(1));
    // Same key in other scopes: other records.
    assert_eq!(payout(1, "k".into()).await, Ok(2));
    assert_eq!(payout(2, "k".into()).await, Ok(3));
    assert_eq!(payout(1, "k".into()).await, Ok(2));
}

store!(DEFAULT_SCOPES);

#[idempotent(store = DEFAULT_SCOPES)]
async fn first_of_twins(order: u64) -> Result<String, AppError> {
    let _ = order;
    Ok("first".into())
}

#[idempotent(store = DEFAULT_SCOPES)]
async fn second_of_twins(order: u64) -> Result<String, AppError> {
    let _ = order;
    Ok("second".into())
}

#[tokio::test]
async fn the_default_scope_is_the_fn() {
    assert_eq!(first_of_twins(1).await.unwrap(), "first");
    assert_eq!(second_of_twins(1).await.unwrap(), "second");
    assert_eq!(first_of_twins(1).await.unwrap(), "first");
}

// ---- computed before the body ------------------------------------------

store!(MUTATING);
counter!(MUTATING_RUNS);

#[idempotent(store = MUTATING)]
async fn mutates_derived(mut items: Vec<u32>) -> Result<(u32, Vec<u32>), AppError> {
    items.push(99);
    Ok((count(&MUTATING_RUNS), items))
}

#[idempotent(store = MUTATING, key = id, fingerprint = amount)]
async fn mutates_explicit(mut id: String, mut amount: u64) -> Result<(u32, String), AppError> {
    id.push_str("-changed");
    amount += 1;
    let _ = amount;
    Ok((count(&MUTATING_RUNS), id))
}

#[tokio::test]
async fn key_and_fingerprint_are_computed_before_the_body_mutates_its_arguments() {
    let first = mutates_derived(vec![1, 2]).await.unwrap();
    assert_eq!(first, (1, vec![1, 2, 99]));
    // The record was completed under the key of the arguments as passed.
    assert_eq!(mutates_derived(vec![1, 2]).await.unwrap(), first);
    assert_eq!(mutates_derived(vec![1, 2, 99]).await.unwrap().0, 2);

    let first = mutates_explicit("o-1".into(), 5).await.unwrap();
    assert_eq!(first, (3, "o-1-changed".to_owned()));
    assert_eq!(mutates_explicit("o-1".into(), 5).await.unwrap(), first);
    assert_eq!(mutates_explicit("o-1".into(), 6).await, Err(mismatch()));
    assert_eq!(MUTATING_RUNS.load(Ordering::SeqCst), 3);
}

// ---- each fn keeps its own settings ------------------------------------

store!(TTLS);
counter!(SHORT_RUNS);
counter!(LONG_RUNS);

#[idempotent(store = TTLS, key = id, ttl = "1s")]
async fn short_lived(id: u64) -> Result<u32, AppError> {
    Ok(count(&SHORT_RUNS))
}

#[idempotent(store = TTLS, key = id, ttl = "1h", lease = Duration::from_millis(900))]
async fn long_lived(id: u64) -> Result<u32, AppError> {
    Ok(count(&LONG_RUNS))
}

#[tokio::test(start_paused = true)]
async fn each_fn_keeps_its_own_ttl() {
    // Called in both orders: no "first call wins" between fns.
    assert_eq!(long_lived(1).await, Ok(1));
    assert_eq!(short_lived(1).await, Ok(1));
    assert_eq!(long_lived(2).await, Ok(2));
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(short_lived(1).await, Ok(2), "the 1s record has expired");
    assert_eq!(long_lived(1).await, Ok(1), "the 1h record is replayed");
    assert_eq!(long_lived(2).await, Ok(2), "the 1h record is replayed");
}

// ---- errors ------------------------------------------------------------

store!(ERRORS);
counter!(RELEASE_RUNS);
counter!(REPLAY_RUNS);
counter!(PICKED_RUNS);

#[idempotent(store = ERRORS, key = id, scope = "release")]
async fn releases(id: u64) -> Result<u32, AppError> {
    count(&RELEASE_RUNS);
    Err(AppError::Timeout)
}

#[idempotent(store = ERRORS, key = id, scope = "replay", errors = "replay")]
async fn replays(id: u64) -> Result<u32, AppError> {
    let _ = id;
    Err(AppError::Idem(count(&REPLAY_RUNS).to_string()))
}

fn is_final(error: &AppError) -> bool {
    matches!(error, AppError::Declined)
}

#[idempotent(store = ERRORS, key = id, scope = "picked", errors = is_final)]
async fn picks(id: u64) -> Result<u32, AppError> {
    count(&PICKED_RUNS);
    Err(if id == 0 {
        AppError::Declined
    } else {
        AppError::Timeout
    })
}

#[tokio::test]
async fn error_policies() {
    assert_eq!(releases(1).await, Err(AppError::Timeout));
    assert_eq!(releases(1).await, Err(AppError::Timeout));
    assert_eq!(
        RELEASE_RUNS.load(Ordering::SeqCst),
        2,
        "released: ran again"
    );

    assert_eq!(replays(1).await, Err(AppError::Idem("1".into())));
    assert_eq!(replays(1).await, Err(AppError::Idem("1".into())));
    assert_eq!(REPLAY_RUNS.load(Ordering::SeqCst), 1, "stored: replayed");

    assert_eq!(picks(0).await, Err(AppError::Declined));
    assert_eq!(picks(0).await, Err(AppError::Declined));
    assert_eq!(picks(1).await, Err(AppError::Timeout));
    assert_eq!(picks(1).await, Err(AppError::Timeout));
    assert_eq!(
        PICKED_RUNS.load(Ordering::SeqCst),
        3,
        "declined stored once, timeouts released"
    );
}

#[idempotent]
async fn uses_the_installed_handle(order: u64) -> Result<u64, AppError> {
    Ok(order)
}

#[tokio::test]
async fn without_store_or_install_the_call_fails_closed() {
    // No test in this binary calls `idem::install`.
    assert_eq!(
        uses_the_installed_handle(1).await,
        Err(AppError::Idem("not configured".into()))
    );
}

#[idempotent(store = FREE, key = "unit-key")]
async fn returns_unit() -> Result<(), AppError> {
    Ok(())
}

#[idempotent(store = FREE, key = id)]
async fn returns_none(id: &str) -> Result<Option<u8>, AppError> {
    let _ = id;
    Ok(None)
}

#[tokio::test]
async fn unit_and_none_are_stored_and_replayed() {
    assert_eq!(returns_unit().await, Ok(()));
    assert_eq!(returns_unit().await, Ok(()));
    assert_eq!(returns_none("n").await, Ok(None));
    assert_eq!(returns_none("n").await, Ok(None));
}

// ---- keys from owned parameters, cfg'd parameters, checked durations ----

store!(TUPLES);
counter!(TUPLE_RUNS);

#[idempotent(
    key = (tenant, order_id),
    scope = ("payments", tenant),
    fingerprint = (order_id, amount_cents),
    store = TUPLES,
)]
async fn charge_owned(
    tenant: String,
    order_id: String,
    amount_cents: u64,
) -> Result<String, idem::Error> {
    count(&TUPLE_RUNS);
    Ok(format!("{tenant}/{order_id}: {amount_cents}"))
}

#[tokio::test]
async fn key_tuples_borrow_owned_parameters_and_key_by_both() {
    let first = charge_owned("acme".into(), "o-1".into(), 5).await.unwrap();
    assert_eq!(first, "acme/o-1: 5");
    assert_eq!(
        charge_owned("acme".into(), "o-1".into(), 5).await.unwrap(),
        first
    );
    // Another tenant, same order id: its own record.
    assert_eq!(
        charge_owned("umbrella".into(), "o-1".into(), 5)
            .await
            .unwrap(),
        "umbrella/o-1: 5"
    );
    assert_eq!(TUPLE_RUNS.load(Ordering::SeqCst), 2);
    // The tuple fingerprint: the same key with another amount is refused.
    let other = charge_owned("acme".into(), "o-1".into(), 6).await;
    assert!(matches!(
        other,
        Err(idem::Error::FingerprintMismatch { .. })
    ));
}

store!(CFG);
counter!(CFG_RUNS);

#[idempotent(store = CFG)]
async fn cfg_param(
    order_id: String,
    #[cfg(not(test))] never_compiled: String,
    #[cfg(test)] parcels: u32,
) -> Result<String, idem::Error> {
    count(&CFG_RUNS);
    Ok(format!("{order_id}: {parcels}"))
}

#[tokio::test]
async fn a_cfg_parameter_is_hashed_only_when_compiled() {
    assert_eq!(cfg_param("o-1".into(), 2).await.unwrap(), "o-1: 2");
    assert_eq!(cfg_param("o-1".into(), 2).await.unwrap(), "o-1: 2");
    assert_eq!(cfg_param("o-1".into(), 3).await.unwrap(), "o-1: 3");
    assert_eq!(CFG_RUNS.load(Ordering::SeqCst), 2);
}

store!(DURATIONS);
counter!(DURATION_RUNS);
const NO_TIME: Duration = Duration::ZERO;
const AN_HOUR: Duration = Duration::from_secs(3600);

#[idempotent(key = k, store = DURATIONS, ttl = NO_TIME)]
async fn zero_ttl(k: u32) -> Result<u32, idem::Error> {
    Ok(count(&DURATION_RUNS))
}

#[idempotent(key = k, store = DURATIONS, lease = NO_TIME)]
async fn zero_lease(k: u32) -> Result<u32, idem::Error> {
    Ok(count(&DURATION_RUNS))
}

#[idempotent(key = k, store = DURATIONS, ttl = Duration::from_secs(60), lease = AN_HOUR)]
async fn lease_over_ttl(k: u32) -> Result<u32, idem::Error> {
    Ok(count(&DURATION_RUNS))
}

#[tokio::test]
async fn durations_given_as_expressions_are_checked_before_any_claim() {
    for (out, option) in [
        (zero_ttl(1).await, "`ttl`"),
        (zero_lease(2).await, "`lease`"),
        (lease_over_ttl(3).await, "longer than `ttl`"),
    ] {
        let Err(idem::Error::InvalidOption(reason)) = out else {
            panic!("expected InvalidOption naming {option}, got {out:?}");
        };
        assert!(reason.contains(option), "{reason}");
    }
    assert_eq!(DURATION_RUNS.load(Ordering::SeqCst), 0, "no body ran");

    // The builder is checked the same way.
    let out: Result<u32, idem::Error> = handle()
        .call("s", "k")
        .ttl(Duration::from_secs(1))
        .lease(Duration::from_secs(2))
        .run(|| async { Ok(1) })
        .await;
    assert!(matches!(out, Err(idem::Error::InvalidOption(_))), "{out:?}");
}

// ---- the derived key -------------------------------------------------------

store!(DERIVED);

#[idempotent(scope = "billing", store = DERIVED)]
async fn bill_derived(name: &str, amount: u32) -> Result<u32, idem::Error> {
    Ok(amount)
}

/// Records written by this release must be found by every later one: the
/// key derived from `("alice", 1200)` in scope `billing` is pinned, byte for
/// byte (SHA-256 of the parameters' serde form, hashed into the record key
/// as a 32-byte string).
#[tokio::test]
async fn the_derived_key_is_pinned_byte_for_byte() {
    assert_eq!(bill_derived("alice", 1200).await.unwrap(), 1200);
    let mut bytes = [0u8; 32];
    let hex = "7de74dc23c574252ade2343eab2632dd21b0abeedd106f9b8e2c6d2ccf6b4b61";
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    let claim = idem::store::Claim::new(
        idem::store::Token::random(),
        idem::fingerprint::Fingerprint::NONE,
        Duration::from_secs(5),
        "test",
    );
    let found = DERIVED
        .store()
        .claim(&idem::key::RecordKey::from_bytes(bytes), &claim)
        .await
        .unwrap();
    assert!(
        matches!(found, idem::store::ClaimOutcome::Completed { .. }),
        "{found:?}"
    );
}
