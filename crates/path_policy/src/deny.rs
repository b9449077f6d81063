//! Deny patterns: secrets that stay outside every scope.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::rules_file::{RulesFile, RulesRefusal, read_rules_file};

/// The built-in patterns (gitignore syntax).
pub const DEFAULT_DENY: &[&str] = &[
    ".ssh/",
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_ed25519*",
    ".git/",
];

/// The store-wide pattern file, inside the store folder.
pub const STORE_FILE: &str = "deny";
/// The per-worktree pattern file, at the worktree root.
pub const WORKTREE_FILE: &str = ".cairndeny";

/// A deny list could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DenyError {
    /// A pattern file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A pattern is not valid gitignore syntax.
    #[error("{origin}: invalid deny pattern {pattern:?}: {message}")]
    Pattern {
        /// Where it came from (a file, or "built-in").
        origin: String,
        /// The pattern.
        pattern: String,
        /// What is wrong.
        message: String,
    },
}

/// Which paths are secrets. Patterns use gitignore syntax and apply in order: the built-in
/// ones, then the store's `deny` file, then the worktree's `.cairndeny`; a later `!pattern`
/// lets a path back in.
#[derive(Debug, Clone)]
pub struct DenyList {
    matcher: Option<Gitignore>,
    patterns: Vec<String>,
    refused: Vec<(PathBuf, RulesRefusal)>,
}

impl DenyList {
    /// The built-in patterns followed by `extra` ones (each with its origin for errors).
    pub fn new(store: &[String], worktree: &[String]) -> Result<DenyList, DenyError> {
        let mut builder = GitignoreBuilder::new("/");
        let mut patterns = Vec::new();
        let sources = DEFAULT_DENY
            .iter()
            .map(|p| ("built-in", p.to_string()))
            .chain(store.iter().map(|p| ("store deny file", p.clone())))
            .chain(worktree.iter().map(|p| (WORKTREE_FILE, p.clone())));
        for (origin, pattern) in sources {
            let line = pattern.trim_end();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            builder
                .add_line(None, line)
                .map_err(|e| DenyError::Pattern {
                    origin: origin.to_owned(),
                    pattern: line.to_owned(),
                    message: e.to_string(),
                })?;
            patterns.push(line.to_owned());
        }
        let matcher = builder.build().map_err(|e| DenyError::Pattern {
            origin: "deny list".to_owned(),
            pattern: String::new(),
            message: e.to_string(),
        })?;
        Ok(DenyList {
            matcher: Some(matcher),
            patterns,
            refused: Vec::new(),
        })
    }

    /// Reads the store's `deny` file and the worktree's `.cairndeny`, if they exist. One
    /// that is not a regular file (a FIFO, a device, a link to one) or is over
    /// [`crate::MAX_RULES_FILE`] bytes is not read: see [`DenyList::refused`].
    pub fn load(store_dir: &Path, worktree_root: &Path) -> Result<DenyList, DenyError> {
        // Links are followed: a deny file kept elsewhere still protects.
        let read = |path: PathBuf| {
            let file = read_rules_file(&path, true);
            (path, file)
        };
        DenyList::from_files(
            read(store_dir.join(STORE_FILE)),
            read(worktree_root.join(WORKTREE_FILE)),
        )
    }

    /// The deny list of the store's `deny` file and the worktree's `.cairndeny` as read
    /// (each with the path it was read from), however they were read: from disk by
    /// [`DenyList::load`], or by a mount from its own tree.
    pub fn from_files(
        store: (PathBuf, std::io::Result<RulesFile>),
        worktree: (PathBuf, std::io::Result<RulesFile>),
    ) -> Result<DenyList, DenyError> {
        let mut refused = Vec::new();
        let mut lines = |(path, file): (PathBuf, std::io::Result<RulesFile>)| match file {
            Ok(RulesFile::Read(bytes)) => match String::from_utf8(bytes) {
                Ok(text) => Ok(text.lines().map(str::to_owned).collect()),
                Err(e) => Err(DenyError::Io {
                    path,
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                }),
            },
            Ok(RulesFile::Missing) => Ok(Vec::new()),
            Ok(RulesFile::Refused(why)) => {
                refused.push((path, why));
                Ok(Vec::new())
            }
            Err(source) => Err(DenyError::Io { path, source }),
        };
        let store = lines(store)?;
        let worktree = lines(worktree)?;
        let mut list = DenyList::new(&store, &worktree)?;
        list.refused = refused;
        Ok(list)
    }

    /// The pattern files [`DenyList::load`] found but did not read, and why.
    pub fn refused(&self) -> &[(PathBuf, RulesRefusal)] {
        &self.refused
    }

    /// Denies nothing (a worktree onboarded with `--include-denied`).
    pub fn nothing() -> DenyList {
        DenyList {
            matcher: None,
            patterns: Vec::new(),
            refused: Vec::new(),
        }
    }

    /// The pattern that denies `path` (relative, `/`-separated) or anything above it.
    pub fn denied(&self, path: &[u8], is_dir: bool) -> Option<&str> {
        let matcher = self.matcher.as_ref()?;
        let m = matcher.matched_path_or_any_parents(Path::new(OsStr::from_bytes(path)), is_dir);
        if m.is_ignore() {
            m.inner().map(|g| g.original())
        } else {
            None
        }
    }

    /// The patterns in force, in order: a fingerprint for caches.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_deny_the_usual_secrets() {
        let d = DenyList::new(&[], &[]).unwrap();
        for (path, dir) in [
            (&b".env"[..], false),
            (b"app/.env", false),
            (b".env.production", false),
            (b"certs/server.pem", false),
            (b"keys/tls.key", false),
            (b"home/.ssh", true),
            (b"home/.ssh/config", false),
            (b"id_rsa", false),
            (b"id_rsa.pub", false),
            (b"id_ed25519", false),
            (b".git/config", false),
        ] {
            assert!(
                d.denied(path, dir).is_some(),
                "{:?}",
                String::from_utf8_lossy(path)
            );
        }
        for path in [
            &b"src/main.rs"[..],
            b"environment.txt",
            b"keyboard.c",
            b"docs/pem-format.md",
            b".envrc",
        ] {
            assert_eq!(
                d.denied(path, false),
                None,
                "{:?}",
                String::from_utf8_lossy(path)
            );
        }
        assert_eq!(d.denied(b"a/b/secret.pem", false), Some("*.pem"));
    }

    #[test]
    fn later_patterns_add_and_let_back_in() {
        let d = DenyList::new(
            &["*.sqlite".into()],
            &["!.env.example".into(), "# comment".into(), "".into()],
        )
        .unwrap();
        assert_eq!(d.denied(b"db/app.sqlite", false), Some("*.sqlite"));
        assert_eq!(d.denied(b".env.example", false), None);
        assert!(d.denied(b".env.local", false).is_some());
        assert_eq!(DenyList::nothing().denied(b".env", false), None);
    }
}
