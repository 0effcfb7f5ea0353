//! The public `InTransaction` of a SQL store, written once: the type, its
//! `Debug` and its terminals, which run in `crate::sql::tx`. Each store
//! keeps its own `in_transaction` (in its `tx.rs`), whose docs say how
//! its database locks and isolates.

/// `InTransaction` (the struct, `Debug`, `run` and `run_reported`) for a
/// SQL store, where its `Sql` statements are in scope: `$store` is the
/// store's type, `$conn` its sqlx connection, `$db` the sqlx database's
/// path and `$path` `InTransaction`'s public path, both as the examples
/// write them.
macro_rules! in_transaction_type {
    ($store:ident, $conn:ty, $db:literal, $path:literal) => {
        /// A call that will run inside a database transaction. Made by
        #[doc = concat!("[`", stringify!($store), "::in_transaction`]; run by [`run`](InTransaction::run).")]
        ///
        /// ```no_run
        #[doc = concat!("# async fn f(store: idem::", stringify!($store), ", idem: idem::Idempotency, mut tx: sqlx::Transaction<'_, ", $db, ">) {")]
        #[doc = concat!("let call: ", $path, "<'_, _> =")]
        ///     store.in_transaction(&mut tx, idem.call("orders", "order-1"));
        /// let out: Result<u8, idem::Error> = call.run(async |_conn| Ok(1)).await;
        /// # }
        /// ```
        #[must_use = "a call does nothing until `.run(…)` is awaited"]
        pub struct InTransaction<'a, P, R = NoReconcile> {
            store: &'a $store,
            conn: &'a mut $conn,
            call: Call<P, R>,
        }

        /// The store and the call; not the connection.
        impl<P, R> std::fmt::Debug for InTransaction<'_, P, R> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct("InTransaction")
                    .field("store", self.store)
                    .field("call", &self.call)
                    .finish_non_exhaustive()
            }
        }

        impl<P, R> InTransaction<'_, P, R> {
            /// Runs `body` with the transaction's connection if this call wins the
            /// claim; otherwise replays the stored result or reports why not, as
            /// [`Call::run`] does.
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(store: idem::", stringify!($store), ", idem: idem::Idempotency, mut tx: sqlx::Transaction<'_, ", $db, ">) -> Result<(), idem::Error> {")]
            /// let n: u64 = store
            ///     .in_transaction(&mut tx, idem.call("audit", "event-9"))
            ///     .run(async |conn| {
            ///         sqlx::query("INSERT INTO audit (event) VALUES ('event-9')")
            ///             .execute(&mut *conn)
            ///             .await
            ///             .map(|done| done.rows_affected())
            ///             .map_err(|err| idem::Error::Store(idem::StoreError::new("audit", err)))
            ///     })
            ///     .await?;
            /// # Ok(()) }
            /// ```
            pub async fn run<T, E, F>(self, body: F) -> Result<T, E>
            where
                T: Serialize + DeserializeOwned,
                E: From<Error>,
                P: ErrorPolicy<E>,
                R: Reconcile<T, E>,
                F: AsyncFnOnce(&mut $conn) -> Result<T, E>,
            {
                self.run_reported(body).await.result
            }

            /// As [`run`](InTransaction::run), and also tells whether the result
            /// was replayed.
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(store: idem::", stringify!($store), ", idem: idem::Idempotency, mut tx: sqlx::Transaction<'_, ", $db, ">) {")]
            /// let out = store
            ///     .in_transaction(&mut tx, idem.call("audit", "event-9"))
            ///     .run_reported(async |_conn| Ok::<_, idem::Error>(1u8))
            ///     .await;
            /// println!("replayed: {}", out.replayed);
            /// # }
            /// ```
            pub async fn run_reported<T, E, F>(self, body: F) -> Reported<Result<T, E>>
            where
                T: Serialize + DeserializeOwned,
                E: From<Error>,
                P: ErrorPolicy<E>,
                R: Reconcile<T, E>,
                F: AsyncFnOnce(&mut $conn) -> Result<T, E>,
            {
                let sql = self.store.statements();
                crate::sql::tx::run_reported::<Sql, _, _, _, _, _>(sql, self.conn, self.call, body)
                    .await
            }
        }
    };
}

pub(crate) use in_transaction_type;
