//! Sending to whichever connection a `RedisStore` has (one server, a
//! cluster, or Sentinel's primary), and the eviction check on connect.

use std::sync::atomic::Ordering;

use idem_core::StoreError;
use idem_core::key::RecordKey;
use redis::Script;

use super::{Conn, RedisStore, eviction};

pub(super) fn store_error(err: redis::RedisError) -> StoreError {
    StoreError::new("redis", err)
}

impl RedisStore {
    /// Refuses a server that may evict idem's keys (every primary of a
    /// cluster is asked), unless eviction was allowed.
    pub(super) async fn check_eviction(&self) -> Result<(), StoreError> {
        let mut config = redis::cmd("CONFIG");
        config.arg("GET").arg("maxmemory-policy");
        let mut info = redis::cmd("INFO");
        info.arg("memory");
        let mut found = Vec::new();
        for cmd in [config, info] {
            match self.ask_every_primary(cmd).await {
                Ok(answer) => found = eviction::policies(&answer),
                // Unreachable, not refused: say so, not "cannot read".
                Err(err) if err.is_io_error() || err.is_timeout() => return Err(store_error(err)),
                Err(_) => {}
            }
            if !found.is_empty() {
                break;
            }
        }
        eviction::check(&found, self.allow_eviction)
    }

    pub(super) async fn ask_every_primary(
        &self,
        cmd: redis::Cmd,
    ) -> redis::RedisResult<redis::Value> {
        match &self.conn {
            Conn::Single(conn) => cmd.query_async(&mut conn.clone()).await,
            Conn::Sentinel(followed) => {
                followed
                    .send(async |mut manager| cmd.query_async(&mut manager).await)
                    .await
            }
            Conn::Cluster(conn) => {
                let every = redis::cluster_routing::RoutingInfo::MultiNode((
                    redis::cluster_routing::MultipleNodeRoutingInfo::AllMasters,
                    None,
                ));
                conn.clone().route_command(cmd, every).await
            }
        }
    }

    pub(super) async fn invoke<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        key: &RecordKey,
        args: &[&[u8]],
    ) -> redis::RedisResult<T> {
        let mut invocation = script.prepare_invoke();
        invocation.key(self.redis_key(key));
        for arg in args {
            invocation.arg(*arg);
        }
        self.run_script(&invocation).await
    }

    /// A prepared script, on whichever connection this store has.
    pub(super) async fn run_script<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> redis::RedisResult<T> {
        match &self.conn {
            Conn::Single(conn) => invocation.invoke_async(&mut conn.clone()).await,
            Conn::Cluster(conn) => invocation.invoke_async(&mut conn.clone()).await,
            Conn::Sentinel(followed) => {
                followed
                    .send(async |mut manager| invocation.invoke_async(&mut manager).await)
                    .await
            }
        }
    }

    pub(super) async fn query<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, StoreError> {
        self.query_raw(pipe).await.map_err(store_error)
    }

    pub(super) async fn query_raw<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> redis::RedisResult<T> {
        let answer = self.send_pipe(pipe).await;
        if answer
            .as_ref()
            .is_err_and(|err| err.is_io_error() || err.is_timeout())
        {
            self.recheck.store(true, Ordering::Relaxed);
        }
        answer
    }

    pub(super) async fn send_pipe<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> redis::RedisResult<T> {
        match &self.conn {
            Conn::Single(conn) => pipe.query_async(&mut conn.clone()).await,
            Conn::Cluster(conn) => pipe.query_async(&mut conn.clone()).await,
            Conn::Sentinel(followed) => {
                followed
                    .send(async |mut manager| pipe.query_async(&mut manager).await)
                    .await
            }
        }
    }
}

/// Whether Redis refused a write it would otherwise take: out of memory
/// under `noeviction`, or a read-only replica.
pub(super) fn refuses_writes(err: &redis::RedisError) -> bool {
    // In a pipeline the server's code is not always parsed into a kind;
    // its text always carries it.
    let text = err.to_string();
    text.contains("OOM") || text.contains("READONLY")
}
