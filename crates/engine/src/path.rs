//! Paths in requests and outcomes: directories resolved against the caller's directory,
//! `-- PATH` arguments resolved into checked repo paths, and paths that need not be repo
//! paths; all serialize as SPEC.md's JSON path text.

use camino::{Utf8Path, Utf8PathBuf};
use path_policy::RepoPathBuf;

use crate::error::{Code, Error};

/// A path as the caller typed it after `--` (or sent it in a request's `paths`): relative
/// to the worktree root, or absolute inside it, possibly with `.` components; raw bytes,
/// as file names need not be UTF-8. [`tree_paths`] resolves it into a checked
/// [`RepoPathBuf`]. In JSON it is the path itself when valid UTF-8, else git's quoted form
/// (`"\377"`), which reads back to the same bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PathArg(Vec<u8>);

/// A path as raw bytes that need not be a [`RepoPathBuf`]: a name a capture left out
/// because a tree cannot hold it (`.GIT`, a control byte), or a path as git names it. In
/// JSON it is written as [`PathArg`] is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RawPath(Vec<u8>);

macro_rules! path_bytes {
    ($name:ident) => {
        impl $name {
            /// The bytes.
            pub fn as_bytes(&self) -> &[u8] {
                &self.0
            }
        }

        impl From<Vec<u8>> for $name {
            fn from(bytes: Vec<u8>) -> Self {
                $name(bytes)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(s.as_bytes().to_vec())
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string" })
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&diff::path_text(&self.0))
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text: String = serde::Deserialize::deserialize(d)?;
                Ok($name(path_policy::from_path_text(&text)))
            }
        }
    };
}

path_bytes!(PathArg);
path_bytes!(RawPath);

/// `p` made absolute against `cwd`, with `.` and `..` components resolved lexically.
pub fn absolute(cwd: &Utf8Path, p: &Utf8Path) -> Utf8PathBuf {
    let joined = if p.is_absolute() {
        p.to_owned()
    } else {
        cwd.join(p)
    };
    let mut out = Utf8PathBuf::new();
    for c in joined.components() {
        match c {
            camino::Utf8Component::CurDir => {}
            camino::Utf8Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_str()),
        }
    }
    out
}

/// Tree paths from `-- PATH…` arguments: relative to the worktree root as given, or
/// absolute inside `root`; `.` components dropped, `..` refused, and what is left checked
/// as a [`RepoPathBuf`] (no name a tree cannot hold, such as `.git`).
pub fn tree_paths(root: Option<&Utf8Path>, raw: &[PathArg]) -> Result<Vec<RepoPathBuf>, Error> {
    let quote = diff::quote_path;
    let mut out = Vec::new();
    for p in raw {
        let bytes = p.as_bytes();
        let rel = match (bytes.starts_with(b"/"), root) {
            (true, Some(root)) => match bytes.strip_prefix(root.as_str().as_bytes()) {
                Some(rest) if rest.is_empty() || rest.starts_with(b"/") => rest,
                _ => {
                    return Err(PathError::Outside {
                        path: quote(bytes),
                        root: root.to_owned(),
                    }
                    .into());
                }
            },
            (true, None) => {
                return Err(PathError::AbsoluteWithoutWorktree { path: quote(bytes) }.into());
            }
            (false, _) => bytes,
        };
        let mut parts = Vec::new();
        for c in rel.split(|&b| b == b'/') {
            match c {
                b"" | b"." => {}
                b".." => {
                    return Err(PathError::DotDot { path: quote(bytes) }.into());
                }
                c => parts.push(c),
            }
        }
        let path =
            RepoPathBuf::new(parts.join(&b'/')).map_err(|source| PathError::NotATreePath {
                path: quote(bytes),
                source,
            })?;
        out.push(path);
    }
    Ok(out)
}

/// `path` with every link and `..` resolved; it must be a directory that exists.
pub(crate) fn canonical_dir(path: &Utf8Path) -> Result<Utf8PathBuf, Error> {
    std::fs::canonicalize(path)
        .ok()
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok())
        .ok_or_else(|| {
            PathError::NoSuchDirectory {
                path: path.to_owned(),
            }
            .into()
        })
}

/// Why a path argument is refused (code `invalid_path`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// An absolute path outside the worktree.
    #[error("{path}: outside the worktree {root}")]
    Outside {
        /// The path, quoted.
        path: String,
        /// The worktree.
        root: Utf8PathBuf,
    },
    /// An absolute path where there is no worktree.
    #[error("{path}: an absolute path needs a worktree")]
    AbsoluteWithoutWorktree {
        /// The path, quoted.
        path: String,
    },
    /// A `..` component.
    #[error("{path}: '..' is not allowed")]
    DotDot {
        /// The path, quoted.
        path: String,
    },
    /// A name a tree cannot hold.
    #[error("{path}: {}", source.reason.reason())]
    NotATreePath {
        /// The path, quoted.
        path: String,
        /// Why.
        source: path_policy::RepoPathError,
    },
    /// A directory that is not there.
    #[error("{path}: no such directory")]
    NoSuchDirectory {
        /// The path.
        path: Utf8PathBuf,
    },
}

crate::error::coded!(PathError);

impl PathError {
    /// Its code.
    pub fn code(&self) -> Code {
        Code::InvalidPath
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_paths_read_back_as_the_same_bytes() {
        for name in [
            b"src/main.rs".as_slice(),
            b"\xff\xfe",
            "caf\u{e9}".as_bytes(),
            b"tab\there",
            b"\"quoted\"",
            b"\"\\377\"",
        ] {
            let text = serde_json::to_string(&PathArg(name.to_vec())).expect("serializes");
            let back: PathArg = serde_json::from_str(&text).expect("deserializes");
            // A UTF-8 name that is itself a quoted form of non-UTF-8 bytes cannot be told
            // apart; every other name comes back as it was.
            if name != b"\"\\377\"" {
                assert_eq!(back.0, name, "{text}");
            }
        }
    }

    #[test]
    fn raw_paths_keep_names_a_tree_cannot_hold() {
        for name in [b".GIT/config".as_slice(), b"a\x01b", b"x/../y"] {
            assert!(RepoPathBuf::new(name).is_err());
            let raw = RawPath::from(name.to_vec());
            let text = serde_json::to_string(&raw).expect("serializes");
            assert_eq!(
                text,
                serde_json::to_string(&diff::path_text(name)).expect("json")
            );
            let back: RawPath = serde_json::from_str(&text).expect("deserializes");
            assert_eq!(back, raw, "{text}");
        }
    }
}
