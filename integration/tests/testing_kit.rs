//! The testing kit (`idem::testing`, SPEC §12): crash points find a double
//! debit and pass its stepped version, with the attribute, the builder,
//! `detach` and steps; each injected store fault is the documented error
//! and fails closed; probes equal the records real calls write; `sites()`
//! lists every attribute of this binary with its options.

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
        idem.call("s", "k").run(|| async { Ok::<_, idem::Error>(()) }).await
    })
    .invariant(|| false)
    .run()
    .await;
    assert!(!report.passed());
    assert!(report.to_string().contains("without a crash"), "{report}");
}
