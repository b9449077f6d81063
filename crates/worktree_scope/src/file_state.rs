//! The stat cache: per file, the `lstat` facts seen when its content was last hashed.
//!
//! A file whose size, mtime, ctime, inode and mode all still match is not read again,
//! unless its timestamps fall within [`RACY_MARGIN`] of when that stat was taken: such a
//! file may have changed again within the same timestamp tick, invisibly to `stat` (git's
//! racy-git rule). A racy file is read again, and its entry re-verified with a later time.

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use cas::BlobId;

/// Files whose mtime or ctime is this close to the cache's time are re-read next time.
/// Generous against coarse file-system clocks (a jiffy is 1 to 10 ms).
pub const RACY_MARGIN: Duration = Duration::from_millis(50);

/// The `lstat` facts cairn compares, from std or from `fstatat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Bytes.
    pub size: u64,
    /// Modified (ns since the epoch).
    pub mtime_ns: i64,
    /// Changed (ns since the epoch).
    pub ctime_ns: i64,
    /// Inode.
    pub ino: u64,
    /// Device.
    pub dev: u64,
    /// Type and permission bits.
    pub mode: u32,
}

impl Stat {
    /// The stat std's `symlink_metadata` gave.
    pub fn from_std(meta: &std::fs::Metadata) -> Stat {
        Stat {
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
            mode: meta.mode(),
        }
    }

    /// The stat `fstatat` gave.
    pub fn from_rustix(st: &rustix::fs::Stat) -> Stat {
        Stat {
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime_ns: ns(st.st_mtime, st.st_mtime_nsec as i64),
            ctime_ns: ns(st.st_ctime, st.st_ctime_nsec as i64),
            ino: st.st_ino,
            dev: st.st_dev,
            mode: st.st_mode,
        }
    }

    /// This stat with `size`, and the type and executable bits of `kind`: what a file read
    /// as `kind` holding `size` bytes shows.
    pub fn holding(self, kind: cas::EntryKind, size: u64) -> Stat {
        let permissions = self.mode & 0o7777;
        let mode = match kind {
            cas::EntryKind::Symlink => 0o120000 | permissions,
            cas::EntryKind::Executable => 0o100000 | permissions | 0o100,
            cas::EntryKind::File | cas::EntryKind::Tree => 0o100000 | (permissions & !0o111),
        };
        Stat { size, mode, ..self }
    }

    /// File, executable or symlink; `None` for directories and special files.
    pub fn kind(&self) -> Option<cas::EntryKind> {
        match self.mode & 0o170000 {
            0o120000 => Some(cas::EntryKind::Symlink),
            0o100000 if self.mode & 0o100 != 0 => Some(cas::EntryKind::Executable),
            0o100000 => Some(cas::EntryKind::File),
            _ => None,
        }
    }
}

/// What the cache remembers about one file or symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileState {
    /// Bytes.
    pub size: u64,
    /// Modified (ns since the epoch).
    pub mtime_ns: i64,
    /// Changed (ns since the epoch).
    pub ctime_ns: i64,
    /// Inode.
    pub ino: u64,
    /// Device.
    pub dev: u64,
    /// Type and permission bits.
    pub mode: u32,
    /// The content.
    pub blob: BlobId,
    /// When the stat above was known to belong to `blob` (ns since the epoch).
    pub verified_ns: i64,
}

pub(crate) fn ns(secs: i64, nsec: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsec)
}

impl FileState {
    /// The entry for `meta` and `blob`, verified at `verified_ns` (see [`now_ns`]).
    pub fn from_metadata(meta: &std::fs::Metadata, blob: BlobId, verified_ns: i64) -> FileState {
        Self::from_stat(&Stat::from_std(meta), blob, verified_ns)
    }

    /// The entry for `stat` and `blob`, verified at `verified_ns`.
    pub fn from_stat(st: &Stat, blob: BlobId, verified_ns: i64) -> FileState {
        FileState {
            size: st.size,
            mtime_ns: st.mtime_ns,
            ctime_ns: st.ctime_ns,
            ino: st.ino,
            dev: st.dev,
            mode: st.mode,
            blob,
            verified_ns,
        }
    }

    /// The stat it was verified with.
    pub fn stat(&self) -> Stat {
        Stat {
            size: self.size,
            mtime_ns: self.mtime_ns,
            ctime_ns: self.ctime_ns,
            ino: self.ino,
            dev: self.dev,
            mode: self.mode,
        }
    }

    /// True if `st` shows the same file, unchanged, as this entry recorded.
    pub fn matches(&self, st: &Stat) -> bool {
        self.size == st.size
            && self.mtime_ns == st.mtime_ns
            && self.ctime_ns == st.ctime_ns
            && self.ino == st.ino
            && self.dev == st.dev
            && self.mode == st.mode
    }

    /// True if the file changed too close to its verification for the stat to be trusted.
    pub fn is_racy(&self) -> bool {
        let margin = i64::try_from(RACY_MARGIN.as_nanos()).unwrap_or(i64::MAX);
        self.mtime_ns.max(self.ctime_ns) >= self.verified_ns.saturating_sub(margin)
    }
}

/// Now, in ns since the epoch, for [`FileState::verified_ns`].
pub fn now_ns() -> i64 {
    i64::try_from(jiff::Timestamp::now().as_nanosecond()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(mtime_ns: i64, ctime_ns: i64, verified_ns: i64) -> FileState {
        FileState {
            size: 1,
            mtime_ns,
            ctime_ns,
            ino: 1,
            dev: 1,
            mode: 0o644,
            blob: BlobId::of(b""),
            verified_ns,
        }
    }

    #[test]
    fn racy_means_changed_within_the_margin_before_verification() {
        let margin = RACY_MARGIN.as_nanos() as i64;
        let v = 10_000_000_000;
        assert!(entry(v, v, v).is_racy());
        assert!(
            entry(v - margin, v - 2 * margin, v).is_racy(),
            "mtime at the edge"
        );
        assert!(
            entry(v - 2 * margin, v - margin + 1, v).is_racy(),
            "ctime counts too"
        );
        assert!(!entry(v - margin - 1, v - margin - 1, v).is_racy());
        assert!(
            entry(v + 5, v + 5, v).is_racy(),
            "a clock in the future is never trusted"
        );
    }
}
