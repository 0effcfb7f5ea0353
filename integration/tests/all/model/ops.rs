//! The operations a sequence is made of, and how proptest draws them.
//!
//! Every variant name is unique across these enums, so a sequence's
//! derived `Debug` is valid Rust under `use ops::{Op::*, …}`: a failing
//! case prints as a regression test to paste.

use proptest::prelude::*;
use proptest_state_machine::ReferenceStateMachine;

/// Which payload a call sends under the one key of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Payload {
    A,
    B,
}

/// The reconcile a call carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rec {
    /// None: a takeover runs the body again (the user opted out).
    Absent,
    /// Answers from the effects ledger: found when the payload's effect
    /// happened, not found otherwise.
    Truthful,
    /// The provider's lookup fails: `Err`.
    Fails,
}

/// The call's ttl and tombstone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dur {
    /// ttl 4 leases, tombstone 2 leases.
    Normal,
    /// ttl 4 leases, no tombstone.
    NoTomb,
    /// ttl `Duration::MAX`.
    TtlMax,
    /// tombstone `Duration::MAX`.
    TombMax,
}

/// How a call's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// Has its effect, returns `Ok`.
    Done,
    /// Returns a released `Err` before its effect: provably no effect.
    ErrFirst,
}

/// A store fault a call meets (`idem::testing::FaultyStore`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The claim fails before reaching the store: nothing applied.
    ClaimFails,
    /// The store applies the claim and its answer is lost.
    ClaimLost,
    /// Every completion fails before reaching the store, after the body's
    /// effect, for as long as the claim's lease lasts (the store is down).
    CompleteFails,
    /// The completion fails once before reaching the store; it is sent
    /// again.
    CompleteFailsOnce,
    /// The store applies the completion and its answer is lost.
    CompleteLost,
}

/// One step of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// A call run to its end.
    Call {
        p: Payload,
        rec: Rec,
        dur: Dur,
        end: End,
    },
    /// A call run to its end that meets store fault `fault` (no
    /// reconcile, normal durations).
    Faulty { p: Payload, fault: Fault },
    /// A call run to its end inside a database transaction (the SQL
    /// stores' transactional mode; a plain call on the others), which then
    /// commits or rolls back: the body's effect and the record together.
    TxCall { p: Payload, commit: bool },
    /// A state update (`mismatch = "rerun"`) run to its end: another
    /// payload's record is replaced, a live claim is the lock.
    Rerun { p: Payload },
    /// A call whose body, once entered, waits (the holder in flight);
    /// `late`: its claim's answer arrives 0.85 lease after the store
    /// applied it.
    Start { p: Payload, rec: Rec, late: bool },
    /// The holder's body has its effect and returns `Ok`.
    Finish,
    /// The holder's future is dropped before its effect (its claim is
    /// released).
    Drop,
    /// The holder's process vanishes (after its effect, if `effect`): the
    /// release fails, the claim stays until its lease lapses.
    Vanish { effect: bool },
    /// Time passes: `quarters` quarters of a lease.
    Advance { quarters: u8 },
    /// `idem.forget(scope, key)`.
    Forget,
    /// The store's `purge_expired` (SQLite) or MemoryStore's sweep.
    Purge,
}

/// Generation only: whether a holder is (probably) in flight, so that
/// `Finish`, `Drop` and `Vanish` follow a `Start`. The model that judges
/// outcomes is `reference::Key`; the driver tolerates a holder that never
/// entered its body.
pub(crate) struct Sequences;

/// Op kinds left out of generation, from `IDEM_MODEL_WITHOUT` (a comma
/// list of `max`, `late`, `purge`, `fails`, `other`, `faults`, `rerun`, `tx`): to look past a
/// defect already found for the next one.
fn without(kind: &str) -> bool {
    static WITHOUT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let list = WITHOUT.get_or_init(|| std::env::var("IDEM_MODEL_WITHOUT").unwrap_or_default());
    list.split(',').any(|k| k.trim() == kind)
}

/// 0 when `kind` is left out, else `weight`.
fn weight(kind: &str, weight: u32) -> u32 {
    if without(kind) { 0 } else { weight }
}

fn payload() -> impl Strategy<Value = Payload> {
    prop_oneof![3 => Just(Payload::A), weight("other", 1) => Just(Payload::B)]
}

fn rec() -> impl Strategy<Value = Rec> {
    prop_oneof![2 => Just(Rec::Truthful), 1 => Just(Rec::Absent), weight("fails", 1) => Just(Rec::Fails)]
}

fn dur() -> impl Strategy<Value = Dur> {
    let max = weight("max", 1);
    prop_oneof![6 => Just(Dur::Normal), 2 => Just(Dur::NoTomb), max => Just(Dur::TtlMax), max => Just(Dur::TombMax)]
}

fn late() -> impl Strategy<Value = bool> {
    prop_oneof![2 => Just(false), weight("late", 1) => Just(true)]
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        Just(Fault::ClaimFails),
        Just(Fault::ClaimLost),
        Just(Fault::CompleteFails),
        Just(Fault::CompleteFailsOnce),
        Just(Fault::CompleteLost),
    ]
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![3 => Just(End::Done), 1 => Just(End::ErrFirst)]
}

impl ReferenceStateMachine for Sequences {
    type State = bool;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<bool> {
        Just(false).boxed()
    }

    fn transitions(in_flight: &bool) -> BoxedStrategy<Op> {
        let call = (payload(), rec(), dur(), end()).prop_map(|(p, rec, dur, end)| Op::Call {
            p,
            rec,
            dur,
            end,
        });
        let advance = (1u8..=6).prop_map(|quarters| Op::Advance { quarters });
        let faulty = (payload(), fault()).prop_map(|(p, fault)| Op::Faulty { p, fault });
        let rerun = payload().prop_map(|p| Op::Rerun { p });
        let tx = (payload(), any::<bool>()).prop_map(|(p, commit)| Op::TxCall { p, commit });
        if *in_flight {
            return prop_oneof![
                4 => call,
                weight("faults", 1) => faulty,
                weight("rerun", 1) => rerun,
                weight("tx", 1) => tx,
                3 => advance,
                2 => Just(Op::Finish),
                1 => Just(Op::Drop),
                2 => any::<bool>().prop_map(|effect| Op::Vanish { effect }),
                1 => Just(Op::Forget),
            ]
            .boxed();
        }
        let start =
            (payload(), rec(), late()).prop_map(|(p, rec, late)| Op::Start { p, rec, late });
        prop_oneof![
            4 => call,
            weight("faults", 2) => faulty,
            weight("rerun", 2) => rerun,
            weight("tx", 2) => tx,
            3 => start,
            3 => advance,
            1 => Just(Op::Forget),
            weight("purge", 2) => Just(Op::Purge),
        ]
        .boxed()
    }

    fn apply(in_flight: bool, op: &Op) -> bool {
        match op {
            Op::Start { .. } => true,
            Op::Finish | Op::Drop | Op::Vanish { .. } => false,
            _ => in_flight,
        }
    }

    fn preconditions(in_flight: &bool, op: &Op) -> bool {
        match op {
            Op::Start { .. } => !in_flight,
            Op::Finish | Op::Drop | Op::Vanish { .. } => *in_flight,
            _ => true,
        }
    }
}
