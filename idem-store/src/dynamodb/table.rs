//! The table: created on demand with its TTL attribute enabled.

use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TableStatus,
    TimeToLiveSpecification, TimeToLiveStatus,
};
use idem_contract::StoreError;

use super::{BACKEND, DynamoDbStore, err};

/// How long `create_table` waits for a new table to become active.
const ACTIVE_WITHIN: Duration = Duration::from_secs(120);

impl DynamoDbStore {
    /// Creates the store's table if it does not exist (on-demand capacity,
    /// string partition and sort keys of the store's names), waits until
    /// it is active, and enables DynamoDB's TTL sweep on the store's TTL
    /// attribute if it is not yet. A table that exists is kept as it is,
    /// apart from the TTL setting. Needs `dynamodb:CreateTable`,
    /// `DescribeTable`, `DescribeTimeToLive` and `UpdateTimeToLive`; a
    /// service whose table is made by infrastructure code need not call
    /// it.
    ///
    /// ```no_run
    /// # async fn f(client: aws_sdk_dynamodb::Client) -> Result<(), idem::StoreError> {
    /// let store = idem::DynamoDbStore::new(client, "idem");
    /// store.create_table().await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_table(&self) -> Result<(), StoreError> {
        let attribute = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .map_err(|e| StoreError::new(BACKEND, e))
        };
        let key = |name: &str, kind| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(kind)
                .build()
                .map_err(|e| StoreError::new(BACKEND, e))
        };
        let created = self
            .client
            .create_table()
            .table_name(&*self.table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attribute(&self.partition_key)?)
            .attribute_definitions(attribute(&self.sort_key)?)
            .key_schema(key(&self.partition_key, KeyType::Hash)?)
            .key_schema(key(&self.sort_key, KeyType::Range)?)
            .send()
            .await;
        // A table that exists already is kept.
        if let Err(error) = created
            && !error
                .as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception())
        {
            return Err(err(error));
        }
        self.wait_active().await?;
        self.enable_ttl().await
    }

    async fn wait_active(&self) -> Result<(), StoreError> {
        let deadline = tokio::time::Instant::now() + ACTIVE_WITHIN;
        loop {
            let described = self
                .client
                .describe_table()
                .table_name(&*self.table)
                .send()
                .await
                .map_err(err)?;
            let status = described.table().and_then(|t| t.table_status());
            if matches!(status, Some(TableStatus::Active) | None) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(StoreError::new(
                    BACKEND,
                    format!("table {} not active after {ACTIVE_WITHIN:?}", self.table),
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn enable_ttl(&self) -> Result<(), StoreError> {
        let described = self
            .client
            .describe_time_to_live()
            .table_name(&*self.table)
            .send()
            .await
            .map_err(err)?;
        let ttl = described.time_to_live_description();
        let on = ttl.is_some_and(|t| {
            matches!(
                t.time_to_live_status(),
                Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
            )
        });
        if on {
            return Ok(());
        }
        let spec = TimeToLiveSpecification::builder()
            .enabled(true)
            .attribute_name(&*self.ttl_attribute)
            .build()
            .map_err(|e| StoreError::new(BACKEND, e))?;
        self.client
            .update_time_to_live()
            .table_name(&*self.table)
            .time_to_live_specification(spec)
            .send()
            .await
            .map_err(err)?;
        Ok(())
    }
}
