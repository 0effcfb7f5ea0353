//! Opening the one store the command line names, without changing it:
//! no table is created or upgraded, no file created, SQLite opened
//! read-only where the command only reads.

use idem::admin::Admin;

use crate::Failure;
use crate::args::{StoreArgs, StoreOptions};
#[cfg(any(feature = "redis", feature = "postgres", feature = "mysql"))]
use crate::secret::StoreUrl;

/// The opened store, how to name it in messages, and how to keep its
/// password out of them.
pub(crate) struct Opened {
    pub store: Box<dyn Admin>,
    pub name: String,
    pub scrub: Box<dyn Fn(&str) -> String>,
}

impl Opened {
    /// A failure of this store, its message scrubbed of the password.
    pub(crate) fn failed(&self, err: impl std::fmt::Display) -> Failure {
        Failure::store(&(self.scrub)(&format!("{}: {err}", self.name)))
    }
}

/// The store the arguments name, or why it cannot be opened (exit 3), or
/// that none was named (exit 2).
pub(crate) async fn open(
    args: &StoreArgs,
    options: &StoreOptions,
    read_only: bool,
) -> Result<Opened, Failure> {
    #[cfg(feature = "redis")]
    if let Some(url) = &args.redis {
        return redis(StoreUrl::new(url), options).await;
    }
    #[cfg(feature = "postgres")]
    if let Some(url) = &args.postgres {
        return postgres(StoreUrl::new(url), options).await;
    }
    #[cfg(feature = "mysql")]
    if let Some(url) = &args.mysql {
        return mysql(StoreUrl::new(url), options).await;
    }
    #[cfg(feature = "dynamodb")]
    if let Some(table) = &args.dynamodb {
        return dynamodb(table, options);
    }
    #[cfg(feature = "sqlite")]
    if let Some(path) = &args.sqlite {
        return sqlite(path, read_only).await;
    }
    let _ = (args, options, read_only);
    Err(Failure::usage(format!(
        "name the store: {} (before or after the command)",
        STORE_FLAGS.join(", ")
    )))
}

/// The store flags this build has.
const STORE_FLAGS: &[&str] = &[
    #[cfg(feature = "redis")]
    "--redis URL (or IDEM_REDIS_URL)",
    #[cfg(feature = "postgres")]
    "--postgres URL (or IDEM_POSTGRES_URL)",
    #[cfg(feature = "mysql")]
    "--mysql URL (or IDEM_MYSQL_URL)",
    #[cfg(feature = "dynamodb")]
    "--dynamodb TABLE (or IDEM_DYNAMODB_TABLE)",
    #[cfg(feature = "sqlite")]
    "--sqlite FILE",
];

/// A DynamoDB table, through a client configured from the standard AWS
/// environment variables. Nothing is sent yet: a missing table or bad
/// credentials fail the command's first request (exit 3).
#[cfg(feature = "dynamodb")]
fn dynamodb(table: &str, options: &StoreOptions) -> Result<Opened, Failure> {
    use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let region = var("AWS_REGION")
        .or_else(|| var("AWS_DEFAULT_REGION"))
        .ok_or_else(|| Failure::usage("--dynamodb needs AWS_REGION (or AWS_DEFAULT_REGION)"))?;
    let (Some(id), Some(secret)) = (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) else {
        return Err(Failure::usage(
            "--dynamodb needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials)",
        ));
    };
    let credentials = Credentials::new(id, secret, var("AWS_SESSION_TOKEN"), None, "environment");
    let mut config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region.clone()))
        .credentials_provider(credentials);
    if let Some(url) = &options.endpoint_url {
        config = config.endpoint_url(url);
    }
    let client = aws_sdk_dynamodb::Client::from_conf(config.build());
    let store = idem::DynamoDbStore::new(client, table).with_prefix(&options.dynamodb_prefix);
    let at = options.endpoint_url.as_deref().unwrap_or(&region);
    Ok(Opened {
        store: Box::new(store),
        name: format!(
            "DynamoDB at {at}, table {table}, keys {}*",
            options.dynamodb_prefix
        ),
        scrub: Box::new(str::to_owned),
    })
}

#[cfg(feature = "redis")]
async fn redis(url: StoreUrl, options: &StoreOptions) -> Result<Opened, Failure> {
    let builder = idem::RedisStore::builder()
        .prefix(&options.prefix)
        // Reading and deleting records is safe whatever the policy.
        .allow_eviction();
    let place = format!("keys {}*", options.prefix);
    at_url("Redis", url, place, async |raw| builder.connect(raw).await).await
}

#[cfg(feature = "postgres")]
async fn postgres(url: StoreUrl, options: &StoreOptions) -> Result<Opened, Failure> {
    let builder = idem::PostgresStore::builder()
        .schema(options.schema.clone())
        .table(options.table.clone())
        .max_connections(1);
    let place = format!("table {}.{}", options.schema, options.table);
    at_url("PostgreSQL", url, place, async |raw| {
        let store = builder.connect(raw).await?;
        // Never `migrate`: a missing or older table is reported, not changed.
        store.check_schema().await.map(|()| store)
    })
    .await
}

#[cfg(feature = "mysql")]
async fn mysql(url: StoreUrl, options: &StoreOptions) -> Result<Opened, Failure> {
    let builder = idem::MySqlStore::builder()
        .table(options.table.clone())
        .max_connections(1);
    let place = format!("table {}", options.table);
    at_url("MySQL", url, place, async |raw| {
        let store = builder.connect(raw).await?;
        // As PostgreSQL's: checked, never migrated.
        store.check_schema().await.map(|()| store)
    })
    .await
}

/// The store `open` makes of `url`, named `server` with the `place` of its
/// records (the table, the keys) in messages that never show the URL's
/// password.
#[cfg(any(feature = "redis", feature = "postgres", feature = "mysql"))]
async fn at_url<S: Admin + 'static>(
    server: &str,
    url: StoreUrl,
    place: String,
    open: impl AsyncFnOnce(&str) -> Result<S, idem::StoreError>,
) -> Result<Opened, Failure> {
    let name = format!("{server} at {}, {place}", url.shown());
    let opened = open(url.raw()).await;
    let scrub: Box<dyn Fn(&str) -> String> = Box::new(move |text| url.scrub(text));
    match opened {
        Ok(store) => Ok(Opened {
            store: Box::new(store),
            name,
            scrub,
        }),
        Err(err) => Err(Failure::store(&scrub(&format!("{name}: {err}")))),
    }
}

#[cfg(feature = "sqlite")]
async fn sqlite(path: &std::path::Path, read_only: bool) -> Result<Opened, Failure> {
    use sqlx::sqlite::SqliteConnectOptions;

    let name = format!("SQLite file {}", path.display());
    // Opening would create a missing file: an operator's typo must not.
    if !path.is_file() {
        return Err(Failure::store(&format!("{name}: no such file")));
    }
    // No journal mode, no migration: the file stays as it is.
    let options = SqliteConnectOptions::new()
        .filename(path)
        .read_only(read_only)
        .busy_timeout(std::time::Duration::from_secs(10));
    let store = idem::SqliteStore::open_existing(options)
        .await
        .map_err(|err| Failure::store(&format!("{name}: {err}")))?;
    Ok(Opened {
        store: Box::new(store),
        name,
        scrub: Box::new(str::to_owned),
    })
}
