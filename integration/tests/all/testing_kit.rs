//! The testing kit (`idem::testing`, SPEC §12): crash points find a double
//! debit and pass its stepped version, with the attribute, the builder,
//! `detach` and steps; each injected store fault is the documented error
//! and fails closed; probes equal the records real calls write; `sites()`
//! lists every attribute of this module with its options.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use idem::testing::{CrashPoints, probe, sites};
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

#[path = "testing_kit/faults.rs"]
mod faults;
