//! Records in DynamoDB ([`DynamoDbStore`]): one conditional write per
//! claim, fenced writes by the claim's token, expiry by the callers'
//! clocks.
//!
//! One item per record, under partition key `prefix` + the hashed key in
//! hex and sort key `record`; a call's saved steps are items beside it,
//! under sort keys `step#…`. DynamoDB's TTL sweep deletes expired items
//! late (within days), so no step counts on it: every condition and every
//! read compares the item's expiry with the caller's clock.

mod admin;
mod claim;
mod complete;
mod expr;
mod item;
mod steps;
mod table;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;
use idem_contract::key::RecordKey;
use idem_contract::store::{Claim, ClaimOutcome, Fence, Retention, StepId, Token, async_trait};
use idem_contract::{Store, StoreError};

const BACKEND: &str = "dynamodb";

/// The largest record [`DynamoDbStore`] stores: DynamoDB's item limit
/// (400 KB, which implementations count differently: 400,000 to 409,600
/// bytes) less a kilobyte for the item's other attributes. A larger record is
/// refused at completion with a [`StoreError`] of kind
/// [`Unsupported`](idem_contract::StoreErrorKind::Unsupported), and the
/// claim is left to lapse (the next call takes it over). To have the
/// runtime settle such a result as not stored instead (duplicates get
/// `Error::Codec(NotStored)`), give the handle this limit:
///
/// ```no_run
/// # async fn f(client: aws_sdk_dynamodb::Client) {
/// use idem::dynamodb::{DynamoDbStore, MAX_RECORD_BYTES};
/// let store = DynamoDbStore::new(client, "idem");
/// let idem = idem::Idempotency::builder(store).max_record_bytes(MAX_RECORD_BYTES).build();
/// # }
/// ```
pub const MAX_RECORD_BYTES: usize = 399_000;

/// Records in a DynamoDB table, shared by every replica of a service and
/// every Lambda instance.
///
/// A claim is one conditional `UpdateItem` that wins a free or expired
/// key and otherwise returns the item it found
/// (`ReturnValuesOnConditionCheckFailure = ALL_OLD`): a replay, an
/// in-progress answer and a payload mismatch each cost that one request.
/// Completion, renewal and release are one `UpdateItem` each, fenced by a
/// condition on the claim's token; saving a step is one
/// `TransactWriteItems` (the fence and the step's item). The claim's one
/// condition also takes over a lapsed claim of the same payload
/// (`took_over`) and, for a rerun (`mismatch = "rerun"`), replaces a
/// record of another payload; a call that resumes saved steps costs one
/// `Query` more. In capacity units: 2 WCU for a fresh call whose item stays
/// under 1 KB (the claim and the completion), 1 WCU for a replay, a
/// mismatch or a call in progress (a failed condition consumes write units
/// by the size of the item it found, and returning that item no read
/// units); a larger record, more (BENCHMARKS.md, "DynamoDB").
///
/// # Clocks
///
/// A DynamoDB condition cannot read a server clock, so leases and TTLs are
/// judged by the clocks of the hosts that call (keep them synchronised:
/// NTP, or the Amazon Time Sync Service). The skew allowance
/// ([`with_clock_skew`](Self::with_clock_skew), 50 ms by default) is taken
/// off the holder's side: a holder's completion, renewal or step counts
/// only while its lease has more than the allowance left by its own clock,
/// so while clocks differ by less than the allowance, a holder's last
/// fenced write always precedes another caller's takeover. Expiry is
/// checked in every condition and read: DynamoDB's TTL sweep (the
/// attribute `ttl`, enabled by [`create_table`](Self::create_table))
/// only reclaims space.
///
/// ```no_run
/// # async fn f() -> Result<(), idem::StoreError> {
/// use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
///
/// // In a service, build the client from `aws_config::load_from_env()`;
/// // here, for a local emulator, by hand.
/// let config = aws_sdk_dynamodb::Config::builder()
///     .behavior_version(BehaviorVersion::latest())
///     .region(Region::new("us-east-1"))
///     .credentials_provider(Credentials::new("test", "test", None, None, "static"))
///     .endpoint_url("http://127.0.0.1:8000")
///     .build();
/// let store = idem::DynamoDbStore::new(aws_sdk_dynamodb::Client::from_conf(config), "idem");
/// store.create_table().await?; // once, or with your infrastructure code
/// let idem = idem::Idempotency::new(store);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct DynamoDbStore {
    client: Client,
    table: Arc<str>,
    prefix: Arc<str>,
    partition_key: Arc<str>,
    sort_key: Arc<str>,
    ttl_attribute: Arc<str>,
    skew: Duration,
}

/// Its settings; not its client.
impl std::fmt::Debug for DynamoDbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoDbStore")
            .field("table", &self.table)
            .field("prefix", &self.prefix)
            .field("partition_key", &self.partition_key)
            .field("sort_key", &self.sort_key)
            .field("ttl_attribute", &self.ttl_attribute)
            .field("skew", &self.skew)
            .finish_non_exhaustive()
    }
}

impl DynamoDbStore {
    /// A store in `table` through `client`, with partition key `pk`, sort
    /// key `sk` (both strings), TTL attribute `ttl`, key prefix `idem#`
    /// and a clock skew allowance of 50 ms. Sends nothing: create the
    /// table with [`create_table`](Self::create_table) or your own
    /// infrastructure code.
    ///
    /// ```no_run
    /// # async fn f(client: aws_sdk_dynamodb::Client) {
    /// let store = idem::DynamoDbStore::new(client, "idem");
    /// # }
    /// ```
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into().into(),
            prefix: "idem#".into(),
            partition_key: "pk".into(),
            sort_key: "sk".into(),
            ttl_attribute: "ttl".into(),
            skew: Duration::from_millis(50),
        }
    }

    /// The same store, its records' partition keys starting with `prefix`
    /// instead of `idem#`: for a table shared with other items, or
    /// several services in one table.
    ///
    /// ```no_run
    /// # async fn f(client: aws_sdk_dynamodb::Client) {
    /// let store = idem::DynamoDbStore::new(client, "app").with_prefix("billing/idem#");
    /// # }
    /// ```
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into().into();
        self
    }

    /// The same store on a table whose key attributes have other names
    /// (both of type string), as a shared table's may.
    ///
    /// ```no_run
    /// # async fn f(client: aws_sdk_dynamodb::Client) {
    /// let store = idem::DynamoDbStore::new(client, "app").with_key_attributes("PK", "SK");
    /// # }
    /// ```
    pub fn with_key_attributes(
        mut self,
        partition_key: impl Into<String>,
        sort_key: impl Into<String>,
    ) -> Self {
        self.partition_key = partition_key.into().into();
        self.sort_key = sort_key.into().into();
        self
    }

    /// The same store writing the expiry DynamoDB's TTL sweep reads (epoch
    /// seconds) to `name` instead of `ttl`: the table's TTL attribute.
    ///
    /// ```no_run
    /// # async fn f(client: aws_sdk_dynamodb::Client) {
    /// let store = idem::DynamoDbStore::new(client, "app").with_ttl_attribute("expires_at");
    /// # }
    /// ```
    pub fn with_ttl_attribute(mut self, name: impl Into<String>) -> Self {
        self.ttl_attribute = name.into().into();
        self
    }

    /// The same store with another clock skew allowance (see "Clocks"
    /// above): the most the clocks of the hosts sharing the table may
    /// differ by. Larger is safer and ends a claim's usable lease that
    /// much earlier.
    ///
    /// ```no_run
    /// # async fn f(client: aws_sdk_dynamodb::Client) {
    /// use std::time::Duration;
    /// let store = idem::DynamoDbStore::new(client, "idem").with_clock_skew(Duration::from_millis(200));
    /// # }
    /// ```
    pub fn with_clock_skew(mut self, skew: Duration) -> Self {
        self.skew = skew;
        self
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The partition key value of `key`'s record and steps: the prefix,
    /// then the 32 bytes of the hashed scope and key in hex (never the
    /// raw key). For reading a record by hand.
    ///
    /// ```no_run
    /// # async fn f(client: aws_sdk_dynamodb::Client) {
    /// use idem::key::RecordKey;
    /// let store = idem::DynamoDbStore::new(client, "idem");
    /// let pk = store.partition_key(&RecordKey::new("payments", "order-1"));
    /// assert_eq!(pk.len(), "idem#".len() + 64);
    /// # }
    /// ```
    pub fn partition_key(&self, key: &RecordKey) -> String {
        format!("{}{}", self.prefix, key.to_hex())
    }

    fn pk(&self, key: &RecordKey) -> AttributeValue {
        AttributeValue::S(self.partition_key(key))
    }

    /// The key of `key`'s record item.
    fn record_key(&self, key: &RecordKey) -> [(String, AttributeValue); 2] {
        [
            (self.partition_key.to_string(), self.pk(key)),
            (self.sort_key.to_string(), item::s(item::RECORD_SORT)),
        ]
    }
}

/// The caller's clock, in milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A request's failure as a [`StoreError`]: a missing table or a refused
/// request is the operator's to fix, the rest may pass.
fn err<E, R>(error: SdkError<E, R>) -> StoreError
where
    E: std::error::Error + ProvideErrorMetadata + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let code = error.code().unwrap_or_default().to_owned();
    // A service's answer by its code and message; a failure to reach it
    // with its whole chain of causes.
    let text = match error.message() {
        Some(message) if !code.is_empty() => format!("{code}: {message}"),
        _ => DisplayErrorContext(&error).to_string(),
    };
    match code.as_str() {
        "ResourceNotFoundException" => StoreError::misconfigured(
            BACKEND,
            format!("{text} (create the table: DynamoDbStore::create_table)"),
        ),
        "ValidationException" if text.contains("size") => oversized(text),
        "ValidationException" | "AccessDeniedException" | "UnrecognizedClientException" => {
            StoreError::misconfigured(BACKEND, text)
        }
        _ => StoreError::new(BACKEND, text),
    }
}

/// An item over DynamoDB's limit, refused.
fn oversized(why: impl std::fmt::Display) -> StoreError {
    StoreError::unsupported(
        BACKEND,
        format!(
            "{why}: DynamoDB keeps items of up to 400 KB; nothing was written, the claim lapses at its lease \
             (set `max_record_bytes(idem::dynamodb::MAX_RECORD_BYTES)` on the handle to settle such results as not stored)"
        ),
    )
}

#[async_trait]
impl Store for DynamoDbStore {
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        self.claim_key(key, claim).await
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        self.complete_fenced(key, token, record, kept, false).await
    }

    async fn complete_again(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        self.complete_fenced(key, token, record, kept, true).await
    }

    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        self.release_fenced(key, token).await
    }

    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        self.renew_fenced(key, token, lease).await
    }

    async fn save_step(
        &self,
        key: &RecordKey,
        token: Token,
        step: StepId,
        value: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        self.save_step_fenced(key, token, step, value, ttl).await
    }

    fn records_steps(&self) -> bool {
        true
    }

    /// A `DeleteItem` of the record, then a `Query` and deletes of its
    /// steps (a step saved in between fails its fence: the record is
    /// gone).
    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        self.forget_key(key).await
    }
}
