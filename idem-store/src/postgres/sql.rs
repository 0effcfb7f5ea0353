//! The SQL of `PostgresStore`, rendered once per table.
//!
//! Expiry is judged by the server: `statement_timestamp()` is the start of
//! the client's current statement, so it moves on inside a long
//! transaction (unlike `now()`, which stays at the transaction's start) and
//! is one fixed instant within one statement.

use idem_core::StoreError;

/// The migrations, in order. `{t}` is the quoted, schema-qualified table,
/// `{claim}` its claim function, `{index}` the bare name of its expiry
/// index. Each step runs once, inside the migration's transaction; never
/// edit a released step, add one.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: the records and the claim function.
    r#"
CREATE TABLE {t} (
    key         bytea PRIMARY KEY,
    token       bytea NOT NULL,
    fingerprint bytea NOT NULL,
    record      bytea,
    expires_at  timestamptz NOT NULL
);
COMMENT ON TABLE {t} IS 'idem: idempotency records. record IS NULL while a claim is in progress.';
CREATE INDEX {index} ON {t} (expires_at);
CREATE FUNCTION {claim}(p_key bytea, p_token bytea, p_fingerprint bytea, p_lease_us bigint)
RETURNS TABLE (o_outcome int, o_fingerprint bytea, o_record bytea, o_remaining_us bigint)
LANGUAGE plpgsql VOLATILE AS $idem$
DECLARE
    ts timestamptz := statement_timestamp();
    cur record;
    took_over boolean;
BEGIN
    -- Each statement below takes a fresh snapshot (READ COMMITTED), so a
    -- row committed by a racing claimer while we waited on its lock is
    -- seen on the next turn of the loop.
    FOR attempt IN 1..16 LOOP
        SELECT r.token, r.fingerprint, r.record, r.expires_at INTO cur
            FROM {t} AS r WHERE r.key = p_key;
        IF FOUND AND cur.expires_at > ts THEN
            IF cur.record IS NULL AND cur.token = p_token THEN
                -- Our own claim, sent again after a lost connection.
                RETURN QUERY SELECT 0, NULL::bytea, NULL::bytea, NULL::bigint;
            ELSE
                RETURN QUERY SELECT CASE WHEN cur.record IS NULL THEN 2 ELSE 3 END,
                    cur.fingerprint, cur.record,
                    floor(extract(epoch FROM cur.expires_at - ts) * 1000000)::bigint;
            END IF;
            RETURN;
        END IF;
        took_over := FOUND AND cur.record IS NULL;
        INSERT INTO {t} AS r (key, token, fingerprint, record, expires_at)
            VALUES (p_key, p_token, p_fingerprint, NULL, ts + p_lease_us * interval '1 microsecond')
            ON CONFLICT (key) DO UPDATE
                SET token = EXCLUDED.token, fingerprint = EXCLUDED.fingerprint,
                    record = NULL, expires_at = EXCLUDED.expires_at
                WHERE r.expires_at <= ts;
        IF FOUND THEN
            RETURN QUERY SELECT CASE WHEN took_over THEN 1 ELSE 0 END,
                NULL::bytea, NULL::bytea, NULL::bigint;
            RETURN;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'idem: the claim on % did not settle', encode(p_key, 'hex')
        USING ERRCODE = '40001';
END
$idem$;
"#,
    // 2: the steps of calls (recovery points).
    super::steps::MIGRATION,
    // 3: the call site's name and the claim's creation time, so records
    // can be listed (`idem list`) without the raw key; the claim function
    // gains the site as a fifth argument. The four-argument function
    // stays, so replicas still running the previous release keep working
    // during a rolling deploy (their claims list with no site or age).
    r#"
ALTER TABLE {t} ADD COLUMN site text, ADD COLUMN created_at timestamptz;
CREATE FUNCTION {claim}(p_key bytea, p_token bytea, p_fingerprint bytea, p_lease_us bigint, p_site text)
RETURNS TABLE (o_outcome int, o_fingerprint bytea, o_record bytea, o_remaining_us bigint)
LANGUAGE plpgsql VOLATILE AS $idem$
DECLARE
    ts timestamptz := statement_timestamp();
    cur record;
    took_over boolean;
BEGIN
    -- Each statement below takes a fresh snapshot (READ COMMITTED), so a
    -- row committed by a racing claimer while we waited on its lock is
    -- seen on the next turn of the loop.
    FOR attempt IN 1..16 LOOP
        SELECT r.token, r.fingerprint, r.record, r.expires_at INTO cur
            FROM {t} AS r WHERE r.key = p_key;
        IF FOUND AND cur.expires_at > ts THEN
            IF cur.record IS NULL AND cur.token = p_token THEN
                -- Our own claim, sent again after a lost connection.
                RETURN QUERY SELECT 0, NULL::bytea, NULL::bytea, NULL::bigint;
            ELSE
                RETURN QUERY SELECT CASE WHEN cur.record IS NULL THEN 2 ELSE 3 END,
                    cur.fingerprint, cur.record,
                    floor(extract(epoch FROM cur.expires_at - ts) * 1000000)::bigint;
            END IF;
            RETURN;
        END IF;
        took_over := FOUND AND cur.record IS NULL;
        INSERT INTO {t} AS r (key, token, fingerprint, record, expires_at, site, created_at)
            VALUES (p_key, p_token, p_fingerprint, NULL, ts + p_lease_us * interval '1 microsecond', p_site, ts)
            ON CONFLICT (key) DO UPDATE
                SET token = EXCLUDED.token, fingerprint = EXCLUDED.fingerprint,
                    record = NULL, expires_at = EXCLUDED.expires_at,
                    site = EXCLUDED.site, created_at = EXCLUDED.created_at
                WHERE r.expires_at <= ts;
        IF FOUND THEN
            RETURN QUERY SELECT CASE WHEN took_over THEN 1 ELSE 0 END,
                NULL::bytea, NULL::bytea, NULL::bigint;
            RETURN;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'idem: the claim on % did not settle', encode(p_key, 'hex')
        USING ERRCODE = '40001';
END
$idem$;
"#,
];

/// Claim outcomes as the claim function reports them.
pub(super) const WON: i32 = 0;
pub(super) const TOOK_OVER: i32 = 1;
pub(super) const IN_PROGRESS: i32 = 2;
pub(super) const COMPLETED: i32 = 3;

/// Where the records live and the statements that use them.
#[derive(Debug)]
pub(super) struct Sql {
    /// `"schema"."table"`.
    pub table: String,
    /// The bare schema and table names, for messages and locks.
    pub schema_name: String,
    pub table_name: String,
    pub versions: String,
    pub claim: String,
    pub complete: String,
    pub complete_again: String,
    pub release: String,
    pub renew: String,
    /// Complete and release in transactional mode: the row is locked by
    /// the caller's transaction, so the token alone fences (the lease
    /// cannot run out from under it).
    pub complete_locked: String,
    pub release_locked: String,
    pub purge: String,
    /// Whether anyone holds or completed a key: asked only after a fenced
    /// step found no claim of ours, to tell a takeover from an expiry.
    pub live: String,
    pub steps: super::steps::StepsSql,
    /// Deletes the record under a key, whoever holds it.
    pub forget: String,
}

/// The fence shared by complete, release and renew: the row is our
/// unexpired claim.
const HELD: &str =
    "key = $1 AND token = $2 AND record IS NULL AND expires_at > statement_timestamp()";

impl Sql {
    pub(super) fn new(schema: &str, table: &str) -> Result<Self, StoreError> {
        check_identifier("schema", schema, 63)?;
        // Room for the suffixes of the function, index and version table.
        check_identifier("table", table, 63 - "_migrations".len())?;
        let t = format!("\"{schema}\".\"{table}\"");
        Ok(Sql {
            versions: format!("\"{schema}\".\"{table}_migrations\""),
            // A plain read first, so a replayed duplicate (or one in
            // progress elsewhere) costs an index lookup rather than a
            // PL/pgSQL call: it returns what the function's first read
            // would, and `LIMIT 1` stops the `Append` before the function
            // runs. Only when it finds nothing does the function claim.
            claim: format!(
                "SELECT CASE WHEN r.record IS NULL THEN {IN_PROGRESS} ELSE {COMPLETED} END, r.fingerprint, r.record, \
                 floor(extract(epoch FROM r.expires_at - statement_timestamp()) * 1000000)::bigint, NULL::bytea[] \
                 FROM {t} AS r WHERE r.key = $1 AND r.expires_at > statement_timestamp() \
                 AND (r.record IS NOT NULL OR r.token <> $2) \
                 UNION ALL \
                 SELECT o_outcome, o_fingerprint, o_record, o_remaining_us, \
                 CASE WHEN o_outcome IN ({WON}, {TOOK_OVER}) THEN \"{schema}\".\"{table}_steps_of\"($1) END \
                 FROM \"{schema}\".\"{table}_claim\"($1, $2, $3, $4, $5) \
                 LIMIT 1"
            ),
            complete: format!(
                "UPDATE {t} SET record = $3, expires_at = statement_timestamp() + $4 * interval '1 microsecond' WHERE {HELD}"
            ),
            // Sent again after a lost connection: the first one may have
            // landed, and then the row holds our token and these bytes.
            complete_again: format!(
                "UPDATE {t} SET record = $3, expires_at = statement_timestamp() + $4 * interval '1 microsecond' \
                 WHERE key = $1 AND token = $2 AND (record IS NULL AND expires_at > statement_timestamp() OR record = $3)"
            ),
            release: format!("DELETE FROM {t} WHERE {HELD}"),
            complete_locked: format!(
                "UPDATE {t} SET record = $3, expires_at = statement_timestamp() + $4 * interval '1 microsecond' \
                 WHERE key = $1 AND token = $2 AND record IS NULL"
            ),
            release_locked: format!(
                "DELETE FROM {t} WHERE key = $1 AND token = $2 AND record IS NULL"
            ),
            renew: format!(
                "UPDATE {t} SET expires_at = statement_timestamp() + $3 * interval '1 microsecond' WHERE {HELD}"
            ),
            live: format!(
                "SELECT EXISTS (SELECT 1 FROM {t} WHERE key = $1 AND expires_at > statement_timestamp())"
            ),
            purge: format!(
                "DELETE FROM {t} WHERE key IN (SELECT key FROM {t} WHERE expires_at <= statement_timestamp() \
                 ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED) AND expires_at <= statement_timestamp()"
            ),
            steps: super::steps::StepsSql::new(schema, table, &t, HELD),
            // The call's steps go with it: a forgotten call must not resume.
            forget: format!(
                "WITH s AS (DELETE FROM \"{schema}\".\"{table}_steps\" WHERE call = $1) DELETE FROM {t} WHERE key = $1"
            ),
            table: t,
            schema_name: schema.to_owned(),
            table_name: table.to_owned(),
        })
    }

    /// Migration step `step` with this table's names filled in.
    pub(super) fn migration(&self, step: &str) -> String {
        step.replace("{t}", &self.table)
            .replace(
                "{claim}",
                &format!("\"{}\".\"{}_claim\"", self.schema_name, self.table_name),
            )
            .replace("{index}", &format!("\"{}_expires_at\"", self.table_name))
            .replace("{steps_of}", &self.steps.function)
            .replace(
                "{steps_index}",
                &format!("\"{}_steps_exp\"", self.table_name),
            )
            .replace("{steps}", &self.steps.table)
    }
}

impl Sql {
    /// A failed statement as a store error; a missing table or claim
    /// function (SQLSTATE 42P01, 42883, 3F000) says to run the migration.
    pub(super) fn store_error(&self, err: sqlx::Error) -> StoreError {
        let code = err.as_database_error().and_then(|db| db.code());
        if matches!(code.as_deref(), Some("42P01" | "42883" | "3F000")) {
            return StoreError::new(
                "postgres",
                format!(
                    "{err}: the table {} is not set up; call `PostgresStore::migrate()` once at startup (it is idempotent and safe to run from every replica)",
                    self.table
                ),
            );
        }
        StoreError::new("postgres", err)
    }
}

/// Names are quoted into SQL, so only plain identifiers are accepted.
fn check_identifier(what: &str, name: &str, max: usize) -> Result<(), StoreError> {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain && name.len() <= max {
        Ok(())
    } else {
        Err(StoreError::new(
            "postgres",
            format!(
                "invalid {what} name {name:?}: use ASCII letters, digits and '_', not starting with a digit, at most {max} bytes"
            ),
        ))
    }
}

/// A duration as whole microseconds for the server, capped at 100 years.
pub(super) fn micros(duration: std::time::Duration) -> i64 {
    const CAP: u128 = 100 * 365 * 24 * 3600 * 1_000_000;
    duration.as_micros().min(CAP) as i64
}
