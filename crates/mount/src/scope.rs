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
    matchers: Arc<Matchers>,
    parent: Option<Arc<Level>>,
}

/// The patterns of one directory's rules files.
pub(crate) struct Matchers {
    ignore: Gitignore,
    gitignore: Gitignore,
}

/// Paths are matched under a root of their own, so no real directory is ever read.
fn rooted(rel: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    Path::new("/").join(std::ffi::OsStr::from_bytes(rel))
}

fn matcher(dir: &[u8], content: Option<&[u8]>) -> Gitignore {
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

impl Matchers {
    /// The patterns of directory `dir` whose `.ignore` and `.gitignore` hold these bytes.
    pub(crate) fn new(dir: &[u8], ignore: Option<&[u8]>, gitignore: Option<&[u8]>) -> Matchers {
        Matchers {
            ignore: matcher(dir, ignore),
            gitignore: matcher(dir, gitignore),
        }
    }
}

impl Scope {
    pub(crate) fn root() -> Scope {
        Scope(None)
    }

    /// The scope of a directory whose own rules are `matchers` (none: its parent's).
    pub(crate) fn child(&self, matchers: Option<Arc<Matchers>>) -> Scope {
        match matchers {
            None => self.clone(),
            Some(matchers) => Scope(Some(Arc::new(Level {
                matchers,
                parent: self.0.clone(),
            }))),
        }
    }

    /// Whether `rel` (from the mount's root) is ignored.
    pub(crate) fn ignored(&self, rel: &[u8], is_dir: bool) -> bool {
        let path = rooted(rel);
        let mut gitignore = Match::None;
        let mut at = self.0.as_ref();
        while let Some(level) = at {
            match level.matchers.ignore.matched(&path, is_dir) {
                Match::None => {}
                m => return m.is_ignore(),
            }
            if gitignore.is_none() {
                gitignore = match level.matchers.gitignore.matched(&path, is_dir) {
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
