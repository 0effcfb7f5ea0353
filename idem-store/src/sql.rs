//! What the SQL stores (PostgreSQL, MySQL) share beyond their connections
//! (`crate::conns`): their steps, transactional mode (`InTransaction`)
//! and `TxHandle`,
//! written once over a `Dialect` (`dialect.rs`) each store implements for
//! its statements;
//! their builders' settings; sending a statement; reading the rows of
//! their admin queries; what `check_schema` says; which names they take.

use idem_contract::StoreError;

pub(crate) mod admin;
pub(crate) mod claimed;
pub(crate) mod dialect;
pub(crate) mod in_transaction;
pub(crate) mod request_tx;
pub(crate) mod schema;
pub(crate) mod send;
pub(crate) mod setters;
pub(crate) mod settings;
pub(crate) mod store;
pub(crate) mod tx;
pub(crate) mod tx_handle;

/// Names are quoted into SQL, so only plain identifiers are accepted:
/// `what` (e.g. `"table"`) `name`, of at most `max` bytes.
pub(crate) fn check_identifier(
    backend: &'static str,
    what: &str,
    name: &str,
    max: usize,
) -> Result<(), StoreError> {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain && name.len() <= max {
        Ok(())
    } else {
        Err(StoreError::misconfigured(
            backend,
            format!(
                "invalid {what} name {name:?}: use ASCII letters, digits and '_', not starting with a digit, at most {max} bytes"
            ),
        ))
    }
}
