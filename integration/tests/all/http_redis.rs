//! The HTTP layer over RedisStore: two server instances on two ports
//! sharing one Redis (`IDEM_TEST_REDIS_URL`, default
//! `redis://127.0.0.1:6379`) replay each other's answers.

use crate::support;

use idem::{Idempotency, RedisStore};

fn redis_url() -> String {
    std::env::var("IDEM_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_redis_replay_each_others_answers() {
    let url = redis_url();
    let first = RedisStore::connect(&url)
        .await
        .expect("a Redis at IDEM_TEST_REDIS_URL");
    let second = RedisStore::connect(&url)
        .await
        .expect("a Redis at IDEM_TEST_REDIS_URL");
    support::http::two_instances_share_records(Idempotency::new(first), Idempotency::new(second))
        .await;
}
