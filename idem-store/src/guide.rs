//! The guides whose examples need a SQL store and sqlx, kept here so the
//! facade builds no sqlx for its own examples: re-exported by idemkit as
//! `idem::guide::sql` and `idem::guide::queues`. Docs only, no code.

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod queues;
#[cfg(all(feature = "sqlite", feature = "postgres"))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "sqlite", feature = "postgres"))))]
pub mod sql;
