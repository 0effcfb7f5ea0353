//! The statements of a `SqliteStore`, judged by SQLite's clock
//! (`now_ms!`).

/// [`LAPSED_CLAIM_KEPT`](idem_contract::store::LAPSED_CLAIM_KEPT) in
/// milliseconds, for the statements (a test checks the two agree).
macro_rules! lapsed_kept_ms {
    () => {
        "86400000"
    };
}

pub(super) const MIGRATE: &str = concat!(
    "CREATE TABLE IF NOT EXISTS idem_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);",
    "CREATE TABLE IF NOT EXISTS idem_records (",
    " key BLOB PRIMARY KEY, token BLOB NOT NULL, fingerprint BLOB NOT NULL,",
    " record BLOB, expires_at INTEGER NOT NULL, site TEXT NOT NULL, created_at INTEGER NOT NULL,",
    " tombstone_until INTEGER",
    ") WITHOUT ROWID;",
    "CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);",
    "CREATE INDEX IF NOT EXISTS idem_records_created_at ON idem_records (created_at);",
    "INSERT OR IGNORE INTO idem_migrations (version, applied_at) VALUES (1, ",
    now_ms!(),
    ");"
);

pub(super) const SELECT: &str = concat!(
    "SELECT token, fingerprint, record, expires_at - ",
    now_ms!(),
    ", coalesce(tombstone_until, 0) - ",
    now_ms!(),
    " FROM idem_records WHERE key = ?1"
);

pub(super) const INSERT: &str = concat!(
    "INSERT INTO idem_records (key, token, fingerprint, record, expires_at, site, created_at) VALUES (?1, ?2, ?3, NULL, ",
    now_ms!(),
    " + ?4, ?5, ",
    now_ms!(),
    ") ON CONFLICT (key) DO UPDATE SET token = excluded.token, fingerprint = excluded.fingerprint,",
    " record = NULL, expires_at = excluded.expires_at, site = excluded.site, created_at = excluded.created_at,",
    " tombstone_until = NULL WHERE idem_records.expires_at <= ",
    now_ms!(),
    " AND coalesce(idem_records.tombstone_until, 0) <= ",
    now_ms!(),
    // A lapsed claim is taken over only by a call of its payload (or one
    // that does not fingerprint): `Store::claim`.
    " AND (idem_records.record IS NOT NULL OR idem_records.fingerprint IN (?3, zeroblob(32))",
    " OR ?3 = zeroblob(32))",
    // Whether the call has saved steps: only then does a won claim read them.
    " RETURNING EXISTS (SELECT 1 FROM idem_steps WHERE call = ?1)"
);

/// A claim that reruns (`Claim::rerun`) replacing a completed record (or
/// its tombstone) of another payload; sent in one `BEGIN IMMEDIATE` with
/// `FORGET_STEPS`, so the replaced call's steps go with it.
pub(super) const REPLACE: &str = concat!(
    "UPDATE idem_records SET token = ?2, fingerprint = ?3, record = NULL, expires_at = ",
    now_ms!(),
    " + ?4, site = ?5, created_at = ",
    now_ms!(),
    ", tombstone_until = NULL WHERE key = ?1 AND record IS NOT NULL",
    " AND fingerprint NOT IN (?3, zeroblob(32)) AND ?3 <> zeroblob(32) RETURNING 1"
);

/// The fence of complete, release and renew: the row is our unexpired
/// claim.
macro_rules! held {
    () => {
        concat!(
            " WHERE key = ?1 AND token = ?2 AND record IS NULL AND expires_at > ",
            now_ms!()
        )
    };
}
pub(super) use held;

/// Whether anyone holds or completed the key (its record or its
/// tombstone stands), asked after a fenced operation found no claim of
/// ours: to tell a takeover from an expired claim.
pub(super) const LIVE: &str = concat!(
    "SELECT 1 FROM idem_records WHERE key = ?1 AND (expires_at > ",
    now_ms!(),
    " OR tombstone_until > ",
    now_ms!(),
    ")"
);

pub(super) const COMPLETE: &str = concat!(
    "UPDATE idem_records SET record = ?3, expires_at = ",
    now_ms!(),
    " + ?4, tombstone_until = ",
    now_ms!(),
    " + ?5",
    held!()
);
/// `COMPLETE` sent again: our own landed completion (our token, these
/// bytes) counts as held.
pub(super) const COMPLETE_AGAIN: &str = concat!(
    "UPDATE idem_records SET record = ?3, expires_at = ",
    now_ms!(),
    " + ?4, tombstone_until = ",
    now_ms!(),
    " + ?5 WHERE key = ?1 AND token = ?2 AND (record IS NULL AND expires_at > ",
    now_ms!(),
    " OR record = ?3)"
);
pub(super) const RELEASE: &str = concat!("DELETE FROM idem_records", held!());
pub(super) const FORGET: &str = "DELETE FROM idem_records WHERE key = ?1";
/// Sent before `FORGET`: a forgotten call must not resume from old steps.
pub(super) const FORGET_STEPS: &str = "DELETE FROM idem_steps WHERE call = ?1";
pub(super) const RENEW: &str = concat!(
    "UPDATE idem_records SET expires_at = ",
    now_ms!(),
    " + ?3",
    held!()
);
/// Keeps a lapsed claim a day past its lease: the evidence a takeover
/// and its reconcile need (`LAPSED_CLAIM_KEPT`).
pub(super) const PURGE: &str = concat!(
    "DELETE FROM idem_records WHERE key IN (SELECT key FROM idem_records WHERE expires_at <= ",
    now_ms!(),
    " AND (record IS NOT NULL OR expires_at <= ",
    now_ms!(),
    " - ",
    lapsed_kept_ms!(),
    ") AND coalesce(tombstone_until, 0) <= ",
    now_ms!(),
    " LIMIT ?1)"
);
/// Drops the value of records past their TTL whose tombstone stands: an
/// empty record, not NULL, which would read as a claim.
pub(super) const COMPACT: &str = concat!(
    "UPDATE idem_records SET record = X'' WHERE key IN (SELECT key FROM idem_records WHERE expires_at <= ",
    now_ms!(),
    " AND tombstone_until > ",
    now_ms!(),
    " AND length(record) > 0 LIMIT ?1)"
);

#[cfg(test)]
mod tests {
    #[test]
    fn a_lapsed_claim_is_kept_as_long_as_the_contract_says() {
        let kept: u128 = lapsed_kept_ms!().parse().expect("a number");
        assert_eq!(kept, idem_contract::store::LAPSED_CLAIM_KEPT.as_millis());
    }
}
