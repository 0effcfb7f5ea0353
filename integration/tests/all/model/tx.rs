//! The transactional mode in the model: a call inside a database
//! transaction of its own (`in_transaction`), committed or rolled back
//! after it; the body's effect is a write in that transaction, so a
//! rollback undoes it with the record.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use idem::{Call, MySqlStore, PostgresStore};

use super::ops::Payload;
use super::reference::Seen;
use super::sut::{Fail, Ledger, classify};

/// A SQL store and a pool on its server, for transactions of the model's.
pub(crate) enum SqlTx {
    Pg(PostgresStore, sqlx::PgPool),
    My(MySqlStore, sqlx::MySqlPool),
}

impl SqlTx {
    /// Runs `call` of `p` in a transaction whose body has its effect, then
    /// commits or rolls back; a rolled-back effect leaves the ledger.
    pub(crate) async fn run(
        &self,
        call: Call,
        p: Payload,
        ledger: &Arc<Mutex<Ledger>>,
        commit: bool,
    ) -> Seen {
        let entered = AtomicBool::new(false);
        // The body: its effect is the transaction's write.
        macro_rules! in_tx {
            ($store:expr, $pool:expr) => {{
                let mut tx = $pool.begin().await.expect("begin");
                let body = async |_: &mut _| -> Result<String, Fail> {
                    entered.store(true, Ordering::SeqCst);
                    Ok(ledger.lock().unwrap().effect(p))
                };
                let out = $store.in_transaction(&mut tx, call).run(body).await;
                end(tx, commit).await;
                out
            }};
        }
        let out = match self {
            SqlTx::Pg(store, pool) => in_tx!(store, pool),
            SqlTx::My(store, pool) => in_tx!(store, pool),
        };
        classify(out, entered.load(Ordering::SeqCst), false)
    }
}

async fn end<D: sqlx::Database>(tx: sqlx::Transaction<'_, D>, commit: bool) {
    if commit {
        tx.commit().await.expect("commit");
    } else {
        tx.rollback().await.expect("rollback");
    }
}
