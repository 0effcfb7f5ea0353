//! A Redis primary found through Sentinel, followed across failovers: the
//! store talks to the primary the sentinels name, and after a failed step
//! asks them again, so the next step goes to the new primary.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::Sentinel;

/// Asks the sentinels at most this often.
const REFRESH_EVERY: Duration = Duration::from_millis(200);

pub(super) struct Followed {
    sentinel: tokio::sync::Mutex<Sentinel>,
    service: String,
    config: ConnectionManagerConfig,
    current: Mutex<Current>,
}

struct Current {
    address: String,
    manager: ConnectionManager,
    asked: Instant,
}

impl Followed {
    pub(super) async fn connect(
        sentinels: Vec<String>,
        service: &str,
        config: ConnectionManagerConfig,
    ) -> redis::RedisResult<Self> {
        let mut sentinel = Sentinel::build(sentinels)?;
        let (address, manager) = primary(&mut sentinel, service, &config).await?;
        Ok(Followed {
            sentinel: tokio::sync::Mutex::new(sentinel),
            service: service.to_owned(),
            config,
            current: Mutex::new(Current {
                address,
                manager,
                asked: Instant::now(),
            }),
        })
    }

    /// Sends `step` to the primary as last known; after a failure, asks
    /// the sentinels again for the next step.
    pub(super) async fn send<T, E>(
        &self,
        step: impl AsyncFnOnce(ConnectionManager) -> Result<T, E>,
    ) -> Result<T, E> {
        let manager = self.lock().manager.clone();
        let answer = step(manager).await;
        if answer.is_err() {
            self.after_failure().await;
        }
        answer
    }

    /// After a failed step: asks the sentinels which server is the primary
    /// now and, if it changed, connects to it.
    async fn after_failure(&self) {
        if self.lock().asked.elapsed() < REFRESH_EVERY {
            return;
        }
        let mut sentinel = self.sentinel.lock().await;
        self.lock().asked = Instant::now();
        match primary(&mut sentinel, &self.service, &self.config).await {
            Ok((address, manager)) => {
                let mut current = self.lock();
                if current.address != address {
                    tracing::warn!(from = %current.address, to = %address, "idem: Redis primary changed; following the failover");
                    current.address = address;
                    current.manager = manager;
                }
            }
            Err(err) => tracing::warn!(error = %err, "idem: no primary from the sentinels yet"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn primary(
    sentinel: &mut Sentinel,
    service: &str,
    config: &ConnectionManagerConfig,
) -> redis::RedisResult<(String, ConnectionManager)> {
    let client = sentinel.async_master_for(service, None).await?;
    let address = client.get_connection_info().addr().to_string();
    let manager = ConnectionManager::new_with_config(client, config.clone()).await?;
    Ok((address, manager))
}
