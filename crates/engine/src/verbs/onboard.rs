//! `onboard SRC`: a directory snapshotted and registered as an in-place worktree.

use camino::{Utf8Path, Utf8PathBuf};
use cas::{SnapshotId, TreeId};
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, labels};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::worktrees::{GitState, SkippedPath, skipped};

/// `onboard`: snapshot a directory and register it as an in-place worktree.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OnboardOptions {
    /// The directory.
    #[schemars(with = "String")]
    pub src: Utf8PathBuf,
    /// Snapshot message (default `onboard`).
    #[serde(default)]
    pub message: Option<String>,
    /// `key=value` labels.
    #[serde(default)]
    pub labels: Vec<String>,
    /// Keep deny-pattern paths in scope.
    #[serde(default)]
    pub include_denied: bool,
    /// Leave out files larger than this.
    #[serde(default, deserialize_with = "crate::engine::whole_number::deserialize")]
    pub max_file_size: Option<u64>,
}

impl OnboardOptions {
    /// Onboard `src` with the defaults.
    pub fn new(src: impl Into<Utf8PathBuf>) -> OnboardOptions {
        OnboardOptions {
            src: src.into(),
            ..OnboardOptions::default()
        }
    }
}

/// What `onboard` did.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OnboardOutcome {
    /// The worktree's root.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The snapshot.
    pub snapshot: SnapshotId,
    /// Its tree.
    pub tree: TreeId,
    /// Whether it differs from the worktree's previous head.
    pub changed: bool,
    /// Files captured.
    pub files: u64,
    /// Bytes captured.
    pub bytes: u64,
    /// Paths left out.
    pub skipped: Vec<SkippedPath>,
    /// The git state of the directory, if it is a git repository.
    pub source: Option<GitState>,
}

impl Engine {
    /// `cairn onboard SRC`.
    pub fn onboard(&self, call: &Call, options: OnboardOptions) -> Result<OnboardOutcome, Error> {
        let labels = labels(&options.labels)?;
        let store = self.store(Access::Create)?;
        let message = options.message.as_deref().unwrap_or("onboard");
        let source = |dir: &Utf8Path| self.git().and_then(|g| g.source(dir));
        let onboard = fs_manager::WorktreeOnboardOptions {
            capture: fs_manager::CaptureOptions {
                message,
                labels: &labels,
                progress: call.progress,
                ..fs_manager::CaptureOptions::default()
            },
            include_denied: options.include_denied,
            max_file_size: options.max_file_size,
            git: self
                .git()
                .is_some()
                .then_some(&source as fs_manager::GitProbe),
        };
        let out = self
            .worktrees
            .onboard(&store, &call.path(&options.src), &onboard)?;
        Ok(OnboardOutcome {
            worktree: out.root,
            snapshot: out.snapshot,
            tree: out.tree,
            changed: out.changed,
            files: out.files,
            bytes: out.bytes,
            skipped: skipped(&out.skipped),
            source: out.source.map(|g| GitState {
                git_commit: g.commit,
                dirty: g.dirty,
            }),
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Snapshot a directory and register it as an in-place worktree.
    Onboard(OnboardOptions) -> OnboardOutcome = "onboard" via onboard [];
}

impl VerbSpec for verbs::Onboard {}
