//! Which file a store opened, to notice the path being deleted or replaced
//! while the store is open.

use std::path::{Path, PathBuf};

use idem_contract::StoreError;

/// The opened file's path and identity (device and inode).
#[derive(Clone, Debug)]
pub(super) struct FileIdentity {
    path: PathBuf,
    id: (u64, u64),
}

impl FileIdentity {
    /// The identity of the file at `path`, or `None` where there is none
    /// to check (an in-memory database, a platform without inodes).
    pub(super) fn of(path: &Path) -> Result<Option<Self>, StoreError> {
        if path.as_os_str().is_empty() || path == Path::new(":memory:") {
            return Ok(None);
        }
        Ok(identity(path)?.map(|id| FileIdentity {
            path: path.to_owned(),
            id,
        }))
    }

    /// Fails when the path no longer names the opened file.
    pub(super) fn check(&self) -> Result<(), StoreError> {
        let now = identity(&self.path)?;
        if now == Some(self.id) {
            return Ok(());
        }
        let what = if now.is_none() {
            "deleted"
        } else {
            "replaced by another file"
        };
        Err(StoreError::misconfigured(
            "sqlite",
            format!(
                "the database file {} was {what} while the store had it open: other processes no longer see this store's records, so no call may claim through it; open the store again",
                self.path.display()
            ),
        ))
    }
}

#[cfg(unix)]
fn identity(path: &Path) -> Result<Option<(u64, u64)>, StoreError> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(meta) => Ok(Some((meta.dev(), meta.ino()))),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(StoreError::new("sqlite", err)),
    }
}

#[cfg(not(unix))]
fn identity(_: &Path) -> Result<Option<(u64, u64)>, StoreError> {
    Ok(None)
}
