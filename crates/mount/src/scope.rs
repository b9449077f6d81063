//! What a capture of a mount leaves out: `.git` and what `.ignore` / `.gitignore` files in
//! the mounted tree ignore (the nearest `.ignore` match, else the nearest `.gitignore`
//! match, as for a worktree on disk). Ignored files stay in the layer, as ignored files
//! stay in a directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The files holding rules.
pub(crate) const RULES_FILES: [&[u8]; 2] = [b".ignore", b".gitignore"];

/// The rules in force in one directory, linked to those above.
#[derive(Clone)]
pub(crate) struct Scope(Option<Arc<Level>>);

struct Level {
    ignore: Gitignore,
    gitignore: Gitignore,
    parent: Option<Arc<Level>>,
}

/// Paths are matched under a root of their own, so no real directory is ever read.
fn rooted(rel: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    Path::new("/").join(std::ffi::OsStr::from_bytes(rel))
}

fn matcher(dir: &[u8], content: Option<&Vec<u8>>) -> Gitignore {
    let Some(content) = content else {
        return Gitignore::empty();
    };
    let mut b = GitignoreBuilder::new(rooted(dir));
    for line in String::from_utf8_lossy(content).lines() {
        // A line that is not a pattern is left out, as git does.
        let _ = b.add_line(None, line);
    }
    b.build().unwrap_or_else(|_| Gitignore::empty())
}

impl Scope {
    pub(crate) fn root() -> Scope {
        Scope(None)
    }

    /// The scope of directory `dir`, whose rules files hold `files` (name, content).
    pub(crate) fn child(&self, dir: &[u8], files: &[(Vec<u8>, Vec<u8>)]) -> Scope {
        if files.is_empty() {
            return self.clone();
        }
        let get = |name: &[u8]| files.iter().find(|(n, _)| n == name).map(|(_, c)| c);
        Scope(Some(Arc::new(Level {
            ignore: matcher(dir, get(b".ignore")),
            gitignore: matcher(dir, get(b".gitignore")),
            parent: self.0.clone(),
        })))
    }

    /// Whether `rel` (from the mount's root) is ignored.
    pub(crate) fn ignored(&self, rel: &[u8], is_dir: bool) -> bool {
        let path = rooted(rel);
        let mut gitignore = Match::None;
        let mut at = self.0.as_ref();
        while let Some(level) = at {
            match level.ignore.matched(&path, is_dir) {
                Match::None => {}
                m => return m.is_ignore(),
            }
            if gitignore.is_none() {
                gitignore = match level.gitignore.matched(&path, is_dir) {
                    Match::None => Match::None,
                    Match::Ignore(_) => Match::Ignore(()),
                    Match::Whitelist(_) => Match::Whitelist(()),
                };
            }
            at = level.parent.as_ref();
        }
        gitignore.is_ignore()
    }
}
