//! A Sentinel failover under load, on loopback: a primary, a replica and
//! three sentinels of the test's own; eight workers race duplicate calls
//! over a few thousand keys while the primary is killed (SIGKILL). Counts
//! the keys whose body ran twice, with and without `wait_for_replicas`,
//! and how long the store took to work again. Run with `--nocapture` to
//! see the figures; README's "Running Redis for idem" reports them.

use crate::support::redis_server;

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use idem::{Error, Idempotency, RedisStore};
use redis_server::{PrivateRedis, ports};

/// A `redis-server --sentinel` of the test's own, killed when dropped.
struct Sentinel {
    child: Child,
    port: u16,
    _reserved: ports::Reserved,
    dir: std::path::PathBuf,
}

impl Sentinel {
    fn start(primary_port: u16) -> Sentinel {
        let reserved = ports::reserve();
        let port = reserved.port;
        let dir = std::env::temp_dir().join(format!("idem-sentinel-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor idem 127.0.0.1 {primary_port} 2\nsentinel down-after-milliseconds idem 500\nsentinel failover-timeout idem 3000\nsentinel parallel-syncs idem 1\n",
                dir.display()
            ),
        )
        .unwrap();
        let child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "redis-server --sentinel (Debian: apt-get install redis-server redis-sentinel)",
            );
        Sentinel {
            child,
            port,
            _reserved: reserved,
            dir,
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn info(url: &str, section: &str) -> String {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("INFO")
        .arg(section)
        .query_async(&mut conn)
        .await
        .unwrap()
}

async fn dbsize(url: &str) -> i64 {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("DBSIZE").query_async(&mut conn).await.unwrap()
}

const KEYS: usize = 3_000;
const WORKERS: usize = 8;

struct Figures {
    twice: usize,
    store_errors: usize,
    recovered_after: Duration,
}

async fn failover_under_load(wait_for_replicas: bool) -> Figures {
    let mut primary = PrivateRedis::start(&["--repl-diskless-sync-delay", "0"]);
    let replica_of = primary.port.to_string();
    // Two replicas: after the failover one is left to acknowledge `WAIT`.
    let replica = PrivateRedis::start(&["--replicaof", "127.0.0.1", &replica_of]);
    let second = PrivateRedis::start(&["--replicaof", "127.0.0.1", &replica_of]);
    let sentinels: Vec<Sentinel> = (0..3).map(|_| Sentinel::start(primary.port)).collect();
    // The replica in sync, and the sentinels aware of it, before the load.
    let synced = Instant::now() + Duration::from_secs(20);
    while !info(&replica.url(), "replication")
        .await
        .contains("master_link_status:up")
        || !info(&second.url(), "replication")
            .await
            .contains("master_link_status:up")
    {
        assert!(Instant::now() < synced, "the replica never synced");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let mut builder = RedisStore::builder()
        .connection_timeout(Duration::from_millis(300))
        .response_timeout(Duration::from_millis(300));
    if wait_for_replicas {
        builder = builder.wait_for_replicas(1, Duration::from_millis(200));
    }
    let store = builder
        .connect_sentinel(sentinels.iter().map(Sentinel::url), "idem")
        .await
        .expect("connect through the sentinels");
    let idem = Idempotency::new(store);

    let runs: Arc<Vec<AtomicU32>> = Arc::new((0..KEYS).map(|_| AtomicU32::new(0)).collect());
    let done = Arc::new(AtomicUsize::new(0));
    let store_errors = Arc::new(AtomicUsize::new(0));
    let killed_at: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
    let recovered: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for worker in 0..WORKERS {
        let (idem, runs, done, store_errors) = (
            idem.clone(),
            runs.clone(),
            done.clone(),
            store_errors.clone(),
        );
        let (killed_at, recovered, stop) = (killed_at.clone(), recovered.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            // Each worker walks every key, in an order of its own.
            for i in 0..KEYS {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let key = (i * (2 * worker + 1) + worker * 97) % KEYS;
                let runs = runs.clone();
                let out: Result<u32, Error> = idem
                    .call("failover", &(key as u64))
                    .run(|| async move {
                        runs[key].fetch_add(1, Ordering::SeqCst);
                        Ok(key as u32)
                    })
                    .await;
                match out {
                    Ok(_) => {
                        if killed_at.lock().unwrap().is_some() {
                            recovered.lock().unwrap().get_or_insert_with(Instant::now);
                        }
                    }
                    Err(Error::Store(_)) => {
                        store_errors.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(_) => {}
                }
                done.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    // Kill the primary a third of the way in.
    while done.load(Ordering::SeqCst) < KEYS * WORKERS / 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let replica_keys = dbsize(&replica.url()).await;
    let primary_keys = dbsize(&primary.url()).await;
    primary.kill();
    *killed_at.lock().unwrap() = Some(Instant::now());
    println!("at the kill: primary {primary_keys} keys, replica {replica_keys}");
    let deadline = Instant::now() + Duration::from_secs(60);
    for worker in workers {
        let left = deadline.saturating_duration_since(Instant::now());
        if tokio::time::timeout(left, worker).await.is_err() {
            stop.store(true, Ordering::SeqCst);
        }
    }
    let killed = killed_at.lock().unwrap().unwrap();
    let recovered_after = recovered
        .lock()
        .unwrap()
        .map(|at| at.duration_since(killed))
        .expect("the store never worked again after the failover");
    Figures {
        twice: runs
            .iter()
            .filter(|n| n.load(Ordering::SeqCst) >= 2)
            .count(),
        store_errors: store_errors.load(Ordering::SeqCst),
        recovered_after,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_is_followed_and_waiting_for_replicas_loses_no_claim() {
    let without = failover_under_load(false).await;
    println!(
        "without wait_for_replicas: {} of {KEYS} keys ran twice; {} calls failed with Error::Store; working again {:?} after the kill",
        without.twice, without.store_errors, without.recovered_after
    );
    let with = failover_under_load(true).await;
    println!(
        "with wait_for_replicas(1, 200ms): {} of {KEYS} keys ran twice; {} calls failed with Error::Store; working again {:?} after the kill",
        with.twice, with.store_errors, with.recovered_after
    );
    assert_eq!(
        with.twice, 0,
        "a claim acknowledged by a replica was lost in the failover"
    );
    assert!(with.recovered_after < Duration::from_secs(30));
    assert!(without.recovered_after < Duration::from_secs(30));
}
