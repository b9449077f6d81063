//! The scope rules of a walk, read by cairn itself rather than by the `ignore` crate's
//! walker: that one opens every ignore file by path, so a FIFO `.gitignore` blocked the walk
//! for ever and a link to `/dev/zero` was read until memory ran out. Here every pattern file
//! goes through [`path_policy::read_rules_file`] (never a FIFO or device, never a link in the
//! tree, at most 100 MiB); what cannot be read is left out and, where no one would see it
//! otherwise, reported. The precedence is the `ignore` crate's: the nearest `.ignore` match,
//! else the nearest `.gitignore` match, else `.git/info/exclude`, else the global excludes
//! file; within one file the last matching pattern.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use path_policy::{RulesFile, RulesRefusal, read_rules_file};

use crate::dirstate::{IGNORE_FILES, IgnoreStamp};
use crate::paths::{SkipReason, Skipped};

/// Where `.git/info/exclude` sits in a directory's listing (as one name: it is never walked).
pub(crate) const EXCLUDE: &[u8] = IGNORE_FILES[2].as_bytes();

/// The patterns of one directory's own pattern files.
pub struct Patterns {
    ignore: Gitignore,
    gitignore: Gitignore,
    exclude: Gitignore,
}

/// The rules of one directory that has any, linked to the nearest directory above with
/// rules of its own.
pub(crate) struct Rules {
    own: Arc<Patterns>,
    parent: Option<Arc<Rules>>,
}

impl Rules {
    /// `own` below `parent`: the node of a directory with rules of its own.
    pub(crate) fn below(own: Arc<Patterns>, parent: Option<&Arc<Rules>>) -> Arc<Rules> {
        Arc::new(Rules {
            own,
            parent: parent.cloned(),
        })
    }
}

/// Whether the rules of a directory (`rules`: its nearest node) and the global ones ignore
/// `rel`, a path from the worktree root.
pub(crate) fn ignored(
    rules: Option<&Arc<Rules>>,
    global: &Gitignore,
    rel: &[u8],
    is_dir: bool,
) -> bool {
    let path = Path::new(OsStr::from_bytes(rel));
    let (mut ignore, mut gitignore, mut exclude) = (Match::None, Match::None, Match::None);
    let mut node = rules;
    while let Some(n) = node {
        if ignore.is_none() {
            ignore = n.own.ignore.matched(path, is_dir);
        }
        if gitignore.is_none() {
            gitignore = n.own.gitignore.matched(path, is_dir);
        }
        if exclude.is_none() {
            exclude = n.own.exclude.matched(path, is_dir);
        }
        node = n.parent.as_ref();
    }
    ignore
        .or(gitignore)
        .or(exclude)
        .or(global.matched(path, is_dir))
        .is_ignore()
}

/// Where pattern files are read from: the file system, or a mount's own tree (which must
/// not be read through its mount point while the mount answers a capture).
pub trait RulesSource {
    /// The pattern file at `path` (absolute), following a symlink in its last component
    /// only if `follow`; as [`path_policy::read_rules_file`] reads one.
    fn read(&self, path: &Path, follow: bool) -> std::io::Result<RulesFile>;
}

/// Pattern files read from the file system.
pub struct OnDisk;

impl RulesSource for OnDisk {
    fn read(&self, path: &Path, follow: bool) -> std::io::Result<RulesFile> {
        read_rules_file(path, follow)
    }
}

/// Which pattern files a directory holds (looked up without opening them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RulesPresent {
    /// `.ignore`.
    pub ignore: bool,
    /// `.gitignore`.
    pub gitignore: bool,
    /// `.git/info/exclude` (`.git` a directory).
    pub exclude: bool,
    /// `.git` is there and not a directory: a linked worktree's or a submodule's `.git`
    /// file, naming the git directory that holds the exclude file.
    pub git_file: bool,
}

impl RulesPresent {
    /// What an [`IgnoreStamp`] says a directory holds.
    pub(crate) fn of_stamp(stamp: &IgnoreStamp, git_file: bool) -> RulesPresent {
        let has = |name: &str| {
            IGNORE_FILES
                .iter()
                .position(|n| *n == name)
                .is_some_and(|at| stamp.mask & (1 << at) != 0)
        };
        RulesPresent {
            ignore: has(".ignore"),
            gitignore: has(".gitignore"),
            exclude: stamp.mask & EXCLUDE_BIT != 0,
            git_file,
        }
    }
}

/// Lines longer than this are left out: no path a tree holds is that long, and compiling
/// one costs seconds.
const MAX_PATTERN_LEN: usize = 2 * path_policy::MAX_PATH_LEN;

/// Adds the patterns in `bytes` (read from `from`) to `builder`, as git reads them: a BOM
/// before the first line is dropped; a line that is not UTF-8 or not a valid pattern is
/// left out, as the `ignore` crate leaves out a bad pattern, and so is one over
/// [`MAX_PATTERN_LEN`] bytes.
fn add_lines(builder: &mut GitignoreBuilder, from: &Path, bytes: &[u8]) {
    let mut first = true;
    for (number, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.len() > MAX_PATTERN_LEN {
            tracing::warn!(
                "{}:{}: longer than {MAX_PATTERN_LEN} bytes; line left out",
                from.display(),
                number + 1
            );
            continue;
        }
        let Ok(mut line) = std::str::from_utf8(line) else {
            tracing::warn!(
                "{}:{}: not UTF-8; line left out",
                from.display(),
                number + 1
            );
            continue;
        };
        if first {
            line = line.trim_start_matches('\u{feff}');
            first = false;
        }
        if let Err(e) = builder.add_line(Some(from.to_path_buf()), line) {
            tracing::warn!("{}:{}: {e}", from.display(), number + 1);
        }
    }
}

/// A matcher of the patterns in the file at `path` (links followed if `follow`), rooted at
/// `dir` (a path from the worktree root); `Err` says why the file was not read.
fn matcher(
    source: &dyn RulesSource,
    dir: &[u8],
    path: &Path,
    follow: bool,
) -> Result<Gitignore, RulesRefusal> {
    let root = Path::new(OsStr::from_bytes(dir));
    let bytes = match source.read(path, follow) {
        Ok(RulesFile::Read(bytes)) => bytes,
        Ok(RulesFile::Missing) => return Ok(Gitignore::empty()),
        Ok(RulesFile::Refused(why)) => return Err(why),
        // As the `ignore` crate did: an unreadable ignore file is passed over.
        Err(e) => {
            tracing::warn!("{}: {e}; its patterns are not applied", path.display());
            return Ok(Gitignore::empty());
        }
    };
    let mut builder = GitignoreBuilder::new(root);
    add_lines(&mut builder, path, &bytes);
    Ok(builder.build().unwrap_or_else(|e| {
        tracing::warn!("{}: {e}; its patterns are not applied", path.display());
        Gitignore::empty()
    }))
}

/// The first line of a small file, if it is a regular one.
fn first_line(source: &dyn RulesSource, path: &Path) -> Option<String> {
    match source.read(path, true) {
        Ok(RulesFile::Read(bytes)) => {
            let line = bytes.split(|&b| b == b'\n').next()?;
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            String::from_utf8(line.to_vec()).ok()
        }
        _ => None,
    }
}

/// Where the exclude file of the repository whose `.git` is in `dir` lives, and whether it
/// is inside the tree (`.git` is a directory there) rather than in a linked git directory.
fn exclude_path(
    source: &dyn RulesSource,
    dir: &Path,
    present: RulesPresent,
) -> Option<(PathBuf, bool)> {
    let dot_git = dir.join(".git");
    if present.exclude {
        return Some((dot_git.join("info/exclude"), true));
    }
    if !present.git_file {
        return None;
    }
    // A `.git` file (a linked worktree or a submodule) names the git directory; its
    // `commondir`, if any, holds the exclude file.
    let git_dir = first_line(source, &dot_git)?;
    let git_dir = dir.join(git_dir.strip_prefix("gitdir: ")?);
    let common = match first_line(source, &git_dir.join("commondir")) {
        Some(c) => git_dir.join(c),
        None => git_dir,
    };
    Some((common.join("info/exclude"), false))
}

/// The bit of `.git/info/exclude` in an [`IgnoreStamp`]'s mask.
const EXCLUDE_BIT: u8 = 1 << 2;

/// Reads the patterns of the directory at `abs` (`rel` from the worktree root), which holds
/// the pattern files `present` names, through `source`. Returns them (none if it has no
/// rules) and the exclude file it could not read, if any, to report: ignore files in the
/// tree that are not read are either captured themselves (links, large files) or reported
/// by the walk (FIFOs, devices).
pub fn read_patterns(
    source: &dyn RulesSource,
    abs: &Path,
    rel: &[u8],
    present: RulesPresent,
) -> (Option<Arc<Patterns>>, Option<Skipped>) {
    let mut reported = None;
    let in_tree = |name: &str, there: bool| -> Gitignore {
        if !there {
            return Gitignore::empty();
        }
        let path = abs.join(name);
        matcher(source, rel, &path, false).unwrap_or_else(|why| {
            tracing::warn!("{}: {why}; its patterns are not applied", path.display());
            Gitignore::empty()
        })
    };
    let ignore = in_tree(".ignore", present.ignore);
    let gitignore = in_tree(".gitignore", present.gitignore);
    let exclude = match exclude_path(source, abs, present) {
        None => Gitignore::empty(),
        // Git follows a link here (it is not a file of the work tree).
        Some((path, inside)) => matcher(source, rel, &path, true).unwrap_or_else(|why| {
            tracing::warn!("{}: {why}; its patterns are not applied", path.display());
            if inside {
                let mut at = rel.to_vec();
                if !at.is_empty() {
                    at.push(b'/');
                }
                at.extend_from_slice(EXCLUDE);
                reported = Some(Skipped {
                    path: at,
                    reason: SkipReason::of_rules_file(why),
                });
            }
            Gitignore::empty()
        }),
    };
    let own = (!ignore.is_empty() || !gitignore.is_empty() || !exclude.is_empty()).then(|| {
        Arc::new(Patterns {
            ignore,
            gitignore,
            exclude,
        })
    });
    (own, reported)
}

/// [`read_patterns`] of a directory on disk whose pattern files `stamp` describes (and
/// `git_file`: see [`IgnoreStamp::with_git_file`]), read through `source` ([`OnDisk`], or
/// a handle of a directory out of the system's reach by path), linked below `parent`: the
/// node for the directory (the parent's if it has no rules of its own).
pub(crate) fn load(
    source: &dyn RulesSource,
    abs: &Path,
    rel: &[u8],
    (stamp, git_file): (&IgnoreStamp, bool),
    parent: Option<&Arc<Rules>>,
) -> (Option<Arc<Rules>>, Option<Skipped>) {
    let present = RulesPresent::of_stamp(stamp, git_file);
    let (own, reported) = read_patterns(source, abs, rel, present);
    let node = match own {
        Some(own) => Some(Rules::below(own, parent)),
        None => parent.cloned(),
    };
    (node, reported)
}

/// Whether `rel` (a path from the worktree root) names a pattern file cairn reads in the
/// tree: `.gitignore` and `.ignore` anywhere, `.cairndeny` at the root.
pub(crate) fn is_rules_file(rel: &[u8]) -> bool {
    let name = crate::paths::split_parent(rel).1;
    name == b".gitignore" || name == b".ignore" || rel == path_policy::WORKTREE_FILE.as_bytes()
}

/// The global excludes file, and the git config files consulted to find it.
pub(crate) struct Global {
    configs: Vec<PathBuf>,
    excludes: Option<PathBuf>,
}

impl Global {
    /// Every file the global rules depend on, for the fingerprint.
    pub fn sources(&self) -> Vec<PathBuf> {
        self.configs.iter().chain(&self.excludes).cloned().collect()
    }

    /// The matcher of the excludes file's patterns, rooted at the worktree root (built
    /// only by a walk: a capture the cache answers needs none).
    pub fn matcher(&self) -> Gitignore {
        let Some(path) = &self.excludes else {
            return Gitignore::empty();
        };
        matcher(&OnDisk, b"", path, true).unwrap_or_else(|why| {
            tracing::warn!("{}: {why}; its patterns are not applied", path.display());
            Gitignore::empty()
        })
    }
}

/// `core.excludesFile` of a git config file's bytes, found as the `ignore` crate finds it
/// (the first `excludesfile = VALUE` line of any section; `~` is the home directory).
fn excludes_file_in(config: &[u8], home: Option<&Path>) -> Option<PathBuf> {
    for line in config.split(|&b| b == b'\n') {
        let line = line.trim_ascii();
        let Some(key) = line.get(..12) else {
            continue;
        };
        if !key.eq_ignore_ascii_case(b"excludesfile") {
            continue;
        }
        let Some(value) = line[12..].trim_ascii_start().strip_prefix(b"=") else {
            continue;
        };
        let value = value.trim_ascii();
        let value = value
            .strip_prefix(b"\"")
            .unwrap_or(value)
            .trim_ascii_start();
        let value = value.strip_suffix(b"\"").unwrap_or(value).trim_ascii_end();
        if value.is_empty() || value.iter().any(u8::is_ascii_whitespace) {
            continue;
        }
        let value = std::str::from_utf8(value).ok()?;
        return Some(match home {
            Some(h) => PathBuf::from(value.replace('~', &h.to_string_lossy())),
            None => PathBuf::from(value),
        });
    }
    None
}

/// Finds git's global excludes file: named by `core.excludesFile` in `$GIT_CONFIG_GLOBAL`,
/// `~/.gitconfig`, `$XDG_CONFIG_HOME/git/config` or the system config (the first that sets
/// it), else `$XDG_CONFIG_HOME/git/ignore`. No file is waited on or read whole that is not
/// a regular file of at most 100 MiB.
pub(crate) fn global() -> Global {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let home = var("HOME");
    let xdg = var("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")));
    let candidates = [
        var("GIT_CONFIG_GLOBAL"),
        home.as_ref().map(|h| h.join(".gitconfig")),
        xdg.as_ref().map(|x| x.join("git/config")),
        Some(var("GIT_CONFIG_SYSTEM").unwrap_or_else(|| PathBuf::from("/etc/gitconfig"))),
    ];
    let mut configs = Vec::new();
    for config in candidates.into_iter().flatten() {
        let found = match read_rules_file(&config, true) {
            Ok(RulesFile::Read(bytes)) => excludes_file_in(&bytes, home.as_deref()),
            _ => None,
        };
        configs.push(config);
        if found.is_some() {
            return Global {
                configs,
                excludes: found,
            };
        }
    }
    Global {
        configs,
        excludes: xdg.map(|x| x.join("git/ignore")),
    }
}

/// The pseudo file system mounted at `path` (whose device is `dev`), if it is one: a walk
/// never enters it.
pub(crate) use path_policy::pseudo_filesystem;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excludes_file_is_found_as_the_ignore_crate_finds_it() {
        let home = Path::new("/home/u");
        let found = |text: &str| excludes_file_in(text.as_bytes(), Some(home));
        assert_eq!(
            found("[core]\n\texcludesFile = ~/.gitignore_global\n"),
            Some(PathBuf::from("/home/u/.gitignore_global"))
        );
        assert_eq!(
            found("[core]\nexcludesfile=\" /x/ignore \"\r\n"),
            Some(PathBuf::from("/x/ignore"))
        );
        assert_eq!(found("[core]\n\texcludesfileX = /a\n"), None);
        assert_eq!(
            found("excludesfile = a b\nexcludesfile = /c\n"),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(found("[user]\nname = x\n"), None);
    }

    #[test]
    fn precedence_is_the_ignore_crates() {
        let rules = |dir: &[u8], ignore: &str, gitignore: &str, parent: Option<Arc<Rules>>| {
            let build = |text: &str| {
                let mut b = GitignoreBuilder::new(Path::new(OsStr::from_bytes(dir)));
                add_lines(&mut b, Path::new("t"), text.as_bytes());
                b.build().expect("patterns")
            };
            let own = Arc::new(Patterns {
                ignore: build(ignore),
                gitignore: build(gitignore),
                exclude: Gitignore::empty(),
            });
            Some(Rules::below(own, parent.as_ref()))
        };
        let top = rules(b"", "", "*.log\n/build\n", None);
        let sub = rules(b"sub", "", "!keep.log\n", top.clone());
        let global = Gitignore::empty();
        let ignored =
            |r: &Option<Arc<Rules>>, p: &str, d| ignored(r.as_ref(), &global, p.as_bytes(), d);
        assert!(ignored(&top, "a.log", false));
        assert!(ignored(&top, "build", true));
        assert!(
            !ignored(&sub, "sub/build", true),
            "anchored to the root only"
        );
        assert!(ignored(&sub, "sub/x.log", false));
        assert!(
            !ignored(&sub, "sub/keep.log", false),
            "the nearer file wins"
        );
        // An `.ignore` match anywhere above beats a `.gitignore` one below.
        let top = rules(b"", "*.tmp\n", "", None);
        let sub = rules(b"sub", "", "!*.tmp\n", top);
        assert!(ignored(&sub, "sub/a.tmp", false));
    }
}
