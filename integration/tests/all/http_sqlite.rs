//! The HTTP layer over SqliteStore: two server instances on two ports,
//! each with its own handle on one database file, share their records.

use crate::support;

use idem::{Idempotency, SqliteStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_sqlite_file_replay_each_others_answers() {
    let path = std::env::temp_dir().join(format!("idem-http-{}.db", support::http::unique()));
    let first = SqliteStore::open(&path).await.unwrap();
    let second = SqliteStore::open(&path).await.unwrap();
    support::http::two_instances_share_records(Idempotency::new(first), Idempotency::new(second))
        .await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
