//! The stat cache: per file, the `lstat` facts seen when its content was last hashed.
//!
//! A file whose size, mtime, ctime, inode and mode all still match is not read again,
//! unless its timestamps fall within [`RACY_MARGIN`] of when the cache was written: such a
//! file may have changed again within the same timestamp tick (git's racy-git rule).

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use cas::BlobId;

/// Files whose mtime or ctime is this close to the cache's time are re-read next time.
/// Generous against coarse file-system clocks (a jiffy is 1 to 10 ms).
pub const RACY_MARGIN: Duration = Duration::from_millis(50);

const ENCODED_LEN: usize = 8 * 5 + 4 + 32;

/// What the cache remembers about one file or symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileState {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
    pub dev: u64,
    pub mode: u32,
    pub blob: BlobId,
}

fn ns(secs: i64, nsec: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsec)
}

impl FileState {
    pub fn from_metadata(meta: &std::fs::Metadata, blob: BlobId) -> FileState {
        FileState {
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
            mode: meta.mode(),
            blob,
        }
    }

    /// True if `meta` shows the same file, unchanged, as this entry recorded.
    pub fn matches(&self, meta: &std::fs::Metadata) -> bool {
        self.size == meta.size()
            && self.mtime_ns == ns(meta.mtime(), meta.mtime_nsec())
            && self.ctime_ns == ns(meta.ctime(), meta.ctime_nsec())
            && self.ino == meta.ino()
            && self.dev == meta.dev()
            && self.mode == meta.mode()
    }

    /// True if the file changed too close to `cache_time` for its stat to be trusted.
    pub fn is_racy(&self, cache_time: Option<jiff::Timestamp>) -> bool {
        let Some(t) = cache_time else { return true };
        let margin = i128::try_from(RACY_MARGIN.as_nanos()).unwrap_or(i128::MAX);
        let limit = t.as_nanosecond() - margin;
        i128::from(self.mtime_ns.max(self.ctime_ns)) >= limit
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ENCODED_LEN);
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.mtime_ns.to_le_bytes());
        out.extend_from_slice(&self.ctime_ns.to_le_bytes());
        out.extend_from_slice(&self.ino.to_le_bytes());
        out.extend_from_slice(&self.dev.to_le_bytes());
        out.extend_from_slice(&self.mode.to_le_bytes());
        out.extend_from_slice(self.blob.as_bytes());
        out
    }

    /// `None` for a record this version cannot read: it is simply not trusted.
    pub fn decode(bytes: &[u8]) -> Option<FileState> {
        if bytes.len() != ENCODED_LEN {
            return None;
        }
        let u64_at = |i: usize| bytes[i..i + 8].try_into().ok().map(u64::from_le_bytes);
        let i64_at = |i: usize| bytes[i..i + 8].try_into().ok().map(i64::from_le_bytes);
        Some(FileState {
            size: u64_at(0)?,
            mtime_ns: i64_at(8)?,
            ctime_ns: i64_at(16)?,
            ino: u64_at(24)?,
            dev: u64_at(32)?,
            mode: u32::from_le_bytes(bytes[40..44].try_into().ok()?),
            blob: BlobId::from_bytes(bytes[44..76].try_into().ok()?),
        })
    }
}
