//! Sending to whichever connection a `RedisStore` has (one server, a
//! cluster, or Sentinel's primary), and the eviction check on connect.

use std::sync::atomic::Ordering;

use idem_contract::StoreError;
use idem_contract::key::RecordKey;
use redis::aio::ConnectionLike;
use redis::{Cmd, ErrorKind, FromRedisValue, Script, ServerErrorKind};

use super::{Conn, RedisStore, eviction};

pub(super) fn store_error(err: redis::RedisError) -> StoreError {
    // A wrong password, URL or Sentinel master name does not pass by itself.
    match err.kind() {
        ErrorKind::AuthenticationFailed
        | ErrorKind::InvalidClientConfig
        | ErrorKind::MasterNameNotFoundBySentinel
        | ErrorKind::EmptySentinelList => StoreError::misconfigured("redis", err),
        _ => StoreError::new("redis", err),
    }
}

impl RedisStore {
    /// What is checked on connect and after a failed connection (the
    /// server may since be another): its eviction policy, its native
    /// compare-and-set and its clock.
    pub(super) async fn check_server(&self) -> Result<(), StoreError> {
        self.check_eviction().await?;
        self.detect_native().await?;
        self.read_clock().await
    }

    /// Reads the server's clock (`TIME`; see `clock.rs`). A refused `TIME`
    /// leaves the clock as it was.
    async fn read_clock(&self) -> Result<(), StoreError> {
        let sent = std::time::Instant::now();
        match self.send_cmd::<(String, String)>(&redis::cmd("TIME")).await {
            Ok(answer) => {
                if let Some(server) = super::clock::of_time(&answer) {
                    self.clock.read(server, sent, std::time::Instant::now());
                }
                Ok(())
            }
            Err(err) if err.is_io_error() || err.is_timeout() => Err(store_error(err)),
            Err(_) => Ok(()),
        }
    }

    /// Reads every primary's version (`INFO server`): what they all
    /// understand is used. A refused `INFO` leaves the scripts.
    async fn detect_native(&self) -> Result<(), StoreError> {
        let mut info = redis::cmd("INFO");
        info.arg("server");
        let mut texts = Vec::new();
        match self.ask_every_primary(info).await {
            Ok(answer) => eviction::flatten(&answer, &mut texts),
            Err(err) if err.is_io_error() || err.is_timeout() => return Err(store_error(err)),
            Err(_) => {}
        }
        texts.retain(|text| text.contains("_version:"));
        self.native.detected(&texts);
        Ok(())
    }

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

    /// A fenced script on the record's key alone.
    pub(super) async fn invoke<T: FromRedisValue>(
        &self,
        script: &Script,
        key: &RecordKey,
        args: &[&[u8]],
    ) -> redis::RedisResult<T> {
        self.eval(script, &[&self.redis_key(key)], args).await
    }

    /// `script` by `EVALSHA`, on whichever connection this store has.
    pub(super) async fn eval<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> redis::RedisResult<T> {
        let cmd = evalsha(script, keys, args);
        // Boxed off the single connection's path, as in `send_cmd`.
        match &self.conn {
            Conn::Single(conn) => eval_on(&mut conn.clone(), script, &cmd).await,
            Conn::Cluster(conn) => Box::pin(eval_on(&mut conn.clone(), script, &cmd)).await,
            Conn::Sentinel(followed) => {
                let send =
                    followed.send(async |mut manager| eval_on(&mut manager, script, &cmd).await);
                Box::pin(send).await
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

    /// One command; a failed connection has the next claim check the
    /// server again, as `query_raw` does.
    pub(super) async fn send_cmd<T: redis::FromRedisValue>(
        &self,
        cmd: &Cmd,
    ) -> redis::RedisResult<T> {
        // The cluster's and Sentinel's futures are boxed, so that a claim's
        // future holds only the single connection's.
        let answer = match &self.conn {
            Conn::Single(conn) => cmd.query_async(&mut conn.clone()).await,
            Conn::Cluster(conn) => Box::pin(cmd.query_async(&mut conn.clone())).await,
            Conn::Sentinel(followed) => {
                Box::pin(followed.send(async |mut manager| cmd.query_async(&mut manager).await))
                    .await
            }
        };
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
        // Boxed off the single connection's path, as in `send_cmd`.
        match &self.conn {
            Conn::Single(conn) => pipe.query_async(&mut conn.clone()).await,
            Conn::Cluster(conn) => Box::pin(pipe.query_async(&mut conn.clone())).await,
            Conn::Sentinel(followed) => {
                let send = followed.send(async |mut manager| pipe.query_async(&mut manager).await);
                Box::pin(send).await
            }
        }
    }
}

/// A command of `args`, in buffers of their size (a command grown one
/// argument at a time reallocates as it goes).
pub(super) fn command<'a>(args: impl IntoIterator<Item = &'a [u8], IntoIter: Clone>) -> Cmd {
    let args = args.into_iter();
    let mut cmd = Cmd::with_capacity(args.clone().count(), args.clone().map(<[u8]>::len).sum());
    for arg in args {
        cmd.arg(arg);
    }
    cmd
}

/// The `EVALSHA` of `script` on `keys` and `args`, as `ScriptInvocation`
/// sends it but built in place: an invocation first copies each key and
/// argument into a `Vec` of its own.
fn evalsha(script: &Script, keys: &[&[u8]], args: &[&[u8]]) -> Cmd {
    let hash = script.get_hash().as_bytes();
    let mut digits = itoa::Buffer::new();
    let count = digits.format(keys.len()).as_bytes();
    let head: [&[u8]; 3] = [b"EVALSHA", hash, count];
    command(head.iter().chain(keys).chain(args).copied())
}

/// Sends an `EVALSHA`; when the server's script cache lacks the script
/// (a restart, `SCRIPT FLUSH`, a failover), loads it and sends the
/// `EVALSHA` again, as `ScriptInvocation::invoke_async` does.
async fn eval_on<T: FromRedisValue>(
    conn: &mut impl ConnectionLike,
    script: &Script,
    cmd: &Cmd,
) -> redis::RedisResult<T> {
    match cmd.query_async(conn).await {
        Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            script.load_async(conn).await?;
            cmd.query_async(conn).await
        }
        answer => answer,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_sent_as_grown_ones_would_be() {
        let mut grown = redis::cmd("HGETALL");
        grown.arg(b"idem:s{7}key");
        let built = command([b"HGETALL".as_slice(), b"idem:s{7}key"]);
        assert_eq!(built.get_packed_command(), grown.get_packed_command());
    }

    #[test]
    fn evalsha_is_sent_as_a_script_invocation_sends_it() {
        let script = Script::new("return 1");
        let keys: [&[u8]; 2] = [b"idem:key", b"idem:s{7}key"];
        let args: [&[u8]; 3] = [b"token", b"", b"30000"];
        let mut invocation = redis::cmd("EVALSHA");
        invocation
            .arg(script.get_hash())
            .arg(2)
            .arg(&keys[..])
            .arg(&args[..]);
        let built = evalsha(&script, &keys, &args);
        assert_eq!(built.get_packed_command(), invocation.get_packed_command());
    }
}
