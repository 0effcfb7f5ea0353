//! The claim: a read of the key's row, then, when it is free, expired or
//! a lapsed claim of the same payload, one `INSERT … ON CONFLICT` that
//! wins it only if the row is still so.

use std::time::Duration;

use bytes::Bytes;
use idem_contract::StoreError;
use idem_contract::key::RecordKey;
use idem_contract::store::{Claim, ClaimOutcome};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::{
    BACKEND, FORGET_STEPS, INSERT, REPLACE, SELECT, SqliteStore, err, fingerprint, millis,
    remaining, steps,
};

impl SqliteStore {
    /// `Store::claim`.
    pub(super) async fn claim_key(
        &self,
        key: &RecordKey,
        claim: &Claim,
    ) -> Result<ClaimOutcome, StoreError> {
        if let Some(file) = &self.file {
            file.check()?;
        }
        let (record_key, key) = (key, &key.as_bytes()[..]);
        let token = claim.token.to_bytes();
        // Few turns: the row changes between the read and the write only
        // when another caller claims, completes or releases it meanwhile.
        for _ in 0..16 {
            let row: Option<SqliteRow> = self.send(sqlx::query(SELECT).bind(key)).await?;
            let mut took_over = false;
            if let Some(row) = row {
                let left: i64 = row.try_get(3).map_err(err)?;
                let record: Option<Vec<u8>> = row.try_get(2).map_err(err)?;
                let tombstone_left: i64 = row.try_get(4).map_err(err)?;
                if claim.rerun && record.is_some() {
                    let fp = fingerprint(row.try_get(1).map_err(err)?)?;
                    if !claim.fingerprint.matches(&fp) {
                        match self.replace(key, claim).await? {
                            true => return Ok(ClaimOutcome::won(false, Vec::new())),
                            false => continue,
                        }
                    }
                }
                if left <= 0 && tombstone_left > 0 && record.is_some() {
                    let fp = fingerprint(row.try_get(1).map_err(err)?)?;
                    return Ok(ClaimOutcome::expired(fp, remaining(-left)));
                }
                if left > 0 {
                    let held_by: Vec<u8> = row.try_get(0).map_err(err)?;
                    let fp = fingerprint(row.try_get(1).map_err(err)?)?;
                    return Ok(match record {
                        None if held_by == token => {
                            ClaimOutcome::won(false, steps::load(self, record_key).await?)
                        }
                        None => ClaimOutcome::in_progress(fp, remaining(left)),
                        Some(record) => {
                            ClaimOutcome::completed(fp, Bytes::from(record), remaining(left))
                        }
                    });
                }
                if record.is_none() {
                    let fp = fingerprint(row.try_get(1).map_err(err)?)?;
                    if !claim.fingerprint.matches(&fp) {
                        return Ok(ClaimOutcome::in_progress(fp, Duration::ZERO));
                    }
                    took_over = true;
                }
            }
            let won: Option<SqliteRow> = self
                .send(
                    sqlx::query(INSERT)
                        .bind(key)
                        .bind(&token[..])
                        .bind(&claim.fingerprint.as_bytes()[..])
                        .bind(millis(claim.lease))
                        .bind(claim.site),
                )
                .await?;
            if let Some(won) = won {
                // Only a call that has saved steps pays a second statement.
                let any: bool = won.try_get(0).map_err(err)?;
                let steps = match any {
                    true => steps::load(self, record_key).await?,
                    false => Vec::new(),
                };
                return Ok(ClaimOutcome::won(took_over, steps));
            }
        }
        Err(StoreError::new(
            BACKEND,
            "the claim did not settle: the key changed hands 16 times in a row",
        ))
    }

    /// Replaces the completed record (or tombstone) of another payload
    /// under `key` with `claim`, and drops the replaced call's steps, in
    /// one transaction; `false` when the row changed meanwhile.
    async fn replace(&self, key: &[u8], claim: &Claim) -> Result<bool, StoreError> {
        self.in_transaction(async |conn| {
            let replaced = sqlx::query(REPLACE)
                .bind(key)
                .bind(&claim.token.to_bytes()[..])
                .bind(&claim.fingerprint.as_bytes()[..])
                .bind(millis(claim.lease))
                .bind(claim.site)
                .fetch_optional(&mut *conn)
                .await?
                .is_some();
            if replaced {
                sqlx::query(FORGET_STEPS)
                    .bind(key)
                    .execute(&mut *conn)
                    .await?;
            }
            Ok(replaced)
        })
        .await
    }
}
