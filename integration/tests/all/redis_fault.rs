//! A `RedisStore` whose private `redis-server` dies under load and comes
//! back on the same port: no panic, every failure is `Error::Store` and
//! fast, no body runs without a won claim, and the same store (never
//! recreated) works again after the restart.

use crate::support::redis_server;
use crate::support::turn_proxy;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Fence, Token};
use idem::{Error, Idempotency, RedisStore, Store, StoreError};
use redis_server::PrivateRedis;
use turn_proxy::TurnProxy;

/// Counts what the store granted: claims won and completions that held.
struct Audited {
    inner: RedisStore,
    granted: Arc<Granted>,
}

#[derive(Default)]
struct Granted {
    won: AtomicUsize,
    completed: AtomicUsize,
}

#[idem::store::async_trait]
impl Store for Audited {
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        let out = self.inner.claim(key, claim).await;
        if matches!(out, Ok(ClaimOutcome::Won { .. })) {
            self.granted.won.fetch_add(1, Ordering::SeqCst);
        }
        out
    }
    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: idem::store::Retention,
    ) -> Result<Fence, StoreError> {
        let out = self.inner.complete(key, token, record, kept).await;
        if matches!(out, Ok(Fence::Held)) {
            self.granted.completed.fetch_add(1, Ordering::SeqCst);
        }
        out
    }
    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        self.inner.release(key, token).await
    }
    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        self.inner.renew(key, token, lease).await
    }
    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        self.inner.forget(key).await
    }
}

async fn fast_store(server: &PrivateRedis) -> RedisStore {
    RedisStore::builder()
        .connection_timeout(Duration::from_millis(300))
        .response_timeout(Duration::from_millis(300))
        .connect(&server.url())
        .await
        .expect("connect to the private redis-server")
}

#[derive(Default)]
struct Tally {
    ok: AtomicUsize,
    store_errors: AtomicUsize,
    lost: AtomicUsize,
    bodies: AtomicUsize,
    slowest_failure_ms: AtomicUsize,
}

const WORKERS: usize = 8;
/// Per worker: the loop ends at `stop` or here, whichever comes first.
const MAX_CALLS: u32 = 50_000;

/// Eight workers call with fresh keys while the server is killed
/// (SIGKILL) mid-load and restarted 1.5 s later on the same port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_and_restart_mid_load() {
    let mut server = PrivateRedis::start(&[]);
    let granted = Arc::new(Granted::default());
    let idem = Idempotency::new(Audited {
        inner: fast_store(&server).await,
        granted: granted.clone(),
    });
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));

    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (idem, tally, stop) = (idem.clone(), tally.clone(), stop.clone());
            tokio::spawn(async move {
                for i in 0..MAX_CALLS {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let started = Instant::now();
                    let out: Result<u32, Error> = idem
                        .call("fault", &(w as u32, i))
                        .run(|| async {
                            tally.bodies.fetch_add(1, Ordering::SeqCst);
                            Ok(i)
                        })
                        .await;
                    match out {
                        Ok(v) => {
                            assert_eq!(v, i);
                            tally.ok.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(Error::Store(_)) => {
                            tally.store_errors.fetch_add(1, Ordering::SeqCst);
                            let ms = started.elapsed().as_millis() as usize;
                            tally.slowest_failure_ms.fetch_max(ms, Ordering::SeqCst);
                            // Don't spin on a dead server.
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        // The completion was sent again until the server
                        // came back without the claim (it keeps nothing
                        // on disk): the body ran, its result not stored.
                        Err(Error::LeaseLost {
                            taken_over: false, ..
                        }) => {
                            tally.lost.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(other) => panic!("worker {w}, call {i}: {other:?}"),
                    }
                }
            })
        })
        .collect();

    tokio::time::sleep(Duration::from_secs(1)).await;
    let ok_before_kill = tally.ok.load(Ordering::SeqCst);
    server.kill();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let errors_during_outage = tally.store_errors.load(Ordering::SeqCst);
    let server = tokio::task::spawn_blocking(move || {
        server.restart();
        server
    })
    .await
    .unwrap();
    let ok_at_restart = tally.ok.load(Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    while tally.ok.load(Ordering::SeqCst) < ok_at_restart + 500 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.await.expect("a worker panicked");
    }
    drop(server);

    let ok = tally.ok.load(Ordering::SeqCst);
    let bodies = tally.bodies.load(Ordering::SeqCst);
    let won = granted.won.load(Ordering::SeqCst);
    let completed = granted.completed.load(Ordering::SeqCst);
    let slowest = tally.slowest_failure_ms.load(Ordering::SeqCst);
    println!(
        "ok {ok} ({ok_before_kill} before the kill), store errors {}, lease lost {}, \
         claims won {won}, bodies {bodies}, completed {completed}, slowest failed call {slowest} ms",
        tally.store_errors.load(Ordering::SeqCst),
        tally.lost.load(Ordering::SeqCst),
    );
    assert!(ok_before_kill > 0, "no work before the kill");
    assert!(errors_during_outage > 0, "the outage was not seen");
    assert!(slowest < 2_000, "a failing call took {slowest} ms");
    assert!(
        ok >= ok_at_restart + 500,
        "work did not resume after the restart: {} calls",
        ok - ok_at_restart
    );
    // No body without a won claim; every Ok answer is a completion that held.
    assert_eq!(bodies, won, "a body ran without a won claim");
    assert_eq!(ok, completed);
    // The bodies that did run but could not store (their completion hit
    // the outage) answered `LeaseLost` or `Error::Store`, never `Ok`.
    let unstored = tally.lost.load(Ordering::SeqCst) + tally.store_errors.load(Ordering::SeqCst);
    assert!(bodies - ok <= unstored);
}

/// A store whose server is gone answers `Error::Store` within about its
/// response timeout, the body never runs, and the same store succeeds
/// once the server is back.
#[tokio::test]
async fn a_dead_server_fails_closed_and_fast_then_recovers() {
    let mut server = PrivateRedis::start(&[]);
    let idem = Idempotency::new(fast_store(&server).await);
    let first: Result<u8, Error> = idem.call("dead", "warm").run(|| async { Ok(1) }).await;
    assert_eq!(first.unwrap(), 1);

    server.kill();
    let ran = AtomicBool::new(false);
    for attempt in 0..5 {
        let started = Instant::now();
        let out: Result<u8, Error> = idem
            .call("dead", &attempt)
            .run(|| async {
                ran.store(true, Ordering::SeqCst);
                Ok(2)
            })
            .await;
        let took = started.elapsed();
        assert!(matches!(out, Err(Error::Store(_))), "{out:?}");
        assert!(
            took < Duration::from_secs(2),
            "attempt {attempt} took {took:?}"
        );
    }
    assert!(!ran.load(Ordering::SeqCst), "a body ran without a claim");

    let server = tokio::task::spawn_blocking(move || {
        server.restart();
        server
    })
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out: Result<u8, Error> = idem.call("dead", "back").run(|| async { Ok(3) }).await;
        match out {
            Ok(v) => {
                assert_eq!(v, 3);
                break;
            }
            Err(Error::Store(err)) if Instant::now() < deadline => {
                let _ = err;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(other) => panic!("the store did not recover: {other:?}"),
        }
    }
    drop(server);
}

/// Connecting to a closed loopback port fails fast with a `StoreError`
/// (which `?` turns into `Error::Store`): there is no store, so no body
/// can run.
#[tokio::test]
async fn an_unreachable_redis_fails_fast() {
    let closed = redis_server::ports::closed();
    let started = Instant::now();
    let connect = async {
        let store = RedisStore::builder()
            .connection_timeout(Duration::from_millis(300))
            .connect(&format!("redis://127.0.0.1:{}", closed.port))
            .await?;
        Ok::<_, Error>(Idempotency::new(store))
    };
    let out = connect.await;
    assert!(
        matches!(out, Err(Error::Store(_))),
        "connected to a closed port"
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// The closed port above stays closed however many servers parallel
/// tests start: no one can bind it, and connecting is refused (issue 37:
/// a port found free and let go was taken by another test's server). A
/// server's reserved port is never one the kernel hands out, nor another
/// test's while reserved.
#[test]
fn closed_and_reserved_ports_cannot_be_taken() {
    let closed = redis_server::ports::closed();
    assert!(std::net::TcpListener::bind(("127.0.0.1", closed.port)).is_err());
    let refused = std::net::TcpStream::connect(("127.0.0.1", closed.port)).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    let reserved: Vec<_> = (0..8).map(|_| redis_server::ports::reserve()).collect();
    let mut numbers: Vec<u16> = reserved.iter().map(|r| r.port).collect();
    numbers.sort_unstable();
    numbers.dedup();
    assert_eq!(numbers.len(), reserved.len(), "a port reserved twice");
    for _ in 0..64 {
        let given = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(!numbers.contains(&given.local_addr().unwrap().port()));
    }
}

/// A claim whose answer times out while the server is paused (`CLIENT
/// PAUSE`, on a private server) is applied when the pause ends; the caller
/// was told the body did not run. The runtime then ends that claim by its
/// token (it lapses, so a takeover's evidence would stay), and the next
/// call takes it over within seconds instead of answering `InProgress`
/// with no holder for the whole 30 s lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_applied_after_its_timeout_lapses() {
    let server = PrivateRedis::start(&[]);
    let idem = Idempotency::new(fast_store(&server).await);
    let client = redis::Client::open(server.url()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1500)
        .arg("ALL")
        .query_async(&mut admin)
        .await
        .unwrap();
    let timed_out: Result<u8, Error> = idem.call("paused", "k").run(|| async { Ok(1) }).await;
    assert!(matches!(timed_out, Err(Error::Store(_))), "{timed_out:?}");

    // The pause ends at 1.5 s; the queued claim lands; the lapse follows.
    let started = Instant::now();
    let retried = loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let out: Result<u8, Error> = idem.call("paused", "k").run(|| async { Ok(2) }).await;
        match out {
            Err(Error::InProgress { .. } | Error::Store(_))
                if started.elapsed() < Duration::from_secs(10) => {}
            other => break other,
        }
    };
    assert_eq!(
        retried.unwrap(),
        2,
        "the key ran again after {:?}",
        started.elapsed()
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    println!(
        "key free again {:?} after the timed-out claim",
        started.elapsed()
    );
}

/// A Redis at `maxmemory` (noeviction) refuses writes: a duplicate of a
/// completed call is still replayed (read instead of the refused claim),
/// while a new key fails closed with `Error::Store`.
#[tokio::test]
async fn a_full_redis_still_replays_completed_records() {
    let server = PrivateRedis::start(&["--maxmemory-policy", "noeviction"]);
    let idem = Idempotency::new(fast_store(&server).await);
    let first: Result<String, Error> = idem
        .call("full", "done")
        .run(|| async { Ok("receipt".to_owned()) })
        .await;
    assert_eq!(first.unwrap(), "receipt");

    // 2 MiB of data, then a `maxmemory` below it: every write is refused.
    let client = redis::Client::open(server.url()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let filler = vec![b'x'; 8 * 1024];
    for i in 0..256 {
        let _: () = redis::cmd("SET")
            .arg(format!("filler:{i}"))
            .arg(&filler)
            .query_async(&mut admin)
            .await
            .unwrap();
    }
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1mb")
        .query_async(&mut admin)
        .await
        .unwrap();
    let refused: redis::RedisResult<()> = redis::cmd("SET")
        .arg("probe")
        .arg("x")
        .query_async(&mut admin)
        .await;
    assert!(refused.is_err(), "the server still takes writes");

    let replay: Result<String, Error> = idem
        .call("full", "done")
        .run(|| async { panic!("a duplicate ran") })
        .await;
    assert_eq!(replay.unwrap(), "receipt");
    let fresh: Result<String, Error> = idem
        .call("full", "new")
        .run(|| async { panic!("ran without a claim") })
        .await;
    let Err(Error::Store(err)) = fresh else {
        panic!("{fresh:?}")
    };
    assert!(err.to_string().contains("OOM"), "{err}");
}

/// A completion that reached Redis but whose answer was lost with its
/// connection is sent once more on a new one; it finds its own record and
/// holds, so the caller gets its value and a duplicate replays it. (Before,
/// the caller got `Error::Store` although the body ran and the record was
/// stored.) A lost claim answer still fails closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_whose_answer_was_lost_is_sent_again() {
    let server = PrivateRedis::start(&[]);
    let proxy =
        Arc::new(TurnProxy::start(server.url().trim_start_matches("redis://").to_owned()).await);
    let store = RedisStore::builder()
        .connection_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_secs(2))
        .connect(&format!("redis://{}", proxy.addr))
        .await
        .unwrap();
    let idem = Idempotency::new(store);
    let runs = Arc::new(AtomicUsize::new(0));
    for key in 0..5 {
        let (proxy, runs) = (proxy.clone(), runs.clone());
        let first: Result<String, Error> = idem
            .call("cut", &key)
            .run(|| async move {
                runs.fetch_add(1, Ordering::SeqCst);
                // The next answer on the wire is the completion's.
                proxy.cut_next_answer();
                Ok(format!("value {key}"))
            })
            .await;
        assert_eq!(first.unwrap(), format!("value {key}"));
        let replay: Result<String, Error> = idem
            .call("cut", &key)
            .run(|| async { panic!("must replay") })
            .await;
        assert_eq!(replay.unwrap(), format!("value {key}"));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 5);

    proxy.cut_next_answer();
    let claim_cut: Result<String, Error> = idem
        .call("cut", "claim")
        .run(|| async { panic!("a claim without an answer must not run the body") })
        .await;
    assert!(matches!(claim_cut, Err(Error::Store(_))), "{claim_cut:?}");
}
