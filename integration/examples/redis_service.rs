//! A service whose replicas share one Redis: an order service with an
//! `#[idempotent]` method whose store is a field of the service.
//!
//! Run against the loopback Redis (or set `REDIS_URL`):
//! `cargo run -p idem-integration --example redis_service`
//! Run it twice: the second run replays what the first stored.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use idem::{Idempotency, RedisStore, idempotent};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    order_no: u32,
    sku: String,
    quantity: u32,
}

struct OrderService {
    idem: Idempotency,
    next_order_no: AtomicU32,
}

impl OrderService {
    #[idempotent(store = self.idem, key = request_id, scope = ("orders", customer), ttl = "1h", wait = "5s")]
    async fn create_order(
        &self,
        request_id: &str,
        customer: &str,
        sku: &str,
        quantity: u32,
    ) -> Result<Order, idem::Error> {
        let order_no = self.next_order_no.fetch_add(1, Ordering::SeqCst);
        Ok(Order {
            order_no,
            sku: sku.to_owned(),
            quantity,
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), idem::Error> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let store = RedisStore::builder()
        .prefix("idem-example:")
        .connect(&url)
        .await?;
    let service = Arc::new(OrderService {
        idem: Idempotency::new(store),
        next_order_no: AtomicU32::new(std::process::id()),
    });

    let first = service.create_order("req-1", "alice", "book", 2).await?;
    println!("create_order(req-1):        {first:?}");
    let again = service.create_order("req-1", "alice", "book", 2).await?;
    println!("create_order(req-1) again:  {again:?} (replayed from Redis)");
    assert_eq!(first, again);

    let burst: Vec<_> = (0..10)
        .map(|_| {
            let service = service.clone();
            tokio::spawn(async move { service.create_order("req-2", "alice", "pen", 1).await })
        })
        .collect();
    let mut numbers = std::collections::BTreeSet::new();
    for task in burst {
        numbers.insert(task.await.expect("task panicked")?.order_no);
    }
    println!(
        "10 concurrent req-2:        {} order number(s): {numbers:?}",
        numbers.len()
    );

    match service.create_order("req-1", "alice", "lamp", 9).await {
        Err(err) => println!("req-1 with another payload: {err}"),
        Ok(order) => println!("req-1 with another payload: unexpectedly ran: {order:?}"),
    }
    Ok(())
}
