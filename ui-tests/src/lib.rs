//! Holds no code: its tests (`tests/ui.rs`) are the trybuild snapshots of
//! `#[idempotent]`'s compile-time checks, kept in a crate of their own so
//! each fixture builds against the facade and serde only.
