//! The testing kit (`idem::testing`, SPEC §12): crash points find a double
//! debit and pass its stepped version, with the attribute, the builder,
//! `detach` and steps; each injected store fault is the documented error
//! and fails closed; probes equal the records real calls write; `sites()`
//! lists every attribute of this module with its options.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use idem::testing::{CrashPoints, FaultyStore, Op, probe, sites};
use idem::{Idempotency, MemoryStore, idempotent};

/// A bank: each effect is one round trip (an await), then applied.
#[derive(Default, Clone)]
struct Bank {
    debits: Arc<AtomicU32>,
    credits: Arc<AtomicU32>,
}

impl Bank {
    async fn debit(&self) -> Result<(), idem::Error> {
        tokio::task::yield_now().await;
        self.debits.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn credit(&self) -> Result<(), idem::Error> {
        tokio::task::yield_now().await;
        self.credits.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn reset(&self) -> impl Fn() + Send + 'static {
        let bank = self.clone();
        move || {
            bank.debits.store(0, Ordering::SeqCst);
            bank.credits.store(0, Ordering::SeqCst);
        }
    }

    fn once_each(&self) -> impl Fn() -> bool + Send + 'static {
        let bank = self.clone();
        move || bank.debits.load(Ordering::SeqCst) == 1 && bank.credits.load(Ordering::SeqCst) == 1
    }
}

#[idempotent(key = id, scope = "transfers", store = idem, skip(idem, bank))]
async fn transfer_unstepped(idem: &Idempotency, bank: &Bank, id: &str) -> Result<(), idem::Error> {
    bank.debit().await?;
    bank.credit().await
}

#[idempotent(key = id, scope = "transfers", store = idem, skip(idem, bank))]
async fn transfer_stepped(idem: &Idempotency, bank: &Bank, id: &str) -> Result<(), idem::Error> {
    idem::step("debit", || bank.debit()).await?;
    idem::step("credit", || bank.credit()).await
}

#[idempotent(key = id, scope = "transfers", store = idem, skip(idem, bank), detach)]
async fn transfer_detached(idem: Idempotency, bank: Bank, id: String) -> Result<(), idem::Error> {
    bank.debit().await?;
    bank.credit().await
}

#[idempotent(key = id, scope = "transfers", store = idem, skip(idem, bank), detach)]
async fn transfer_detached_stepped(
    idem: Idempotency,
    bank: Bank,
    id: String,
) -> Result<(), idem::Error> {
    idem::step("debit", || bank.debit()).await?;
    idem::step("credit", || bank.credit()).await
}

async fn crash_test<F, Fut>(bank: &Bank, call: F) -> idem::testing::CrashReport
where
    F: Fn(Idempotency, Bank) -> Fut + Send + Sync + 'static,
    Fut: Future + 'static,
{
    let shared = bank.clone();
    CrashPoints::new(move |idem| call(idem, shared.clone()))
        .reset(bank.reset())
        .invariant(bank.once_each())
        .run()
        .await
}

#[tokio::test]
async fn attribute_without_steps_debits_twice_after_a_crash_between_the_effects() {
    let bank = Bank::default();
    let report = crash_test(&bank, |idem, bank| async move {
        transfer_unstepped(&idem, &bank, "t-1").await
    })
    .await;
    assert!(!report.passed(), "{report}");
    // Polls: 1 ends in the debit's round trip, 2 in the credit's (the
    // debit applied), 3 ends the call. Only the crash after poll 2 falls
    // between the effects.
    assert_eq!(report.points(), 2, "{report}");
    assert_eq!(report.failed(), &[2], "{report}");
    assert!(report.to_string().contains("point 2 of 2"), "{report}");
}

#[tokio::test]
async fn attribute_with_steps_passes_every_crash_point() {
    let bank = Bank::default();
    let report = crash_test(&bank, |idem, bank| async move {
        transfer_stepped(&idem, &bank, "t-1").await
    })
    .await;
    assert!(report.passed(), "{report}");
    assert_eq!(report.points(), 2, "{report}");
}

#[tokio::test]
async fn builder_call_without_steps_fails_and_with_steps_passes() {
    let bank = Bank::default();
    let unstepped = crash_test(&bank, |idem, bank| async move {
        idem.call("transfers", "t-1")
            .run(|| async move {
                bank.debit().await?;
                bank.credit().await
            })
            .await
    })
    .await;
    assert_eq!(unstepped.failed(), &[2], "{unstepped}");
    let stepped = crash_test(&bank, |idem, bank| async move {
        idem.call("transfers", "t-1")
            .run(|| async move {
                idem::step("debit", || bank.debit()).await?;
                idem::step("credit", || bank.credit()).await
            })
            .await
    })
    .await;
    assert!(stepped.passed(), "{stepped}");
}

#[tokio::test]
async fn detached_bodies_are_crashed_too() {
    let bank = Bank::default();
    let unstepped = crash_test(&bank, |idem, bank| async move {
        transfer_detached(idem, bank, "t-1".to_owned()).await
    })
    .await;
    assert!(!unstepped.passed(), "{unstepped}");
    let stepped = crash_test(&bank, |idem, bank| async move {
        transfer_detached_stepped(idem, bank, "t-1".to_owned()).await
    })
    .await;
    assert!(stepped.passed(), "{stepped}");
    assert_eq!(stepped.points(), unstepped.points());
}

#[tokio::test]
async fn a_broken_invariant_without_any_crash_is_reported() {
    let report = CrashPoints::new(|idem: Idempotency| async move {
        idem.call("s", "k")
            .run(|| async { Ok::<_, idem::Error>(()) })
            .await
    })
    .invariant(|| false)
    .run()
    .await;
    assert!(!report.passed());
    assert!(report.to_string().contains("without a crash"), "{report}");
}

/// A handle over a `FaultyStore`, and a counter of body runs.
fn faulty() -> (FaultyStore, Idempotency, Arc<AtomicU32>) {
    let store = FaultyStore::new(MemoryStore::new());
    let idem = Idempotency::new(store.clone());
    (store, idem, Arc::new(AtomicU32::new(0)))
}

async fn charge(idem: &Idempotency, runs: &Arc<AtomicU32>) -> Result<u32, idem::Error> {
    let runs = Arc::clone(runs);
    idem.call("payments", "order-1")
        .lease(Duration::from_secs(1))
        .run(|| async move { Ok(runs.fetch_add(1, Ordering::SeqCst) + 1) })
        .await
}

fn is_injected(result: &Result<u32, idem::Error>) -> bool {
    matches!(result, Err(idem::Error::Store(err)) if err.backend() == "faulty")
}

#[tokio::test]
async fn a_failed_claim_is_a_store_error_and_the_body_does_not_run() {
    let (store, idem, runs) = faulty();
    store.fail_next(Op::Claim, 2);
    assert!(is_injected(&charge(&idem, &runs).await));
    assert!(is_injected(&charge(&idem, &runs).await));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_claim_whose_answer_is_lost_does_not_run_the_body_and_lapses() {
    let (store, idem, runs) = faulty();
    store.lose_answer_next(Op::Claim, 1);
    assert!(is_injected(&charge(&idem, &runs).await));
    // The claim was applied: a retry meanwhile finds it held and does not
    // run the body.
    assert!(matches!(
        charge(&idem, &runs).await,
        Err(idem::Error::InProgress { .. })
    ));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    // The runtime ends a claim whose answer was lost (after 250 ms, well
    // inside the 1 s lease) by letting it lapse: the retry takes it over
    // and runs once.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1);
}

/// A takeover whose answer is lost must not free the key: the runtime's
/// cleanup of a claim that may have been applied would otherwise delete
/// the takeover, the vanished holder's evidence with it, and the next call
/// would run as fresh, without asking its reconcile (a second effect).
#[tokio::test(start_paused = true)]
async fn a_takeover_whose_answer_is_lost_keeps_the_evidence() {
    use idem::key::RecordKey;
    use idem::store::{Claim, Token};
    let (store, idem, runs) = faulty();
    let key = RecordKey::new("payments", "order-1");
    let holder = Claim::new(
        Token::random(),
        idem::fingerprint::Fingerprint::NONE,
        Duration::from_secs(1),
        "t",
    );
    idem::Store::claim(&store, &key, &holder).await.unwrap();
    tokio::time::advance(Duration::from_secs(2)).await;
    let reconciles = Arc::new(AtomicU32::new(0));
    let retry = || {
        let (runs, reconciles) = (Arc::clone(&runs), Arc::clone(&reconciles));
        idem.call("payments", "order-1")
            .lease(Duration::from_secs(1))
            .reconcile(move || async move {
                reconciles.fetch_add(1, Ordering::SeqCst);
                Ok(Some(7))
            })
            .run(|| async move { Ok(runs.fetch_add(1, Ordering::SeqCst) + 100) })
    };
    store.lose_answer_next(Op::Claim, 1);
    assert!(is_injected(&retry().await));
    // Past the runtime's cleanup of a claim whose answer was lost.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(retry().await.unwrap(), 7, "the next call ran as fresh");
    assert_eq!(reconciles.load(Ordering::SeqCst), 1);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_failed_completion_is_sent_again_and_the_call_returns_its_result() {
    let (store, idem, runs) = faulty();
    store.fail_next(Op::Complete, 2);
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1);
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1, "replayed");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_completion_failing_for_its_whole_lease_keeps_the_claim_so_no_retry_runs_until_it_ends() {
    let (store, idem, runs) = faulty();
    store.fail_next(Op::Complete, u32::MAX);
    let started = tokio::time::Instant::now();
    assert!(is_injected(&charge(&idem, &runs).await));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "sent again within the 1 s lease only: {:?}",
        started.elapsed()
    );
    store.fail_next(Op::Complete, 0);
    assert!(matches!(
        charge(&idem, &runs).await,
        Err(idem::Error::InProgress { .. })
    ));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(charge(&idem, &runs).await.unwrap(), 2);
}

#[tokio::test]
async fn a_completion_whose_answer_is_lost_is_sent_again_and_knows_its_own_record() {
    let (store, idem, runs) = faulty();
    store.lose_answer_next(Op::Complete, 1);
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1);
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1, "replayed");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_failed_step_save_ends_the_call_with_a_store_error_and_releases_it() {
    let (store, idem, runs) = faulty();
    let stepped = |idem: Idempotency, runs: Arc<AtomicU32>| async move {
        idem.call("payments", "order-1")
            .run(|| async move {
                idem::step("debit", || async {
                    Ok::<_, idem::Error>(runs.fetch_add(1, Ordering::SeqCst) + 1)
                })
                .await
            })
            .await
    };
    store.fail_next(Op::SaveStep, 1);
    let first: Result<u32, idem::Error> = stepped(idem.clone(), Arc::clone(&runs)).await;
    assert!(is_injected(&first), "{first:?}");
    // Released: the retry runs the step again (its value was not saved).
    assert_eq!(stepped(idem, Arc::clone(&runs)).await.unwrap(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_failed_release_keeps_the_claim_so_no_retry_runs_until_the_lease_ends() {
    let (store, idem, runs) = faulty();
    let failing = |idem: Idempotency, runs: Arc<AtomicU32>| async move {
        idem.call("payments", "order-1")
            .lease(Duration::from_secs(1))
            .run(|| async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Err::<u32, _>(idem::Error::InvalidKey("declined".into()))
            })
            .await
    };
    store.fail_next(Op::Release, 1);
    let first = failing(idem.clone(), Arc::clone(&runs)).await;
    assert!(
        matches!(first, Err(idem::Error::InvalidKey(_))),
        "{first:?}"
    );
    assert!(matches!(
        charge(&idem, &runs).await,
        Err(idem::Error::InProgress { .. })
    ));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(charge(&idem, &runs).await.unwrap(), 2);
}

#[tokio::test(start_paused = true)]
async fn failed_renewals_let_the_lease_end_and_the_result_is_not_stored() {
    let (store, idem, runs) = faulty();
    store.fail_next(Op::Renew, u32::MAX);
    let slow = idem
        .call("payments", "order-1")
        .lease(Duration::from_secs(1))
        .run(|| async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            Ok::<_, idem::Error>(1u32)
        })
        .await;
    assert!(
        matches!(
            slow,
            Err(idem::Error::LeaseLost {
                taken_over: false,
                ..
            })
        ),
        "{slow:?}"
    );
    store.fail_next(Op::Renew, 0);
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_delayed_claim_answers_after_its_delay() {
    let (store, idem, runs) = faulty();
    store.delay(Op::Claim, Duration::from_secs(5));
    let started = tokio::time::Instant::now();
    assert_eq!(charge(&idem, &runs).await.unwrap(), 1);
    // The paused clock moved by exactly the delay: no real time passed.
    assert_eq!(started.elapsed(), Duration::from_secs(5));
}

// --- probe ---

#[idempotent(store = idem, skip(idem))]
async fn open_account(
    idem: &Idempotency,
    owner: &str,
    limit_cents: u64,
) -> Result<u64, idem::Error> {
    Ok(limit_cents)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

async fn probe_equals_the_record_on(idem: Idempotency, admin: &dyn idem::admin::Admin) {
    let probed = probe(|idem| async move { open_account(&idem, "alice", 5000).await }).await;
    assert_eq!(probed.scope, format!("{}::open_account", module_path!()));
    open_account(&idem, "alice", 5000).await.unwrap();
    let key = idem::key::RecordKey::from_bytes(
        <[u8; 32]>::try_from(
            (0..32)
                .map(|i| u8::from_str_radix(&probed.key[2 * i..2 * i + 2], 16).unwrap())
                .collect::<Vec<u8>>(),
        )
        .unwrap(),
    );
    let record = admin
        .inspect(&key)
        .await
        .unwrap()
        .expect("the real call wrote this key");
    assert_eq!(record.key.to_hex(), probed.key);
    assert_eq!(hex(record.fingerprint.as_bytes()), probed.fingerprint);
    // Another payload: same derived key? No: the key is derived from both
    // parameters, so both digests move.
    let other = probe(|idem| async move { open_account(&idem, "alice", 6000).await }).await;
    assert_ne!(other.key, probed.key);
    assert_ne!(other.fingerprint, probed.fingerprint);
}

#[tokio::test]
async fn probe_equals_what_the_real_call_writes_to_sqlite() {
    let path = std::env::temp_dir().join(format!(
        "idem-testing-kit-{}-{}.db",
        std::process::id(),
        idem::store::Token::random().to_u128() as u64
    ));
    let store = idem::SqliteStore::open(&path).await.unwrap();
    let idem = Idempotency::new(store.clone());
    probe_equals_the_record_on(idem, &store).await;
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn probe_pins_an_explicit_key_and_a_builder_call() {
    let probed =
        probe(|idem| async move { transfer_unstepped(&idem, &Bank::default(), "t-9").await }).await;
    assert_eq!(probed.scope, "transfers");
    assert_eq!(
        probed.key,
        idem::key::RecordKey::new(&"transfers", &"t-9").to_hex()
    );
    let builder = probe(|idem| async move {
        idem.call(&("tenant", 7u32), "order-1")
            .fingerprint(&("alice", 1200u32))
            .run(|| async { Ok::<_, idem::Error>(()) })
            .await
    })
    .await;
    assert_eq!(
        builder.key,
        idem::key::RecordKey::new(&("tenant", 7u32), &"order-1").to_hex()
    );
    assert_eq!(
        builder.fingerprint,
        hex(idem::fingerprint::Fingerprint::of(&("alice", 1200u32))
            .unwrap()
            .as_bytes())
    );
}

// --- sites ---

/// An error the function stores and replays (`errors = "replay"`).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct BillingError(String);

impl From<idem::Error> for BillingError {
    fn from(err: idem::Error) -> Self {
        BillingError(err.to_string())
    }
}

#[idempotent(
    key = (tenant, order),
    scope = ("billing", tenant),
    ttl = "1h",
    lease = "10s",
    wait = Duration::from_millis(50),
    tombstone = "7d",
    fingerprint = false,
    errors = "replay",
    store = idem,
    skip(idem)
)]
async fn every_option(idem: &Idempotency, tenant: u32, order: u64) -> Result<(), BillingError> {
    Ok(())
}

#[tokio::test]
async fn every_option_runs() {
    let idem = Idempotency::new(MemoryStore::new());
    every_option(&idem, 7, 1).await.unwrap();
}

#[test]
fn sites_lists_every_attribute_of_this_module_with_its_options() {
    let here = module_path!();
    // The binary's other modules have attributes of their own.
    let paths: Vec<&str> = sites()
        .iter()
        .map(|site| site.path())
        .filter(|path| {
            path.strip_prefix(here)
                .is_some_and(|rest| rest.starts_with("::"))
        })
        .collect();
    let expected: Vec<String> = [
        "every_option",
        "open_account",
        "transfer_detached",
        "transfer_detached_stepped",
        "transfer_stepped",
        "transfer_unstepped",
    ]
    .iter()
    .map(|name| format!("{here}::{name}"))
    .collect();
    assert_eq!(paths, expected);

    let site = |name: &str| {
        *sites()
            .iter()
            .find(|site| site.path() == format!("{here}::{name}"))
            .unwrap()
    };
    let every = site("every_option");
    assert_eq!(every.key(), Some("(tenant, order)"));
    assert_eq!(every.scope(), Some("(\"billing\", tenant)"));
    assert_eq!(every.fingerprint(), Some("false"));
    assert_eq!(every.ttl(), Some(Duration::from_secs(3600)));
    assert_eq!(every.lease(), Some(Duration::from_secs(10)));
    assert_eq!(
        every.wait(),
        None,
        "an expression is known only at run time"
    );
    assert_eq!(every.tombstone(), Some(Duration::from_secs(7 * 24 * 3600)));
    assert_eq!(every.errors(), "replay");
    assert!(!every.detach());

    let derived = site("open_account");
    assert_eq!(
        (derived.key(), derived.scope(), derived.fingerprint()),
        (None, None, None)
    );
    assert_eq!(derived.ttl(), Some(idem::DEFAULT_TTL));
    assert_eq!(derived.lease(), Some(idem::DEFAULT_LEASE));
    assert_eq!(derived.wait(), Some(Duration::ZERO));
    assert_eq!(derived.tombstone(), Some(Duration::ZERO), "no tombstone");
    assert_eq!(derived.errors(), "release");
    assert!(site("transfer_detached").detach());
    assert_eq!(site("transfer_stepped").key(), Some("id"));
}
