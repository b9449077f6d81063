//! A worktree's scope, decided in one place for every capture: the walk of a directory on
//! disk and a mount's capture of its own tree ask the same [`Scope`] about every name, so
//! both take in, leave out and report (`skipped`) exactly the same paths.
//!
//! What lies outside scope: `.git` and the store's folder, what the pattern files ignore
//! (`.ignore`, `.gitignore`, `.git/info/exclude`, the global excludes file; see
//! [`crate::rules`]), quietly; names no tree can hold, paths too long, secrets (the deny
//! list), files over the size cap and special files, each reported with its reason.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cas::Store;
use ignore::gitignore::Gitignore;
use path_policy::{DenyError, DenyList, RulesFile, WORKTREE_FILE};

use crate::paths::{SkipReason, Special, split_parent};
use crate::rules::{self, Patterns, Rules, RulesSource};
use worktree_registry::WorktreeRecord;

/// What a capture's scope depends on beyond the pattern files inside the worktree, read
/// before the capture starts (outside any mount's lock: these files may be anywhere).
pub struct ScopeSettings {
    root: PathBuf,
    /// The store's `deny` file, as read; `None` with `--include-denied`.
    store_deny: Option<(PathBuf, RulesFile)>,
    global: Gitignore,
    /// Where the global rules come from (config files, the excludes file), for stamps.
    global_sources: Vec<PathBuf>,
    /// The stat of those, taken when these settings were read.
    global_stamp: u64,
    store: Option<PathBuf>,
    max_file_size: Option<u64>,
    /// The dependency layers attached to the worktree (the record's `deps`): out of
    /// scope whatever the pattern files say.
    attached: Vec<Vec<u8>>,
}

impl ScopeSettings {
    /// The settings of `record`'s worktree in `store`.
    pub fn load(store: &Store, record: &WorktreeRecord) -> Result<ScopeSettings, DenyError> {
        let store_deny = if record.include_denied {
            None
        } else {
            let path = store.root().as_std_path().join(path_policy::STORE_FILE);
            let file =
                path_policy::read_rules_file(&path, true).map_err(|source| DenyError::Io {
                    path: path.clone(),
                    source,
                })?;
            Some((path, file))
        };
        let outside = rules::global();
        let global_sources = outside.sources();
        Ok(ScopeSettings {
            root: record.root.as_std_path().to_owned(),
            store_deny,
            global: outside.matcher(),
            global_stamp: crate::dirstate::files_stamp(&global_sources),
            global_sources,
            store: worktree_registry::apart::store_dir(store),
            max_file_size: record.max_file_size,
            attached: (record.deps.iter())
                .map(|d| d.path.as_str().as_bytes().to_vec())
                .collect(),
        })
    }

    /// The scope, reading the worktree's own `.cairndeny` through `source`.
    pub fn scope(&self, source: &dyn RulesSource) -> Result<Scope, DenyError> {
        let deny = match &self.store_deny {
            None => DenyList::nothing(),
            Some((path, file)) => {
                let own = self.root.join(WORKTREE_FILE);
                let read = source.read(&own, true);
                DenyList::from_files((path.clone(), Ok(file.clone())), (own, read))?
            }
        };
        for (path, why) in deny.refused() {
            tracing::warn!(
                "{}: {why}; its deny patterns are not applied",
                path.display()
            );
        }
        let mut scope = Scope::new(
            &self.root,
            deny,
            (
                self.global.clone(),
                self.global_sources.clone(),
                self.global_stamp,
            ),
            self.store.as_deref(),
            self.max_file_size,
        );
        scope.leave_out(&self.attached);
        Ok(scope)
    }
}

/// The rules that decide which paths of one worktree a capture takes.
#[derive(Clone)]
pub struct Scope {
    deny: DenyList,
    global: Gitignore,
    /// The store's folder from the worktree root, when it lies inside.
    store: Option<Vec<u8>>,
    max_file_size: Option<u64>,
    global_sources: Vec<PathBuf>,
    stamp: u64,
    /// False for a dependency layer's directory, taken whole: no pattern file applies.
    patterns: bool,
    /// Paths left out quietly, whatever the pattern files say: attached dependency layers.
    left_out: Vec<Vec<u8>>,
}

/// The verdict on one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// In scope.
    In,
    /// Out of scope without a word: ignored, `.git`, the store's folder.
    Out,
    /// Out of scope and reported in `skipped`.
    Skip(SkipReason),
}

/// What a path that is not a directory is, for [`Scope::leaf`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaf {
    /// A regular file of this many bytes.
    File(u64),
    /// A symbolic link.
    Symlink,
    /// A FIFO, socket or device.
    Special(Special),
}

/// The pattern rules in force in one directory: its own and those of the directories
/// above it.
#[derive(Clone, Default)]
pub struct DirRules(pub(crate) Option<Arc<Rules>>);

impl DirRules {
    /// The rules of a child directory whose own patterns are `own` (none: these).
    pub fn child(&self, own: Option<Arc<Patterns>>) -> DirRules {
        match own {
            Some(own) => DirRules(Some(Rules::below(own, self.0.as_ref()))),
            None => self.clone(),
        }
    }
}

impl Scope {
    /// The scope of the worktree at `root`: `deny`, the global rules (matcher, the files
    /// it comes from, a stamp of them), the store's folder, the size cap.
    pub(crate) fn new(
        root: &Path,
        deny: DenyList,
        (global, global_sources, global_stamp): (Gitignore, Vec<PathBuf>, u64),
        store: Option<&Path>,
        max_file_size: Option<u64>,
    ) -> Scope {
        let store = store
            .and_then(|s| s.strip_prefix(root).ok())
            .filter(|rel| !rel.as_os_str().is_empty())
            .map(|rel| rel.as_os_str().as_bytes().to_vec());
        let mut hasher = blake3::Hasher::new();
        hasher.update(&global_stamp.to_le_bytes());
        for pattern in deny.patterns() {
            hasher.update(pattern.as_bytes());
            hasher.update(b"\n");
        }
        hasher.update(&max_file_size.unwrap_or(u64::MAX).to_le_bytes());
        hasher.update(store.as_deref().unwrap_or(b"\0"));
        let mut first = [0u8; 8];
        first.copy_from_slice(&hasher.finalize().as_bytes()[..8]);
        Scope {
            deny,
            global,
            store,
            max_file_size,
            global_sources,
            stamp: u64::from_le_bytes(first),
            patterns: true,
            left_out: Vec::new(),
        }
    }

    /// Everything under `root`, as a dependency layer is saved: no pattern file, global
    /// rule, deny list or size cap applies (a package's own `.gitignore` must not drop its
    /// files); only `.git` and the store's folder stay out, and names no tree can hold.
    pub fn whole(root: &Path, store: &Store) -> Scope {
        let mut scope = Scope::new(
            root,
            DenyList::nothing(),
            (Gitignore::empty(), Vec::new(), 0),
            worktree_registry::apart::store_dir(store).as_deref(),
            None,
        );
        scope.patterns = false;
        scope
    }

    /// Leaves `paths` (from the worktree root) out quietly, and everything below them.
    fn leave_out(&mut self, paths: &[Vec<u8>]) {
        if paths.is_empty() {
            return;
        }
        let mut hasher = blake3::Hasher::new();
        hasher.update(&self.stamp.to_le_bytes());
        for path in paths {
            hasher.update(path);
            hasher.update(b"\0");
        }
        let mut first = [0u8; 8];
        first.copy_from_slice(&hasher.finalize().as_bytes()[..8]);
        self.stamp = u64::from_le_bytes(first);
        self.left_out = paths.to_vec();
    }

    /// The verdict on `rel` (a path from the worktree root, a directory if `is_dir`) found
    /// in a directory whose rules are `rules`.
    pub fn name(&self, rules: &DirRules, rel: &[u8], is_dir: bool) -> Verdict {
        let name = split_parent(rel).1;
        if name == b".git" || self.store.as_deref() == Some(rel) {
            return Verdict::Out;
        }
        // The walk does not enter a directory left out, so its own path is what matches.
        if self.left_out.iter().any(|p| p.as_slice() == rel) {
            return Verdict::Out;
        }
        if self.patterns && rules::ignored(rules.0.as_ref(), &self.global, rel, is_dir) {
            return Verdict::Out;
        }
        if let Err(err) = path_policy::check_name(name) {
            return Verdict::Skip(SkipReason::InvalidName(err));
        }
        if rel.len() > path_policy::MAX_PATH_LEN {
            return Verdict::Skip(SkipReason::PathTooLong);
        }
        if let Some(pattern) = self.deny.denied(rel, is_dir) {
            return Verdict::Skip(SkipReason::Denied {
                pattern: pattern.to_owned(),
            });
        }
        Verdict::In
    }

    /// Why `rel`, in scope by its name and not a directory, is still left out, if it is:
    /// over the size cap, a special file.
    pub fn leaf(&self, rel: &[u8], leaf: Leaf) -> Option<SkipReason> {
        match leaf {
            Leaf::File(size) => over_cap(size, self.max_file_size),
            Leaf::Symlink => None,
            Leaf::Special(_) if rules::is_rules_file(rel) => Some(SkipReason::IgnoreFileNotRegular),
            Leaf::Special(kind) => Some(SkipReason::Special(kind)),
        }
    }

    /// A fingerprint of everything here but the pattern files in the tree: a mount's
    /// capture redoes every verdict when it changes.
    pub fn stamp(&self) -> u64 {
        self.stamp
    }

    /// The deny list in force.
    pub(crate) fn deny(&self) -> &DenyList {
        &self.deny
    }

    /// The files the global rules come from.
    pub(crate) fn global_sources(&self) -> &[PathBuf] {
        &self.global_sources
    }

    /// The size cap.
    pub(crate) fn max_file_size(&self) -> Option<u64> {
        self.max_file_size
    }
}

/// Why a file of `size` bytes is left out under the size cap `cap`, if it is.
pub(crate) fn over_cap(size: u64, cap: Option<u64>) -> Option<SkipReason> {
    let cap = cap?;
    (size > cap).then_some(SkipReason::OverSizeCap { size, cap })
}
