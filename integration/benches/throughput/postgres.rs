//! PostgresStore beside the least a fenced dedupe sends (`INSERT … ON
//! CONFLICT (key) DO UPDATE … WHERE expires_at < now()`, then `UPDATE …
//! WHERE key = $1 AND token = $2`) and, for replays, a raw `SELECT … WHERE
//! key = $1 AND expires_at > now()`, on a table shaped like idem's. Replays
//! come two ways: hot keys (1,000 keys, each store answering from its
//! table of keys it saw completed) and spread keys ([`crate::spread`]:
//! each key replayed once by a store that did not complete it). Where the
//! server loads `pg_stat_statements`, each scenario notes the server time
//! per statement ([`server_time`]).
//!
//! The baseline for the targets runs on the same kind of connections as
//! idem: `PostgresStore::connect` keeps dedicated `PgConnection`s and
//! reuses them without a ping (one network turn per statement), and so
//! does `raw …, dedicated connections`, through the same few lines (a
//! semaphore and a list of idle connections). `raw …, sqlx pool` runs the
//! same statements on a `PgPool` with `test_before_acquire(false)`, which
//! still pings each connection when it goes back; `idem from_pool` is the
//! store built on that very pool, paying the same pings.
//!
//! `idem's statements by hand` sends idem's own claim and completion, or
//! for a replay its read of the completed row (the same text and binds,
//! see [`hand`]), on the dedicated baseline's connections: idem ÷ it is
//! idem's client work alone.
//!
//! Which CPU the server process of a connection runs on, relative to the
//! client's thread, sticks to the connection and moved single-caller
//! latency by 4× between two identical connections in one run. So idem
//! and the dedicated baseline each spread their calls over [`SPREAD`]
//! independent sets of connections (call `i` on set `i % SPREAD`). Each
//! subject keeps at most [`CONNECTIONS`] connections, below the server's
//! 100 for all subjects together.

use std::sync::Arc;

use idem::{Error, Idempotency, PostgresStore};
use sqlx::postgres::{PgArguments, PgConnectOptions, PgConnection, PgPoolOptions, PgRow};
use sqlx::query::Query;
use sqlx::{PgPool, Postgres, Row};

use crate::dedicated::raw_key;

mod hand;
mod server_time;
mod spread;
use crate::harness::{Report, Runner, idem_runner, idem_runner_over, measure, runner};

/// Connections per subject (32 callers share them at concurrency 32).
const CONNECTIONS: usize = 20;
/// Independent connection sets per subject.
const SPREAD: usize = 4;
const HOT: u64 = 1_000;

fn url() -> String {
    std::env::var("IDEM_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

async fn idem_call(idem: &Idempotency, scope: &str, key: u64) {
    let out: Result<u64, Error> = idem.call(scope, &key).run(|| async move { Ok(key) }).await;
    out.unwrap();
}

/// Runs `subjects` as `name`, noting the server time per statement where
/// the server keeps it.
async fn scenario(report: &mut Report, pool: &PgPool, name: &str, subjects: Vec<(&str, Runner)>) {
    if !report.wants(name) {
        return;
    }
    let timed = server_time::reset(pool).await;
    report.scenario(name, subjects).await;
    if timed {
        let label = format!("{name} ({})", report.runtime());
        report.note(server_time::note(pool, &label).await);
    }
}

type Dedicated = crate::dedicated::Dedicated<PgConnection>;

/// Where the raw statements run.
#[derive(Clone)]
enum Raw {
    /// [`SPREAD`] sets of dedicated connections.
    Dedicated(Arc<[Dedicated]>),
    Pool(PgPool),
}

/// The raw statements, rendered once, and idem's own.
struct Statements {
    insert: String,
    update: String,
    select: String,
    idem: hand::Hand,
}

/// What a baseline's call sends.
#[derive(Clone, Copy)]
enum Kind {
    /// The fenced upsert, then the `UPDATE` fenced by the token.
    Two,
    /// `SELECT` by key.
    Select,
    /// idem's claim, then (for a fresh key) its completion, by hand.
    Hand,
}

impl Raw {
    /// The connections for call `i`.
    fn pick(&self, i: u64) -> Option<&Dedicated> {
        match self {
            Raw::Dedicated(sets) => Some(&sets[i as usize % sets.len()]),
            Raw::Pool(_) => None,
        }
    }

    async fn execute(&self, i: u64, query: Query<'_, Postgres, PgArguments>) -> u64 {
        match (self.pick(i), self) {
            (Some(conns), _) => {
                conns
                    .with(async |conn| query.execute(conn).await.unwrap().rows_affected())
                    .await
            }
            (None, Raw::Pool(pool)) => query.execute(pool).await.unwrap().rows_affected(),
            (None, Raw::Dedicated(_)) => unreachable!(),
        }
    }

    async fn fetch_one(&self, i: u64, query: Query<'_, Postgres, PgArguments>) -> PgRow {
        match (self.pick(i), self) {
            (Some(conns), _) => {
                conns
                    .with(async |conn| query.fetch_one(conn).await.unwrap())
                    .await
            }
            (None, Raw::Pool(pool)) => query.fetch_one(pool).await.unwrap(),
            (None, Raw::Dedicated(_)) => unreachable!(),
        }
    }

    async fn two(&self, sql: &Statements, i: u64, key: i64) {
        let key = &raw_key(key)[..];
        let token = &[7u8; 16][..];
        let fingerprint = &[9u8; 32][..];
        let inserted = self
            .execute(
                i,
                sqlx::query(&sql.insert)
                    .bind(key)
                    .bind(token)
                    .bind(fingerprint),
            )
            .await;
        if inserted == 1 {
            let record = &b"\x01\x00\x031"[..];
            let updated = self
                .execute(
                    i,
                    sqlx::query(&sql.update).bind(key).bind(record).bind(token),
                )
                .await;
            assert_eq!(updated, 1);
        }
    }

    async fn select(&self, sql: &Statements, i: u64, key: i64) {
        let key = raw_key(key);
        let query = sqlx::query(&sql.select).bind(&key[..]);
        let row = match (self.pick(i), self) {
            (Some(conns), _) => {
                conns
                    .with(async |conn| query.fetch_optional(conn).await.unwrap())
                    .await
            }
            (None, Raw::Pool(pool)) => query.fetch_optional(pool).await.unwrap(),
            (None, Raw::Dedicated(_)) => unreachable!(),
        };
        let record: Vec<u8> = row.expect("a stored row").get(0);
        std::hint::black_box(record);
    }
}

fn raw_runner(
    raw: &Raw,
    sql: &Arc<Statements>,
    concurrency: usize,
    calls: u64,
    kind: Kind,
    replay: bool,
) -> Runner {
    let (raw, sql) = (raw.clone(), sql.clone());
    runner(move || {
        let (raw, sql) = (raw.clone(), sql.clone());
        measure(concurrency, calls, move |i| {
            let (raw, sql) = (raw.clone(), sql.clone());
            async move {
                let key = if replay {
                    -((i % HOT) as i64) - 1
                } else {
                    i as i64
                };
                match kind {
                    Kind::Two => raw.two(&sql, i, key).await,
                    Kind::Select => raw.select(&sql, i, key).await,
                    Kind::Hand if replay => raw.replay_by_hand(&sql.idem, i, key).await,
                    Kind::Hand => raw.by_hand(&sql.idem, i, key).await,
                }
            }
        })
    })
}

pub(crate) async fn run(report: &mut Report) {
    let url = url();
    let run_id = format!("{:x}", idem::store::Token::random().to_u128() as u32);
    let schema = format!("idem_bench_{run_id}");
    let pool = PgPoolOptions::new()
        .max_connections(CONNECTIONS as u32)
        .test_before_acquire(false)
        .connect(&url)
        .await
        .expect("PostgreSQL for the bench");
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&pool)
        .await
        .unwrap();
    // The raw statements run on a table shaped like idem's (32-byte key,
    // fingerprint, an index on the expiry for cleanup), so the ratios show
    // what idem's protocol costs, not what its record layout costs.
    let table = format!("{schema}.raw");
    for ddl in [
        format!(
            "CREATE TABLE {table} (key bytea PRIMARY KEY, token bytea NOT NULL, fingerprint bytea NOT NULL, record bytea, expires_at timestamptz NOT NULL)"
        ),
        format!("CREATE INDEX ON {table} (expires_at)"),
    ] {
        sqlx::query(&ddl).execute(&pool).await.unwrap();
    }
    let options: PgConnectOptions = url.parse().unwrap();
    let dedicated = Raw::Dedicated(
        (0..SPREAD)
            .map(|_| Dedicated::new(options.clone(), CONNECTIONS / SPREAD))
            .collect(),
    );
    let pooled_raw = Raw::Pool(pool.clone());
    let mut stores = Vec::new();
    for _ in 0..SPREAD {
        let store = PostgresStore::builder()
            .schema(&schema)
            .max_connections((CONNECTIONS / SPREAD) as u32)
            .connect(&url)
            .await
            .unwrap();
        store.migrate().await.unwrap();
        stores.push(store);
    }
    let sql = Arc::new(Statements {
        insert: format!(
            "INSERT INTO {table} AS r (key, token, fingerprint, expires_at) VALUES ($1, $2, $3, now() + interval '30 seconds') \
             ON CONFLICT (key) DO UPDATE SET token = EXCLUDED.token, fingerprint = EXCLUDED.fingerprint, record = NULL, \
             expires_at = EXCLUDED.expires_at WHERE r.expires_at < now()"
        ),
        update: format!(
            "UPDATE {table} SET record = $2, expires_at = now() + interval '1 day' WHERE key = $1 AND token = $3"
        ),
        select: format!("SELECT record FROM {table} WHERE key = $1 AND expires_at > now()"),
        idem: hand::Hand::read(&options, &schema, &format!("idem_bench_text_{run_id}")).await,
    });
    let idems: Vec<Idempotency> = stores.iter().cloned().map(Idempotency::new).collect();
    let idem = idems[0].clone();
    let pooled = Idempotency::new(
        PostgresStore::builder()
            .schema(&schema)
            .from_pool(pool.clone())
            .unwrap(),
    );
    let own = stores[0].clone();
    let cached = Idempotency::builder(own).local_cache(10_000).build();
    let scope: Arc<str> = Arc::from("bench");

    // A round at concurrency 32 lasts about a second: shorter ones moved
    // their ratio by ±10% from run to run.
    for (concurrency, calls) in [(1usize, 300u64), (32, 9_600)] {
        let name = format!("postgres fresh key, concurrency {concurrency}");
        scenario(
            report,
            &pool,
            &name,
            vec![
                    (
                        "idem PostgresStore",
                        idem_runner_over(idems.clone(), scope.clone(), concurrency, calls, |i| i),
                    ),
                    (
                        "idem's statements by hand, dedicated connections",
                        raw_runner(&dedicated, &sql, concurrency, calls, Kind::Hand, false),
                    ),
                    (
                        "fenced minimum (upsert WHERE expired + UPDATE WHERE token), dedicated connections",
                        raw_runner(&dedicated, &sql, concurrency, calls, Kind::Two, false),
                    ),
                    (
                        "fenced minimum, sqlx pool",
                        raw_runner(&pooled_raw, &sql, concurrency, calls, Kind::Two, false),
                    ),
                    (
                        "idem from_pool on that sqlx pool",
                        idem_runner(pooled.clone(), scope.clone(), concurrency, calls, |i| i),
                    ),
                ],
        )
        .await;
    }

    let replays = [(1usize, 2_000u64), (32, 60_000)];
    let replay_name =
        |concurrency| format!("postgres replay (hot keys), concurrency {concurrency}");
    if replays.iter().any(|(c, _)| report.wants(&replay_name(*c))) {
        for k in 0..HOT {
            idem_call(&idem, &scope, u64::MAX - k).await;
            dedicated.two(&sql, k, -(k as i64) - 1).await;
            dedicated.by_hand(&sql.idem, k, -(k as i64) - 1).await;
        }
    }
    for (concurrency, calls) in replays {
        let hot = |i| u64::MAX - i % HOT;
        scenario(
            report,
            &pool,
            &replay_name(concurrency),
            vec![
                (
                    "idem PostgresStore",
                    idem_runner_over(idems.clone(), scope.clone(), concurrency, calls, hot),
                ),
                (
                    "idem's statements by hand, dedicated connections",
                    raw_runner(&dedicated, &sql, concurrency, calls, Kind::Hand, true),
                ),
                (
                    "raw SELECT by key, dedicated connections",
                    raw_runner(&dedicated, &sql, concurrency, calls, Kind::Select, true),
                ),
                (
                    "raw SELECT by key, sqlx pool",
                    raw_runner(&pooled_raw, &sql, concurrency, calls, Kind::Select, true),
                ),
                (
                    "idem PostgresStore + local cache",
                    idem_runner(cached.clone(), scope.clone(), concurrency, calls, hot),
                ),
            ],
        )
        .await;
    }

    // Each key's first call goes to a store of its own, so the stores
    // that replay it never saw it completed.
    let first = Idempotency::new(
        PostgresStore::builder()
            .schema(&schema)
            .max_connections((CONNECTIONS / SPREAD) as u32)
            .connect(&url)
            .await
            .unwrap(),
    );
    for (concurrency, calls) in [(1usize, 320u64), (32, 9_600)] {
        let name = format!("postgres replay (spread keys), concurrency {concurrency}");
        let subjects =
            spread::subjects(&first, &idems, &scope, &dedicated, &sql, concurrency, calls);
        // No server time: the round's first calls would be in it.
        report.scenario(&name, subjects).await;
    }

    if report.wants("postgres bytes per record") {
        let out: Result<String, Error> = idem
            .call(&*scope, "bytes-per-record")
            .run(|| async { Ok("v".repeat(200)) })
            .await;
        out.unwrap();
        let key = idem::key::RecordKey::new(&*scope, "bytes-per-record");
        let (row, record): (i32, i32) = sqlx::query_as(&format!(
            "SELECT pg_column_size(r.*), pg_column_size(r.record) FROM \"{schema}\".idem_records AS r WHERE key = $1"
        ))
        .bind(&key.as_bytes()[..])
        .fetch_one(&pool)
        .await
        .unwrap();
        report.note(format!(
            "postgres bytes per record: `pg_column_size` of the row holding a 200-byte String: {row} bytes (its `record` column {record})"
        ));
    }

    let _ = sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&pool)
        .await;
}
