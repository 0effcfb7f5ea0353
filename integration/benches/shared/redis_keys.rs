//! Leaving the shared Redis as a bench found it.

/// Unlinks every key under `prefix`: `SCAN` in steps (a `KEYS` over a
/// large database would outlast a response timeout), then `UNLINK`.
pub(crate) async fn unlink_prefixed(conn: &mut impl redis::aio::ConnectionLike, prefix: &str) {
    let mut cursor = 0u64;
    loop {
        let (next, found): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(10_000)
            .query_async(conn)
            .await
            .expect("SCAN the bench's keys");
        if !found.is_empty() {
            let _: usize = redis::cmd("UNLINK")
                .arg(&found)
                .query_async(conn)
                .await
                .expect("UNLINK the bench's keys");
        }
        if next == 0 {
            return;
        }
        cursor = next;
    }
}
