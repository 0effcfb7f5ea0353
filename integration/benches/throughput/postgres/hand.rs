//! idem's own claim, completion and replay sent by hand: the very SQL text
//! idem sent (read back from `pg_stat_activity`) with the same binds, through
//! sqlx on the raw subjects' dedicated connections. idem ÷ this is idem's
//! client work alone; this ÷ the raw statements is what idem's statements
//! cost the server beyond a plain `INSERT` + `UPDATE` or `SELECT`.

use idem::store::Token;
use idem::{Error, Idempotency, PostgresStore};
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{Connection, Row};

use super::Raw;
use crate::dedicated::raw_key;

/// The claim's outcomes as its statement answers them.
const WON: i32 = 0;
const COMPLETED: i32 = 3;
/// idem's default lease and TTL, in microseconds, and a call site's name.
const LEASE_US: i64 = 30_000_000;
const TTL_US: i64 = 24 * 3600 * 1_000_000;
const SITE: &str = "idem_integration::throughput::postgres";

/// idem's claim, completion and replay statements, as it sent them.
pub(super) struct Hand {
    claim: String,
    complete: String,
    /// The read of a completed row, which a store sends for a key it saw
    /// completed.
    replay: String,
}

impl Hand {
    /// The statements idem sends for `schema`: a store of one connection,
    /// named `tag` in `pg_stat_activity`, makes a fresh call (its last
    /// statement is the completion), then replays it (the read of the
    /// completed row); another such store, which has not seen the key,
    /// replays it by the claim.
    pub(super) async fn read(options: &PgConnectOptions, schema: &str, tag: &str) -> Hand {
        let store = async || {
            PostgresStore::builder()
                .schema(schema)
                .max_connections(1)
                .connect_with(options.clone().application_name(tag))
                .await
                .unwrap()
        };
        let mut admin = PgConnection::connect_with(options).await.unwrap();
        let mut last = async || -> String {
            let text: String = sqlx::query_scalar(
                "SELECT query FROM pg_stat_activity WHERE application_name = $1",
            )
            .bind(tag)
            .fetch_one(&mut admin)
            .await
            .unwrap();
            // `track_activity_query_size` (1024 by default) cuts longer text.
            assert!(text.len() < 1023, "statement cut short: {text}");
            text
        };
        let call = async |store: &PostgresStore| {
            let idem = Idempotency::new(store.clone());
            let out: Result<u64, Error> = idem.call("hand", "text").run(|| async { Ok(1) }).await;
            out.unwrap();
        };
        let first = store().await;
        call(&first).await;
        let complete = last().await;
        call(&first).await;
        let replay = last().await;
        first.close().await;
        let second = store().await;
        call(&second).await;
        let claim = last().await;
        second.close().await;
        assert!(complete.starts_with("UPDATE") && claim.contains("_claim"));
        assert!(replay.starts_with("SELECT") && !replay.contains("_claim"));
        Hand {
            claim,
            complete,
            replay,
        }
    }
}

impl Raw {
    /// idem's claim on key `key` by hand, and its completion when the
    /// claim is won (a fresh key); a replay reads the record as idem does.
    pub(super) async fn by_hand(&self, hand: &Hand, i: u64, key: i64) {
        let key = &raw_key(key)[..];
        let token = Token::random().to_bytes();
        let claim = sqlx::query(&hand.claim)
            .bind(key)
            .bind(&token[..])
            .bind(&[9u8; 32][..])
            .bind(LEASE_US)
            .bind(SITE)
            .bind(false);
        let row = self.fetch_one(i, claim).await;
        let outcome: i32 = row.get(0);
        if outcome == COMPLETED {
            let record: Vec<u8> = row.get(2);
            std::hint::black_box(record);
            return;
        }
        assert_eq!(outcome, WON);
        let complete = sqlx::query(&hand.complete)
            .bind(key)
            .bind(&token[..])
            .bind(&b"\x01\x00\x031"[..])
            .bind(TTL_US)
            .bind(None::<i64>);
        assert_eq!(self.execute(i, complete).await, 1);
    }

    /// idem's replay of key `key` by hand, as a store that saw it
    /// completed sends it.
    pub(super) async fn replay_by_hand(&self, hand: &Hand, i: u64, key: i64) {
        let key = raw_key(key);
        let replay = sqlx::query(&hand.replay).bind(&key[..]);
        let record: Vec<u8> = self.fetch_one(i, replay).await.get(2);
        std::hint::black_box(record);
    }
}
