//! `idem purge --batch N --pause D` (issue 50): the purge deletes in
//! batches of N with D between them; a bad value is refused before any
//! store is touched.

use std::time::{Duration, Instant};

use idem::store::Token;
use idem::{Error, Idempotency, SqliteStore};
use serde_json::{Value, json};

use crate::commands::run;

#[tokio::test]
async fn purge_takes_batch_and_pause() {
    let dir = std::env::temp_dir().join(format!("idem-cli50-{:x}", Token::random().to_u128()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("pace.db");
    let idem = Idempotency::new(SqliteStore::open(&path).await.unwrap());
    for key in 0..5u8 {
        let _: u8 = idem
            .call("pace", &key)
            .run(|| async { Ok::<_, Error>(key) })
            .await
            .unwrap();
    }
    let db = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    sqlx::query("UPDATE idem_records SET expires_at = 0")
        .execute(&db)
        .await
        .unwrap();
    let file = path.to_str().unwrap();
    let started = Instant::now();
    let (code, out, err) = run(&[
        "purge", "--sqlite", file, "--batch", "2", "--pause", "400ms", "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let purged: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(purged, json!({ "purged": 5, "steps": 0, "tombstones": 0 }));
    // Two full batches of 2, each followed by the pause, then the last 1.
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(800), "{took:?}");

    let (code, _, err) = run(&["purge", "--sqlite", file, "--pause", "soon"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--pause"), "{err}");
}
