//! A rolling deploy across the migrations that give the claim a new name
//! (0004 on both SQL stores, MySQL's 0005): the replicas of the releases
//! before keep claiming with the statements they know (PostgreSQL's
//! `<table>_claim` and `<table>_steps_of`, MySQL's `<table>_claim` and
//! `<table>_claim_v4` procedures) on a table migrated to this release,
//! and both releases see each other's claims and steps.

use std::time::Duration;

use idem::Store;
use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Fence, StepId, Token};

/// An earlier replica's claim: its outcome code and, for a won claim,
/// how many steps it was answered.
type OldClaim = (i32, usize);

/// The codes the claim statements answer.
const WON: i32 = 0;
const IN_PROGRESS: i32 = 2;

/// `old` claims key `a` (this release sees it held); this release claims
/// `b` (`old` sees it held), saves a step of it and releases it; `old`
/// then wins `b` and is answered that step.
async fn both_releases_claim<S: Store>(
    store: &S,
    mut old: impl AsyncFnMut(&RecordKey, Token) -> OldClaim,
) {
    let lease = Duration::from_secs(30);
    let claim = |lease| Claim::new(Token::random(), Fingerprint::NONE, lease, "older");
    let a = RecordKey::new("older", "a");
    assert_eq!(old(&a, Token::random()).await, (WON, 0));
    let seen = store.claim(&a, &claim(lease)).await.unwrap();
    assert!(matches!(seen, ClaimOutcome::InProgress { .. }), "{seen:?}");

    let b = RecordKey::new("older", "b");
    let mine = claim(lease);
    let won = store.claim(&b, &mine).await.unwrap();
    assert!(matches!(won, ClaimOutcome::Won { .. }), "{won:?}");
    assert_eq!(old(&b, Token::random()).await, (IN_PROGRESS, 0));
    let saved = store.save_step(&b, mine.token, StepId::new(&"s"), b"v", lease);
    assert_eq!(saved.await.unwrap(), Fence::Held);
    assert_eq!(store.release(&b, mine.token).await.unwrap(), Fence::Held);
    assert_eq!(old(&b, Token::random()).await, (WON, 1));
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn a_postgres_replica_of_the_release_before_still_claims() {
    use crate::support::pg_server;
    use sqlx::Connection;

    let (url, schema) = (pg_server::url().await, pg_server::unique_schema("older"));
    let store = idem::PostgresStore::builder()
        .schema(&schema)
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    // The claim statement of the release before, less its first read.
    let statement = format!(
        "SELECT o_outcome, CASE WHEN o_outcome IN (0, 1) THEN \"{schema}\".\"idem_records_steps_of\"($1) END \
         FROM \"{schema}\".\"idem_records_claim\"($1, $2, $3, $4, $5, $6)"
    );
    let old = async |key: &RecordKey, token: Token| {
        let (code, steps): (i32, Option<Vec<Vec<u8>>>) = sqlx::query_as(&statement)
            .bind(&key.as_bytes()[..])
            .bind(&token.to_bytes()[..])
            .bind(&[0u8; 32][..])
            .bind(30_000_000i64)
            .bind("older")
            .bind(false)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        (code, steps.map_or(0, |steps| steps.len()))
    };
    both_releases_claim(&store, old).await;
}

#[cfg(feature = "mysql")]
#[tokio::test]
async fn mysql_replicas_of_the_releases_before_still_claim() {
    use crate::support::mysql_server;
    use sqlx::{Connection, Row};

    let url = mysql_server::url().await;
    for procedure in ["claim", "claim_v4"] {
        let table = mysql_server::unique_table("older");
        let store = idem::MySqlStore::builder()
            .table(&table)
            .connect(&url)
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let mut conn = sqlx::MySqlConnection::connect(&url).await.unwrap();
        let statement = format!("CALL `{table}_{procedure}`(?, ?, ?, ?, ?, ?, ?)");
        let old = async |key: &RecordKey, token: Token| {
            let rows = sqlx::query(&statement)
                .bind(&key.as_bytes()[..])
                .bind(&token.to_bytes()[..])
                .bind(&[0u8; 32][..])
                .bind(30_000_000i64)
                .bind("older")
                .bind(true)
                .bind(false)
                .fetch_all(&mut conn)
                .await
                .unwrap();
            let code: i32 = rows[0].try_get::<Option<i32>, _>(0).unwrap().unwrap();
            (code, rows.len() - 1)
        };
        both_releases_claim(&store, old).await;
    }
}
