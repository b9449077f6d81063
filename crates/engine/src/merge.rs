//! `merge`: bring a snapshot back into the git repository it came from.

use camino::Utf8PathBuf;
use cas::SnapshotId;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::Error;
use crate::git::GitMerge;
use crate::path::RawPath;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::worktrees::canonical_dir as canonical;

/// `merge SNAP --into REPO [--base SNAP] [--branch B] [--checkout] [-m MSG]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MergeOptions {
    /// The snapshot to merge.
    #[schemars(extend("x-snapshot" = true))]
    pub snapshot: String,
    /// The git repository.
    #[schemars(with = "String")]
    pub into: Utf8PathBuf,
    /// The common ancestor (default: the nearest ancestor onboarded from the repository).
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true, "x-snapshot" = true))]
    pub base: Option<String>,
    /// The branch to create.
    #[serde(default)]
    pub branch: Option<String>,
    /// Commit to the current branch and update its files.
    #[serde(default)]
    pub checkout: bool,
    /// Commit message.
    #[serde(default)]
    pub message: Option<String>,
}

impl MergeOptions {
    /// Merge `snapshot` into the repository `into`, on a new branch.
    pub fn new(snapshot: impl Into<String>, into: impl Into<Utf8PathBuf>) -> MergeOptions {
        MergeOptions {
            snapshot: snapshot.into(),
            into: into.into(),
            ..MergeOptions::default()
        }
    }
}

/// A conflicting path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergeConflictOut {
    /// The path.
    pub path: RawPath,
    /// `content`, `add/add`, `modify/delete`, `type`, `rename`, `binary`.
    pub kind: String,
}

/// What `merge` did: a commit, or conflicts or dirty paths and nothing written (a refusal).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergeOutcome {
    /// Whether a commit was made.
    pub merged: bool,
    /// The commit.
    pub commit: Option<String>,
    /// Its branch.
    pub branch: Option<String>,
    /// The common ancestor used.
    pub base: SnapshotId,
    /// Conflicting paths.
    pub conflicts: Vec<MergeConflictOut>,
    /// Paths with uncommitted changes the merge must change.
    pub dirty: Vec<RawPath>,
    /// For an onboarded repository merged with `checkout`: its new snapshot.
    pub worktree_snapshot: Option<SnapshotId>,
    /// The snapshot merged.
    pub snapshot: SnapshotId,
    /// The repository.
    #[schemars(with = "String")]
    pub repository: Utf8PathBuf,
    /// The refusal, when nothing was merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Engine {
    /// `cairn merge SNAP --into REPO`.
    pub fn merge(&self, call: &Call, options: MergeOptions) -> Result<MergeOutcome, Error> {
        let repo = canonical(&call.path(&options.into))?;
        let git = self.git_for(&repo)?;
        let store = self.store(Access::Write)?;
        // `--checkout` writes the repository's working files: never in or around the store.
        if options.checkout {
            fs_manager::check_apart(&store, &repo)?;
        }
        let (snapshot, base) = {
            let reader = store.reader()?;
            let snapshot = resolve_snapshot(&reader, &call.cwd, &options.snapshot)?;
            let base = options
                .base
                .as_deref()
                .map(|b| resolve_snapshot(&reader, &call.cwd, b))
                .transpose()?;
            (snapshot, base)
        };
        // Merging into an onboarded repository's files: capture them first, so edits never
        // snapshotted are kept and `undo` of the merge restores exactly them.
        let registered = options.checkout
            && fs_manager::find_worktree(&store.reader()?, &repo)?.is_some_and(|r| r.root == repo);
        if registered {
            let capture = fs_manager::CaptureOptions {
                message: "live state before merge",
                ..fs_manager::CaptureOptions::default()
            };
            self.worktrees
                .record_change(&store, &repo, "capture", &capture)?;
        }
        let merge = GitMerge {
            repo: &repo,
            snapshot,
            base,
            branch: options.branch.as_deref(),
            message: options.message.as_deref(),
            checkout: options.checkout,
        };
        let out = git.merge(&store, &merge)?;
        // The merge changed an onboarded repository's files: record that in its op log.
        let mut recorded = None;
        if registered && out.commit.is_some() {
            let message = format!("merge of {}", snapshot.short(12));
            let capture = fs_manager::CaptureOptions {
                message: &message,
                ..fs_manager::CaptureOptions::default()
            };
            recorded = Some(
                self.worktrees
                    .record_change(&store, &repo, "merge", &capture)?
                    .snapshot,
            );
        }
        let message = match &out.commit {
            Some(_) => None,
            None if !out.dirty.is_empty() => Some(format!(
                "{repo}: {} path(s) the merge must change have uncommitted changes; nothing was written",
                out.dirty.len()
            )),
            None => Some(format!(
                "{repo}: merging snapshot {snapshot} conflicts in {} path(s); the repository is unchanged",
                out.conflicts.len()
            )),
        };
        let (commit, branch) = match out.commit {
            Some((c, b)) => (Some(c), Some(b)),
            None => (None, None),
        };
        Ok(MergeOutcome {
            merged: commit.is_some(),
            commit,
            branch,
            base: out.base,
            conflicts: out
                .conflicts
                .into_iter()
                .map(|(path, kind)| MergeConflictOut {
                    path: RawPath::from(path),
                    kind,
                })
                .collect(),
            dirty: out.dirty.into_iter().map(RawPath::from).collect(),
            worktree_snapshot: recorded,
            snapshot,
            repository: repo,
            message,
        })
    }
}

// What each verb of this module says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Three-way merge a snapshot into the git repository it came from, as a commit on a new branch (or with checkout: the current branch, index and files). Conflicts are reported and the repository is left exactly as it was.
    Merge(MergeOptions) -> MergeOutcome = "merge" via merge [Route, Tool];
}

impl VerbSpec for verbs::Merge {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        std::iter::once(options.snapshot.as_str())
            .chain(options.base.as_deref())
            .collect()
    }

    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        outcome.message.as_deref()
    }

    const REFUSED: Option<&'static str> = Some(
        "A negative answer, nothing changed: conflicts (`conflicts`), or uncommitted changes in paths the merge must change (`dirty`); the repository is unchanged; `message` says why.",
    );

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"snapshot": "base", "into": "repo", "cwd": "/home/agent/project"}"#);
}
