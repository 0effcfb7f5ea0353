//! What the SQL stores' `check_schema` says when a database is not set up
//! at this release's schema version: the same words for PostgreSQL and
//! MySQL, the store's names filled in.

use idem_contract::StoreError;

/// Where a SQL store's records are expected, for `check_schema`'s errors.
pub(crate) struct Expected<'a> {
    /// The backend's name in a `StoreError`.
    pub backend: &'static str,
    /// The quoted records table.
    pub table: &'a str,
    /// The store's type, e.g. `PostgresStore`.
    pub store: &'a str,
    /// Which settings choose the table, e.g. `--schema and --table`.
    pub settings: &'a str,
    /// This release's schema version.
    pub current: i64,
}

impl Expected<'_> {
    /// The error for a database without the table (or its versions).
    pub(crate) fn missing(&self) -> StoreError {
        StoreError::new(
            self.backend,
            format!(
                "no idem table {} here (nothing was changed): check {}, or run `{}::migrate()` \
                 from the application first",
                self.table, self.settings, self.store
            ),
        )
    }

    /// `Ok` at this release's version, else the error saying which.
    pub(crate) fn version(&self, version: i64) -> Result<(), StoreError> {
        let current = self.current;
        if version == current {
            return Ok(());
        }
        let fix = if version < current {
            format!("`{}::migrate()` upgrades it", self.store)
        } else {
            "use the release that wrote it".to_owned()
        };
        Err(StoreError::new(
            self.backend,
            format!(
                "the table {} is at schema version {version}, this release reads {current} \
                 (nothing was changed; {fix})",
                self.table
            ),
        ))
    }
}

/// The refusal of `migrate()` for a table at a version this release does
/// not know (`done` above `current`): made by a later release, or by a
/// build before 0.1; the table and its `versions` table are left as they
/// are.
pub(crate) fn unknown_version(table: &str, versions: &str, done: i64, current: i64) -> sqlx::Error {
    sqlx::Error::Configuration(
        format!(
            "the table {table} is at schema version {done}, which this release of idem does not know (it reads {current}): \
             it was made by a later release, or by a build before 0.1; use that release, or drop the table and {versions} and migrate again"
        )
        .into(),
    )
}
