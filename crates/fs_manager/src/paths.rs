//! Paths inside a worktree (`/`-separated bytes from its root) and how they are ordered,
//! joined and shown.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A path left out of a snapshot, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Path from the worktree root, raw bytes.
    pub path: Vec<u8>,
    /// Why it was left out.
    pub reason: String,
}

/// Orders paths as trees list them: component by component, by name bytes.
pub(crate) fn tree_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let key = |c: &u8| if *c == b'/' { 0 } else { *c };
    a.iter().map(key).cmp(b.iter().map(key))
}

/// `p`'s parent directory and its name there (the root's children have parent `""`).
pub(crate) fn split_parent(p: &[u8]) -> (&[u8], &[u8]) {
    match p.iter().rposition(|&b| b == b'/') {
        Some(i) => (&p[..i], &p[i + 1..]),
        None => (&[], p),
    }
}

/// `root` joined with a tree path.
pub(crate) fn join(root: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(OsStr::from_bytes(rel))
    }
}

/// A path for a message: as it is when it is UTF-8, else quoted as git quotes paths
/// (`"caf\351"`), never with replacement characters.
pub(crate) fn shown(path: &Path) -> String {
    diff::path_text(path.as_os_str().as_bytes())
}
