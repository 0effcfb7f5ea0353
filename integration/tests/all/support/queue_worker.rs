//! Worker processes of the queue tests: the built example binaries,
//! SIGKILLed and reaped when dropped, so a failing test leaves none behind.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command};

/// The example binary `name`, which `cargo test` builds next to the test
/// binaries.
pub(crate) fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo test -p idem-integration`",
        path.display()
    );
    path
}

/// A child process, SIGKILLed and reaped when dropped.
pub(crate) struct Process(Child);

impl Process {
    /// Starts `command`.
    pub(crate) fn spawn(command: &mut Command) -> Process {
        Process(command.spawn().expect("start the process"))
    }

    /// Its exit status if it has exited (reaped), `None` while it runs.
    pub(crate) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.0.try_wait().expect("poll the process")
    }

    /// SIGKILL, as a crash would, and reap it.
    pub(crate) fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

impl From<Child> for Process {
    fn from(child: Child) -> Self {
        Process(child)
    }
}
