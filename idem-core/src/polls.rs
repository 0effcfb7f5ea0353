//! The poll budget of a crash test (`idem::testing::CrashPoints`): every
//! poll of a counted future (the call under test, and a detached body,
//! which runs on a task of its own) spends one; when the budget runs out
//! the process "crashes": no counted future is polled any further.
//!
//! The budget is thread-local: a crash test runs each attempt on a
//! current-thread runtime of its own, where every task is polled on one
//! thread. Elsewhere there is no budget and a counted future is polled as
//! is.
//!
//! Compiled in every build, so a build with the `testing` feature runs the
//! runtime's own code unchanged: `detach.rs` counts every detached body,
//! which without a budget costs one thread-local read per poll. Only
//! `testing::polls` (feature `testing`) can install a budget.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::task::{Poll, Waker};

thread_local! {
    static BUDGET: RefCell<Option<Rc<Budget>>> = const { RefCell::new(None) };
}

/// Polls counted so far, and the count at which the process crashes.
#[derive(Debug, Default)]
pub struct Budget {
    polls: Cell<usize>,
    limit: Option<usize>,
    crashed: Cell<bool>,
    /// Woken at the crash: the driver of the attempt.
    driver: RefCell<Option<Waker>>,
}

impl Budget {
    /// A budget of `limit` polls (`None`: unlimited), installed on this
    /// thread until the returned guard is dropped.
    pub fn install(limit: Option<usize>) -> (Rc<Budget>, Installed) {
        let budget = Rc::new(Budget {
            limit,
            ..Budget::default()
        });
        BUDGET.with(|slot| *slot.borrow_mut() = Some(Rc::clone(&budget)));
        (budget, Installed(()))
    }

    /// The polls spent so far.
    pub fn polls(&self) -> usize {
        self.polls.get()
    }

    /// Whether the budget ran out.
    pub fn crashed(&self) -> bool {
        self.crashed.get()
    }

    /// Where to wake the attempt's driver at the crash.
    pub fn set_driver(&self, waker: &Waker) {
        *self.driver.borrow_mut() = Some(waker.clone());
    }

    /// Spends one poll; `false` once the budget is out.
    fn spend(&self) -> bool {
        if self.crashed.get() {
            return false;
        }
        if self.limit.is_some_and(|limit| self.polls.get() >= limit) {
            self.crashed.set(true);
            if let Some(driver) = self.driver.borrow_mut().take() {
                driver.wake();
            }
            return false;
        }
        self.polls.set(self.polls.get() + 1);
        true
    }
}

/// Removes the thread's budget when dropped.
#[derive(Debug)]
pub struct Installed(());

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = BUDGET.try_with(|slot| slot.borrow_mut().take());
    }
}

/// Wraps a future so that each of its polls spends the thread's budget;
/// once it is out the future is never polled again, nor woken.
pub async fn counted<F: Future>(future: F) -> F::Output {
    // Pinned in the future, not boxed: a detached body pays no allocation
    // for being counted.
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        if spend() {
            future.as_mut().poll(cx)
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Spends one poll of the thread's budget; `true` without one.
fn spend() -> bool {
    BUDGET
        .try_with(|slot| slot.borrow().as_ref().is_none_or(|budget| budget.spend()))
        .unwrap_or(true)
}
