//! The path of a name in a mount, as its layer's journal records it.

use serde::{Deserialize, Serialize};

/// A path from a mount's root: its names joined by `/`, raw bytes, the root empty.
///
/// Not a [`path_policy::RepoPath`]: a mount holds whatever a disk holds, so a name may be
/// one no tree can hold (`.GIT`, a control byte) or one the worktree's scope refuses later;
/// the journal must keep every change to such a name all the same, and a capture judges it
/// (and reports it skipped) as a capture on disk does. A path becomes a tree's only through
/// that judgement. In the journal it is the list of its bytes, as it always was.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct MountPath(Vec<u8>);

impl MountPath {
    /// The mount's root.
    pub(crate) fn root() -> MountPath {
        MountPath::default()
    }

    /// Whether it is the root.
    pub(crate) fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// `name` in the directory at this path.
    pub(crate) fn join(&self, name: &[u8]) -> MountPath {
        if self.is_root() {
            MountPath(name.to_vec())
        } else {
            MountPath([self.0.as_slice(), b"/", name].concat())
        }
    }

    /// `name` in the directory at this path, extending this one in place.
    pub(crate) fn child(mut self, name: &[u8]) -> MountPath {
        if !self.is_root() {
            self.0.push(b'/');
        }
        self.0.extend_from_slice(name);
        self
    }

    /// Its names, from the root's child down (the root has one, empty).
    pub(crate) fn names(&self) -> impl Iterator<Item = &[u8]> {
        self.0.split(|&b| b == b'/')
    }

    /// The bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The bytes, owned.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    /// For a message: invalid UTF-8 replaced.
    pub(crate) fn shown(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }
}

impl From<Vec<u8>> for MountPath {
    fn from(bytes: Vec<u8>) -> MountPath {
        MountPath(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The journal's lines read as before the type: a path is the list of its bytes.
    #[test]
    fn a_path_is_written_as_its_bytes() {
        let path = MountPath::root().join(b"d").join(b".GIT");
        assert_eq!(path.as_bytes(), b"d/.GIT");
        assert_eq!(MountPath::root().child(b"d").child(b".GIT"), path);
        let json = serde_json::to_string(&path).expect("encodes");
        assert_eq!(json, "[100,47,46,71,73,84]");
        let back: MountPath = serde_json::from_str(&json).expect("decodes");
        assert_eq!(back, path);
        assert_eq!(path.names().collect::<Vec<_>>(), [&b"d"[..], b".GIT"]);
    }
}
