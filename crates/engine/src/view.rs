//! What `diff`, `status`, `review` and `log` share: comparisons of snapshots and live
//! worktrees, and the entries of a history.

use fs_manager::RegistryRead as _;
use std::collections::HashMap;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{EntryKind, ObjectId, Reader, SnapshotId, Store, Tree, TreeId};
use diff::text::LineDiff;
use diff::{FileDiff, FileEntry, Status};
use path_policy::{RepoPath, RepoPathBuf};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::engine::resolve_snapshot;
use crate::error::{ArgumentError, Code, Error, IoError};
use crate::path::absolute;

/// One side of a comparison: a stored snapshot, or a worktree's live files.
pub(crate) struct Side {
    pub(crate) tree: TreeId,
    /// Trees of a live state that the store does not hold.
    pub(crate) memory: HashMap<TreeId, Tree>,
    /// For a live side, where its files are.
    pub(crate) root: Option<Utf8PathBuf>,
}

impl Side {
    /// A stored tree (a snapshot's).
    pub(crate) fn stored(tree: TreeId) -> Side {
        Side {
            tree,
            memory: HashMap::new(),
            root: None,
        }
    }
}

/// How much of each changed file a comparison reads.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Detail {
    /// Paths and entries only.
    Names,
    /// Line counts too.
    #[default]
    Counts,
    /// Counts, and both sides' bytes (for a patch).
    Contents,
}

/// One side of a changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EntrySide {
    /// Its blob.
    pub blob: ObjectId,
    /// Its git mode (`100644`, `100755`, `120000`).
    pub mode: String,
    /// `file`, `symlink` or `directory`.
    pub kind: String,
    /// Its size in bytes.
    pub size: u64,
}

/// A changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileChange {
    /// Its path (the new one for a rename).
    pub path: RepoPathBuf,
    /// `A`, `D`, `M`, `T` or `R100`.
    pub status: String,
    /// Before.
    pub old: Option<EntrySide>,
    /// After.
    pub new: Option<EntrySide>,
    /// Before's blob.
    pub old_blob: Option<ObjectId>,
    /// After's blob.
    pub new_blob: Option<ObjectId>,
    /// Before's mode.
    pub old_mode: Option<String>,
    /// After's mode.
    pub new_mode: Option<String>,
    /// After's (else before's) kind.
    pub kind: Option<String>,
    /// After's (else before's) size.
    pub size: Option<u64>,
    /// Whether either side is binary.
    pub binary: bool,
    /// Lines added.
    pub insertions: u64,
    /// Lines removed.
    pub deletions: u64,
    /// A rename's old path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<RepoPathBuf>,
    /// A rename's new path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<RepoPathBuf>,
    /// Before's bytes, with [`Detail::Contents`].
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::engine::base64_bytes"
    )]
    #[schemars(with = "String", extend("contentEncoding" = "base64"))]
    pub old_content: Option<Vec<u8>>,
    /// After's bytes, with [`Detail::Contents`].
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::engine::base64_bytes"
    )]
    #[schemars(with = "String", extend("contentEncoding" = "base64"))]
    pub new_content: Option<Vec<u8>>,
    /// With `patch`, a text file's changed lines: its hunks as `cairn diff -p` prints them
    /// (3 lines of context, from the first `@@`); none for a binary file or equal bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
}

impl FileChange {
    /// The path before (none for an added file).
    pub fn old_path(&self) -> Option<&[u8]> {
        match (&self.from, &self.old) {
            (Some(from), _) => Some(from.as_bytes()),
            (None, Some(_)) => Some(self.path.as_bytes()),
            (None, None) => None,
        }
    }

    /// The path after (none for a removed file).
    pub fn new_path(&self) -> Option<&[u8]> {
        match (&self.to, &self.new) {
            (Some(to), _) => Some(to.as_bytes()),
            (None, Some(_)) => Some(self.path.as_bytes()),
            (None, None) => None,
        }
    }
}

/// Totals.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Stats {
    /// Files changed.
    pub files: u64,
    /// Lines added.
    pub insertions: u64,
    /// Lines removed.
    pub deletions: u64,
}

/// SPEC.md's diff object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiffOutcome {
    /// Files added.
    pub added: Vec<FileChange>,
    /// Files removed.
    pub removed: Vec<FileChange>,
    /// Files modified (or changed type).
    pub modified: Vec<FileChange>,
    /// Files renamed.
    pub renamed: Vec<FileChange>,
    /// Totals.
    pub stats: Stats,
    /// A note (paths asked for that nothing changed under), or with `exit_code` the
    /// refusal: how many files differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Whether it is a refusal (`exit_code` and something differs).
    #[serde(default, skip_serializing)]
    pub differ: bool,
}

impl DiffOutcome {
    /// Every change, in path order (as git prints them).
    pub fn changes(&self) -> Vec<&FileChange> {
        let mut all: Vec<&FileChange> = self
            .added
            .iter()
            .chain(&self.removed)
            .chain(&self.modified)
            .chain(&self.renamed)
            .collect();
        // Byte order, as git prints them, not the tree order of `RepoPathBuf`'s `Ord`.
        all.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        all
    }

    /// Whether nothing differs.
    pub fn is_empty(&self) -> bool {
        self.stats.files == 0
    }
}

/// Where a snapshot was captured from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SourceOut {
    /// The directory.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// Its git state.
    pub git: Option<SourceGit>,
}

/// The git state of a snapshot's source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SourceGit {
    /// The commit.
    pub commit: String,
    /// Whether the files differed from it.
    pub dirty: bool,
}

/// One snapshot of a history.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogEntry {
    /// Its id.
    pub id: SnapshotId,
    /// Its tree.
    pub tree: TreeId,
    /// Its parents.
    pub parents: Vec<SnapshotId>,
    /// Its message.
    pub message: String,
    /// `key=value` labels.
    pub labels: Vec<String>,
    /// When it was made (RFC 3339).
    pub created: String,
    /// Where it came from.
    pub source: Option<SourceOut>,
    /// With `stat`: its changes against its first parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stat: Option<DiffOutcome>,
    /// The checks recorded of its tree (`verify`), the newest run of each, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckMark>,
}

/// A check recorded of a tree, as `log` and `show` mark it (`checks` lists it whole).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckMark {
    /// The check's name.
    pub check: String,
    /// Whether its newest run passed.
    pub passed: bool,
    /// The attestation of that run.
    #[schemars(with = "String")]
    pub attestation: cas::AttestationId,
}

/// The checks recorded of `tree`, the newest run of each name, by name: one lookup of the
/// tree's attestations.
pub(crate) fn check_marks(reader: &Reader, tree: TreeId) -> Result<Vec<CheckMark>, Error> {
    let found = reader.attestations(tree).map_err(|e| {
        let code = match e {
            cas::AttestationReadError::Corrupt { .. } => Code::Corrupt,
            _ => Code::Store,
        };
        Error::new(code, e)
    })?;
    let mut newest: std::collections::BTreeMap<
        String,
        (jiff::Timestamp, cas::AttestationId, bool),
    > = std::collections::BTreeMap::new();
    for (id, a) in found {
        let run = (a.started, id, a.exit.passed());
        match newest.get(&a.check) {
            Some(have) if (have.0, have.1) >= (run.0, run.1) => {}
            _ => {
                newest.insert(a.check, run);
            }
        }
    }
    Ok(newest
        .into_iter()
        .map(|(check, (_, attestation, passed))| CheckMark {
            check,
            passed,
            attestation,
        })
        .collect())
}

fn mode(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "100644",
        EntryKind::Executable => "100755",
        EntryKind::Symlink => "120000",
        EntryKind::Tree => "040000",
    }
}

fn kind_name(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File | EntryKind::Executable => "file",
        EntryKind::Symlink => "symlink",
        EntryKind::Tree => "directory",
    }
}

/// A file's bytes: from the store when it has them (verified), else from the live worktree.
fn content(
    reader: &Reader,
    side: &Side,
    path: &RepoPath,
    entry: &FileEntry,
) -> Result<Vec<u8>, Error> {
    if reader.has_blob(entry.id.as_blob())? {
        return Ok(reader.blob(entry.id.as_blob())?);
    }
    let Some(root) = &side.root else {
        return Err(ViewError::BlobMissing { id: entry.id }.into());
    };
    let full = path.to_fs_path(root.as_std_path());
    let io = |e: std::io::Error| Error::from(IoError::new(full.display(), e));
    // Through handles where the absolute path is longer than the system takes.
    if entry.kind == EntryKind::Symlink {
        fs_manager::read_live_link(root.as_std_path(), path.as_bytes()).map_err(io)
    } else {
        fs_manager::read_live_file(root.as_std_path(), path.as_bytes()).map_err(io)
    }
}

fn entry_side(e: &FileEntry) -> EntrySide {
    EntrySide {
        blob: e.id,
        mode: mode(e.kind).to_owned(),
        kind: kind_name(e.kind).to_owned(),
        size: e.size,
    }
}

fn file_change(
    d: FileDiff,
    counts: (u64, u64),
    binary: bool,
    bytes: Option<(Vec<u8>, Vec<u8>)>,
    patch: Option<String>,
) -> FileChange {
    let renamed = d.status == Status::Renamed;
    let (old_content, new_content) = match bytes {
        Some((o, n)) => (Some(o), Some(n)),
        None => (None, None),
    };
    FileChange {
        path: d.path().to_owned(),
        status: d.status.letter().to_owned(),
        old: d.old.as_ref().map(entry_side),
        new: d.new.as_ref().map(entry_side),
        old_blob: d.old.map(|e| e.id),
        new_blob: d.new.map(|e| e.id),
        old_mode: d.old.map(|e| mode(e.kind).to_owned()),
        new_mode: d.new.map(|e| mode(e.kind).to_owned()),
        kind: d.new.or(d.old).map(|e| kind_name(e.kind).to_owned()),
        size: d.new.or(d.old).map(|e| e.size),
        binary,
        insertions: counts.0,
        deletions: counts.1,
        from: renamed.then(|| d.old_path.clone().unwrap_or_default()),
        to: renamed.then(|| d.new_path.clone().unwrap_or_default()),
        old_content,
        new_content,
        patch,
    }
}

/// Lines of context around a hunk of a [`FileChange::patch`], as `git diff` has.
pub const PATCH_CONTEXT: u32 = 3;

/// Everything that differs between two sides, filtered by `paths` (tree paths; a
/// directory names everything below it), read as deep as `detail` says; with `patch`,
/// each text file's hunks too.
pub(crate) fn compare(
    reader: &Reader,
    a: &Side,
    b: &Side,
    paths: &[RepoPathBuf],
    detail: Detail,
    patch: bool,
) -> Result<DiffOutcome, Error> {
    let mut memory = a.memory.clone();
    memory.extend(b.memory.iter().map(|(k, v)| (*k, v.clone())));
    let trees = diff::Overlay {
        memory: &memory,
        store: reader,
    };
    let changes = diff::tree_changes(&trees, Some(a.tree), Some(b.tree))?;
    let under = |p: &RepoPathBuf| paths.is_empty() || paths.iter().any(|f| p.starts_with(f));
    let asked: Vec<_> = diff::classify(changes)
        .into_iter()
        .filter(|d| {
            d.old_path.as_ref().is_some_and(under) || d.new_path.as_ref().is_some_and(under)
        })
        .collect();
    // Reading both sides and diffing their lines is each file's own work: in parallel.
    let changes: Vec<FileChange> = asked
        .into_par_iter()
        .map(|d| -> Result<FileChange, Error> {
            if detail == Detail::Names && !patch {
                return Ok(file_change(d, (0, 0), false, None, None));
            }
            let old_bytes = match (&d.old, &d.old_path) {
                (Some(e), Some(p)) => content(reader, a, p, e)?,
                _ => Vec::new(),
            };
            let new_bytes = match (&d.new, &d.new_path) {
                (Some(e), Some(p)) => content(reader, b, p, e)?,
                _ => Vec::new(),
            };
            let binary = diff::text::is_binary(&old_bytes) || diff::text::is_binary(&new_bytes);
            let (counts, hunks) = if binary || d.status == Status::Renamed {
                ((0, 0), None)
            } else {
                let ld = LineDiff::new(&old_bytes, &new_bytes);
                let hunks = (patch && old_bytes != new_bytes).then(|| {
                    let mut text = Vec::new();
                    ld.write_hunks(PATCH_CONTEXT, &diff::text::Palette::PLAIN, &mut text);
                    String::from_utf8_lossy(&text).into_owned()
                });
                ((ld.insertions(), ld.deletions()), hunks)
            };
            let bytes = (detail == Detail::Contents).then_some((old_bytes, new_bytes));
            Ok(file_change(d, counts, binary, bytes, hunks))
        })
        .collect::<Result<_, _>>()?;
    let mut out = DiffOutcome::default();
    for change in changes {
        out.stats.files += 1;
        out.stats.insertions += change.insertions;
        out.stats.deletions += change.deletions;
        let group = match change.status.as_str() {
            "A" => &mut out.added,
            "D" => &mut out.removed,
            "R100" => &mut out.renamed,
            _ => &mut out.modified,
        };
        group.push(change);
    }
    Ok(out)
}

/// Resolves `spec`: an existing directory is a worktree's live files; anything else a
/// snapshot (ref name or id prefix).
pub(crate) fn side(
    worktrees: &fs_manager::Worktrees,
    store: &Store,
    reader: &Reader,
    cwd: &Utf8Path,
    spec: &str,
) -> Result<Side, Error> {
    let path = absolute(cwd, Utf8Path::new(spec));
    if path.is_dir() {
        let live = worktrees.live_state(store, &path, &fs_manager::CaptureOptions::default())?;
        return Ok(Side {
            tree: live.tree,
            memory: live.trees,
            root: Some(live.root),
        });
    }
    let id = resolve_snapshot(reader, cwd, spec)?;
    Ok(Side::stored(reader.snapshot(id)?.tree))
}

/// Every change from stored tree `old` to stored tree `new` (either may be the empty
/// tree), with line counts: `log --stat`'s and `compare`'s summary, counted as `diff`'s.
pub(crate) fn stored_changes(
    reader: &Reader,
    old: TreeId,
    new: TreeId,
) -> Result<DiffOutcome, Error> {
    let empty = cas::Tree::default();
    let side = |tree| Side {
        tree,
        memory: [(empty.id(), empty.clone())].into(),
        root: None,
    };
    compare(reader, &side(old), &side(new), &[], Detail::Counts, false)
}

/// One snapshot as `log` shows it; with `stat`, its changes against its first parent (a
/// root snapshot against the empty tree; none when gc pruned that parent).
pub(crate) fn log_entry(
    reader: &Reader,
    id: SnapshotId,
    snap: cas::Snapshot,
    stat: bool,
) -> Result<LogEntry, Error> {
    let parent_pruned = match snap.parents.first() {
        Some(p) => reader.pruned(*p)?,
        None => false,
    };
    let stat = if stat && !parent_pruned {
        let parent_tree = match snap.parents.first() {
            Some(p) => reader.snapshot(*p)?.tree,
            None => cas::Tree::default().id(),
        };
        Some(stored_changes(reader, parent_tree, snap.tree)?)
    } else {
        None
    };
    Ok(LogEntry {
        id,
        tree: snap.tree,
        parents: snap.parents,
        labels: snap
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        created: snap.created.to_string(),
        source: snap.source.map(|s| SourceOut {
            path: s.path,
            git: s.git.map(|g| SourceGit {
                commit: g.commit,
                dirty: g.dirty,
            }),
        }),
        message: snap.message,
        stat,
        checks: check_marks(reader, snap.tree)?,
    })
}

/// The head of the worktree at `dir` (exactly, or the registered worktree containing it).
pub(crate) fn worktree_head(
    reader: &Reader,
    dir: &Utf8Path,
    exact: bool,
) -> Result<Option<SnapshotId>, Error> {
    let worktrees = reader.worktrees()?;
    let found = worktrees
        .iter()
        .filter(|w| {
            if exact {
                w.root == dir
            } else {
                dir.starts_with(&w.root)
            }
        })
        .max_by_key(|w| w.root.as_str().len());
    match found {
        Some(w) => Ok(w.head),
        None if exact => Err(ArgumentError::NotAWorktree {
            dir: dir.to_owned(),
        }
        .into()),
        None => Err(ArgumentError::NotInAWorktree {
            dir: dir.to_owned(),
        }
        .into()),
    }
}

/// Why a file's content cannot be read for a diff.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// A blob neither the store nor the live worktree has.
    #[error("blob {id} is missing from the store")]
    BlobMissing {
        /// The blob.
        id: ObjectId,
    },
}

crate::error::coded!(ViewError);

impl ViewError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            ViewError::BlobMissing { .. } => Code::Corrupt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn added(path: &str) -> FileChange {
        FileChange {
            path: RepoPathBuf::new(path).expect("a repo path"),
            status: "A".to_owned(),
            old: None,
            new: None,
            old_blob: None,
            new_blob: None,
            old_mode: None,
            new_mode: None,
            kind: None,
            size: None,
            binary: false,
            insertions: 0,
            deletions: 0,
            from: None,
            to: None,
            old_content: None,
            new_content: None,
            patch: None,
        }
    }

    #[test]
    fn changes_are_in_byte_order_as_git_prints_them() {
        // Tree order would put `a/b` first ('/' before every byte); git's is by bytes.
        let outcome = DiffOutcome {
            added: vec![added("a/b"), added("a-b"), added("a")],
            ..DiffOutcome::default()
        };
        let order: Vec<String> = outcome
            .changes()
            .iter()
            .map(|c| c.path.to_string())
            .collect();
        assert_eq!(order, ["a", "a-b", "a/b"]);
    }
}
