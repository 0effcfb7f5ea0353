//! The calls beside the plain one: in a transaction (committed or rolled
//! back), as a state update, and meeting a store fault.

use std::sync::atomic::Ordering;
use std::time::Duration;

use idem::testing::Op as StoreOp;

use super::super::ops::{Dur, End, Fault, Payload, Rec};
use super::super::reference::{Seen, Span, Times};
use super::{Gates, Sut, joined};

impl Sut {
    /// A call of `p` in a transaction that then commits or rolls back (a
    /// plain call where the store has no transactional mode).
    pub(super) async fn tx_call(
        &mut self,
        p: Payload,
        commit: bool,
        lo: Duration,
    ) -> Result<(), String> {
        let (rec, dur) = (Rec::Absent, Dur::Normal);
        let Some(sql) = &self.sql else {
            return self.call(p, rec, dur, End::Done, lo).await;
        };
        let times = Times::of(dur, self.lease);
        let call = self
            .idem
            .call("model", self.key.as_str())
            .ttl(times.ttl)
            .lease(times.lease)
            .tombstone(times.tombstone)
            .fingerprint(&format!("{p:?}"));
        let seen = sql.run(call, p, &self.ledger, commit).await;
        if commit {
            return self.judged(p, rec, dur, lo, seen);
        }
        // Rolled back: the key as it was, the effect undone.
        self.model.judge(p, rec, dur, self.span(lo), &seen)?;
        if let Seen::Ran(value) = &seen {
            let mut ledger = self.ledger.lock().unwrap();
            *ledger.permits.entry(p).or_default() += 1;
            ledger.check(p, &seen)?;
            ledger.produced.entry(p).or_default().retain(|v| v != value);
        }
        Ok(())
    }

    /// A state update of `p`, run to its end.
    pub(super) async fn rerun(&mut self, p: Payload, lo: Duration) -> Result<(), String> {
        let gates = Gates::open();
        let (task, _) = self.spawn_call(p, Rec::Absent, Dur::Normal, End::Done, &gates, true);
        let seen = joined(task.await);
        let now = self.span(lo);
        self.model.judge_rerun(p, now, &seen)?;
        if matches!(seen, Seen::Ran(_)) {
            *self.ledger.lock().unwrap().permits.entry(p).or_default() += 1;
        }
        self.settled(p, &seen);
        self.ledger.lock().unwrap().check(p, &seen)?;
        let times = Times::of(Dur::Normal, self.lease);
        self.model.after_call(p, times, now, &seen);
        Ok(())
    }

    /// A call of `p` that meets `fault`, where the model knows whether
    /// its claim wins (else nothing is done): a fault of a step the call
    /// does not reach (a completion after a replay) is disarmed unspent.
    pub(super) async fn faulty_call(
        &mut self,
        p: Payload,
        fault: Fault,
        lo: Duration,
    ) -> Result<(), String> {
        // A margin for the time the call takes, on real time.
        let ahead = Span {
            lo: self.now(),
            hi: self.now() + self.lease / 4,
        };
        let Some(wins) = self.model.wins(p, ahead) else {
            return Ok(());
        };
        // The completion is sent again while the lease lasts: one failure
        // or lost answer is absorbed, and the call ends as a plain one.
        let (op, lost, n) = match fault {
            Fault::ClaimFails => (StoreOp::Claim, false, 1),
            Fault::ClaimLost => (StoreOp::Claim, true, 1),
            Fault::CompleteFails => (StoreOp::Complete, false, u32::MAX),
            Fault::CompleteFailsOnce => (StoreOp::Complete, false, 1),
            Fault::CompleteLost => (StoreOp::Complete, true, 1),
        };
        self.arm(op, lost, n);
        let (task, entered) = self.spawn(p, Rec::Absent, Dur::Normal, End::Done, &Gates::open());
        let seen = joined(task.await);
        self.arm(op, lost, 0);
        let reaches = op == StoreOp::Claim || wins;
        let absorbed = matches!(fault, Fault::CompleteFailsOnce | Fault::CompleteLost);
        if !reaches || absorbed {
            return self.judged(p, Rec::Absent, Dur::Normal, lo, seen);
        }
        let Seen::Failed(_) = &seen else {
            return Err(format!(
                "{p:?} met {fault:?} and saw {seen:?}, not the store's error"
            ));
        };
        let now = self.span(lo);
        let times = Times::of(Dur::Normal, self.lease);
        let ran = entered.load(Ordering::SeqCst);
        if ran != (op == StoreOp::Complete) {
            return Err(format!("{p:?} met {fault:?}: the body ran: {ran}"));
        }
        let value = ran.then(|| self.ran_unanswered(p));
        match fault {
            Fault::ClaimFails => {}
            Fault::ClaimLost if wins => self.model.unsettled(p, None, times, now),
            Fault::ClaimLost => {}
            Fault::CompleteFails => self.model.unsettled(p, value, times, now),
            Fault::CompleteFailsOnce | Fault::CompleteLost => unreachable!("judged as plain calls"),
        }
        self.ledger
            .lock()
            .unwrap()
            .check(p, &Seen::Failed(String::new()))
    }

    /// The body of `p` ran and its answer never reached the caller: one
    /// more permitted effect, which a truthful reconcile finds.
    fn ran_unanswered(&self, p: Payload) -> String {
        let mut ledger = self.ledger.lock().unwrap();
        *ledger.permits.entry(p).or_default() += 1;
        let value = ledger.produced[&p]
            .last()
            .cloned()
            .expect("the body's effect");
        ledger.unanswered.insert(p, value.clone());
        value
    }

    /// Arms (`n` > 0) or disarms (0) failures or lost answers of `op`.
    fn arm(&self, op: StoreOp, lost: bool, n: u32) {
        if lost {
            self.faulty.lose_answer_next(op, n);
        } else {
            self.faulty.fail_next(op, n);
        }
    }
}
