//! `wait_for_replicas(n, timeout)`: a claim or completion counts only once
//! `n` replicas have acknowledged it (`WAIT`, pipelined after the write, in
//! the same round trip), so a failover to a replica cannot lose it.

use std::time::Duration;

use idem_contract::StoreError;

/// How many replicas must acknowledge, and how long the server waits.
#[derive(Debug, Clone, Copy)]
pub(super) struct Replicas {
    pub(super) count: u32,
    pub(super) timeout: Duration,
}

impl Replicas {
    /// Appends `WAIT n timeout` to a pipeline.
    pub(super) fn append(&self, pipe: &mut redis::Pipeline) {
        let millis = u64::try_from(self.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        pipe.cmd("WAIT").arg(self.count).arg(millis);
    }

    /// `EVAL script` on `keys` and `args`, then `WAIT`, in one pipeline (the
    /// script's text: the pipeline could not load a missing one).
    pub(super) fn eval_then_wait(
        &self,
        script: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        pipe.cmd("EVAL").arg(script).arg(keys.len());
        for arg in keys.iter().chain(args) {
            pipe.arg(arg);
        }
        self.append(&mut pipe);
        pipe
    }

    /// Fails closed when too few replicas acknowledged `what`.
    pub(super) fn check(&self, acknowledged: u32, what: &str) -> Result<(), StoreError> {
        if acknowledged >= self.count {
            return Ok(());
        }
        Err(StoreError::new(
            "redis",
            format!(
                "only {acknowledged} of the {} replicas required acknowledged the {what} within {:?} (wait_for_replicas): a failover now could lose it, so idem fails closed; the body did not run if this was a claim",
                self.count, self.timeout
            ),
        ))
    }
}
