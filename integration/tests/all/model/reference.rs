//! The reference model of one key's life (SPEC §3–§6, §13, with issue 44's
//! fixes as the rules): which answers a caller may get, given what
//! happened before.
//!
//! Times are measured, not assumed: each operation ran between two reads
//! of tokio's clock (a [`Span`]), so a deadline that falls inside that
//! window allows either side of it. On the paused clock the windows are
//! points; on real time they absorb the time each operation took.

use std::time::Duration;

use super::ops::{Dur, Payload, Rec};

/// A moment known to lie between `lo` and `hi` (since the case began).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) lo: Duration,
    pub(crate) hi: Duration,
}

impl Span {
    /// `self` plus `by`, saturating: `Duration::MAX` is "never".
    pub(crate) fn plus(self, by: Duration) -> Self {
        Self {
            lo: self.lo.saturating_add(by),
            hi: self.hi.saturating_add(by),
        }
    }

    /// Whether the moment `now` may still be before `deadline`.
    fn maybe_before(now: Span, deadline: Span) -> bool {
        now.lo < deadline.hi
    }

    /// Whether the moment `now` may be at or after `deadline`.
    fn maybe_after(now: Span, deadline: Span) -> bool {
        now.hi >= deadline.lo
    }
}

/// What a call saw, as the driver classifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The body ran and returned this value.
    Ran(String),
    /// Answered from the record, no body, no reconcile.
    Replayed(String),
    /// The reconcile found the effect: this value.
    Reconciled(String),
    /// The body's released `Err` (before its effect).
    Declined,
    /// The reconcile's `Err`.
    LookupFailed,
    /// A holder's body was entered and waits (`Start`).
    Entered,
    InProgress,
    Mismatch,
    Expired,
    LeaseLost,
    /// Settings refused before the claim.
    Invalid,
    /// Any other error (a store error after the body ran, …).
    Failed(String),
    /// The call panicked.
    Panicked(String),
}

/// The settings a call ran with, as the model needs them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Times {
    pub(crate) lease: Duration,
    pub(crate) ttl: Duration,
    pub(crate) tombstone: Duration,
}

impl Times {
    /// `dur`'s ttl and tombstone, for a case's `lease`.
    pub(crate) fn of(dur: Dur, lease: Duration) -> Self {
        let (ttl, tombstone) = match dur {
            Dur::Normal => (lease * 4, lease * 2),
            Dur::NoTomb => (lease * 4, Duration::ZERO),
            Dur::TtlMax => (Duration::MAX, lease * 2),
            Dur::TombMax => (lease * 4, Duration::MAX),
        };
        Self {
            lease,
            ttl,
            tombstone,
        }
    }
}

/// A claim whose body has not completed.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub(crate) p: Payload,
    /// The holder still runs (renewed); `false`: it vanished.
    pub(crate) live: bool,
    /// When a vanished holder's lease lapses.
    pub(crate) lease_end: Span,
    /// The vanished holder's effect, if it had one.
    pub(crate) effect: Option<String>,
    /// Until when the lapsed claim must stay as evidence (its claim plus
    /// the record's TTL, issue 44 item 2).
    pub(crate) evidence: Span,
}

/// The key's state.
#[derive(Debug, Clone)]
pub(crate) enum Slot {
    Free,
    Held(Held),
    Done {
        p: Payload,
        value: String,
        until: Span,
        gone: Span,
    },
}

/// What the claim stage may answer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    Replay(String),
    Mismatch,
    Expired,
    InProgress,
    /// The body runs.
    Fresh,
    /// A takeover of a vanished holder: reconcile, then maybe the body.
    Takeover(Option<String>),
}

/// The model of the case's one key.
#[derive(Debug)]
pub(crate) struct Key {
    pub(crate) slot: Slot,
    pub(crate) lease: Duration,
}

impl Key {
    pub(crate) fn new(lease: Duration) -> Self {
        Self {
            slot: Slot::Free,
            lease,
        }
    }

    /// The claim stage's allowed answers to payload `p` at `now`. Another
    /// payload is refused, except by a state update (`rerun`), which
    /// replaces another payload's record (or tombstone) and waits on any
    /// live claim; a lapsed claim of another payload refuses both.
    fn expect(&self, p: Payload, now: Span, rerun: bool) -> Vec<Expect> {
        let other = |replaced: Expect| if rerun { replaced } else { Expect::Mismatch };
        let mut out = Vec::new();
        match &self.slot {
            Slot::Free => out.push(Expect::Fresh),
            Slot::Done {
                p: q,
                value,
                until,
                gone,
            } => {
                let same = *q == p;
                if Span::maybe_before(now, *until) {
                    out.push(if same {
                        Expect::Replay(value.clone())
                    } else {
                        other(Expect::Fresh)
                    });
                }
                if Span::maybe_after(now, *until) && Span::maybe_before(now, *gone) {
                    out.push(if same {
                        Expect::Expired
                    } else {
                        other(Expect::Fresh)
                    });
                }
                if Span::maybe_after(now, *gone) {
                    out.push(Expect::Fresh);
                }
            }
            Slot::Held(held) if held.live => out.push(if held.p == p {
                Expect::InProgress
            } else {
                other(Expect::InProgress)
            }),
            Slot::Held(held) => {
                let same = held.p == p;
                if Span::maybe_before(now, held.lease_end) {
                    out.push(if same {
                        Expect::InProgress
                    } else {
                        other(Expect::InProgress)
                    });
                }
                if Span::maybe_after(now, held.lease_end) {
                    // Another payload after a vanished holder: refused
                    // (issue 44 item 4), as while its lease was live, and
                    // by a state update too (it may have had its effect).
                    out.push(if same {
                        Expect::Takeover(held.effect.clone())
                    } else {
                        Expect::Mismatch
                    });
                }
                if Span::maybe_after(now, held.evidence) {
                    out.push(Expect::Fresh);
                }
            }
        }
        out
    }

    /// Whether `seen` is an allowed answer to a call of `p` with `rec`
    /// at `now`; `Err` says what was expected instead.
    pub(crate) fn judge(
        &self,
        p: Payload,
        rec: Rec,
        dur: Dur,
        now: Span,
        seen: &Seen,
    ) -> Result<(), String> {
        if let Seen::Panicked(why) = seen {
            return Err(format!("the call panicked: {why}"));
        }
        let refusable = matches!(dur, Dur::TtlMax | Dur::TombMax);
        if *seen == Seen::Invalid && refusable {
            return Ok(());
        }
        let expected = self.expect(p, now, false);
        if expected.iter().any(|e| allows(e, rec, seen)) {
            return Ok(());
        }
        Err(format!(
            "{p:?} (reconcile {rec:?}) saw {seen:?}; the key is {:?}, so allowed: {expected:?}",
            self.slot
        ))
    }

    /// As [`judge`](Self::judge), for a state update (`mismatch =
    /// "rerun"`, no reconcile, normal durations).
    pub(crate) fn judge_rerun(&self, p: Payload, now: Span, seen: &Seen) -> Result<(), String> {
        if let Seen::Panicked(why) = seen {
            return Err(format!("the call panicked: {why}"));
        }
        let expected = self.expect(p, now, true);
        if expected.iter().any(|e| allows(e, Rec::Absent, seen)) {
            return Ok(());
        }
        Err(format!(
            "rerun {p:?} saw {seen:?}; the key is {:?}, so allowed: {expected:?}",
            self.slot
        ))
    }

    /// Whether a plain call of `p` (no reconcile) at `now` surely wins the
    /// claim (`Some(true)`), surely not (`Some(false)`), or may go either
    /// way (`None`): a store fault is injected only where the model knows
    /// what the claim did.
    pub(crate) fn wins(&self, p: Payload, now: Span) -> Option<bool> {
        let expected = self.expect(p, now, false);
        let won = |e: &Expect| matches!(e, Expect::Fresh | Expect::Takeover(_));
        match (expected.iter().all(won), expected.iter().any(won)) {
            (true, _) => Some(true),
            (false, false) => Some(false),
            _ => None,
        }
    }

    /// A claim of `p` won at `now` whose holder ended without completing
    /// (its claim's answer lost, or its completion failed after `effect`):
    /// the claim lapses within a lease; a takeover's evidence stays.
    pub(crate) fn unsettled(
        &mut self,
        p: Payload,
        effect: Option<String>,
        times: Times,
        now: Span,
    ) {
        let effect = match (&self.slot, effect) {
            (_, Some(effect)) => Some(effect),
            (Slot::Held(held), None) => held.effect.clone(),
            _ => None,
        };
        self.slot = Slot::Held(Held {
            p,
            live: false,
            lease_end: Span {
                lo: now.lo,
                hi: now.hi.saturating_add(times.lease),
            },
            effect,
            evidence: now.plus(times.ttl),
        });
    }

    /// The key after a call of `p` with settings `times`, observed as
    /// `seen`.
    pub(crate) fn after_call(&mut self, p: Payload, times: Times, now: Span, seen: &Seen) {
        match seen {
            Seen::Ran(value) | Seen::Reconciled(value) => self.done(p, value, times, now),
            Seen::Entered => {
                self.slot = Slot::Held(Held {
                    p,
                    live: true,
                    lease_end: now.plus(times.lease),
                    effect: None,
                    evidence: now.plus(times.ttl),
                })
            }
            Seen::Declined => self.slot = Slot::Free,
            Seen::LookupFailed => {
                // The takeover survives until a reconcile answers
                // (issue 44 item 3); it may hold a fresh lease.
                if let Slot::Held(held) = &mut self.slot {
                    held.lease_end.hi = now.hi.saturating_add(self.lease);
                }
            }
            _ => {}
        }
    }

    /// The key completed with `value`.
    pub(crate) fn done(&mut self, p: Payload, value: &str, times: Times, now: Span) {
        let until = now.plus(times.ttl);
        self.slot = Slot::Done {
            p,
            value: value.to_owned(),
            until,
            gone: until.plus(times.tombstone),
        };
    }

    /// The holder vanished at `now`, with its effect if any: its claim
    /// stays until its lease lapses (renewed every third of a lease, so
    /// at least half a lease is left).
    /// A claim of `p` won at `now` whose answer came after its whole
    /// lease: the renewal before the body found it lapsed, so the body did
    /// not run (`LeaseLost`, fail closed), and the claim stays as a
    /// vanished holder's without an effect.
    pub(crate) fn won_too_late(&mut self, p: Payload, times: Times, now: Span) {
        self.slot = Slot::Held(Held {
            p,
            live: false,
            lease_end: Span {
                lo: now.lo,
                hi: now.hi,
            },
            effect: None,
            evidence: now.plus(times.ttl),
        });
    }

    pub(crate) fn vanished(&mut self, effect: Option<String>, now: Span) {
        if let Slot::Held(held) = &mut self.slot {
            held.live = false;
            held.effect = effect;
            held.lease_end = Span {
                lo: now.lo + self.lease / 2,
                hi: now.hi + self.lease,
            };
        }
    }
}

/// Whether the claim stage's `expected` answer, for a call with `rec`,
/// allows `seen`.
fn allows(expected: &Expect, rec: Rec, seen: &Seen) -> bool {
    let runs = matches!(seen, Seen::Ran(_) | Seen::Entered | Seen::Declined);
    match expected {
        Expect::Replay(value) => *seen == Seen::Replayed(value.clone()),
        Expect::Mismatch => *seen == Seen::Mismatch,
        Expect::Expired => *seen == Seen::Expired,
        Expect::InProgress => *seen == Seen::InProgress,
        Expect::Fresh => runs,
        Expect::Takeover(effect) => match (rec, effect) {
            (Rec::Fails, _) => *seen == Seen::LookupFailed,
            (Rec::Absent, _) | (Rec::Truthful, None) => runs,
            (Rec::Truthful, Some(value)) => *seen == Seen::Reconciled(value.clone()),
        },
    }
}
