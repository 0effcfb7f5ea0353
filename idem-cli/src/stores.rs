//! Opening the one store the command line names.

use idem::admin::Admin;
use idem::{PostgresStore, RedisStore, SqliteStore};

use crate::Failure;
use crate::args::{StoreArgs, StoreOptions};

/// The store and how to name it in messages, or why it cannot be opened.
pub(crate) async fn open(
    args: &StoreArgs,
    options: &StoreOptions,
) -> Result<(Box<dyn Admin>, String), Failure> {
    if let Some(url) = &args.redis {
        let name = format!("Redis at {url}");
        let store = RedisStore::builder()
            .prefix(&options.prefix)
            // Reading and deleting records is safe whatever the policy.
            .allow_eviction()
            .connect(url)
            .await
            .map_err(|err| Failure::store(&name, err))?;
        return Ok((Box::new(store), name));
    }
    if let Some(url) = &args.postgres {
        let name = format!("PostgreSQL at {url}");
        // Connects lazily: an unreachable server is reported by the first
        // statement. The CLI changes no schema: run the application (or
        // `PostgresStore::migrate`) first.
        let store = PostgresStore::builder()
            .schema(options.schema.clone())
            .table(options.table.clone())
            .max_connections(1)
            .connect(url)
            .await
            .map_err(|err| Failure::store(&name, err))?;
        return Ok((Box::new(store), name));
    }
    let path = args.sqlite.as_ref().expect("clap requires one store");
    let name = format!("SQLite file {}", path.display());
    // Opening creates a missing file: an operator's typo must not.
    if !path.is_file() {
        return Err(Failure::store(&name, "no such file"));
    }
    let store = SqliteStore::open(path)
        .await
        .map_err(|err| Failure::store(&name, err))?;
    Ok((Box::new(store), name))
}
