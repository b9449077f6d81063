//! `onboard SRC --git REV`: the tree of a git commit as a snapshot (no worktree).

use camino::Utf8PathBuf;
use cas::{SnapshotId, TreeId};
use fs_manager::RegistryWrite as _;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, labels};
use crate::error::Error;
use crate::git::GitImport;
use crate::path::RawPath;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::worktrees::{GitState, SkippedPath, canonical_dir};

/// `onboard --git REV`: the tree of a commit as a snapshot (no worktree).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportOptions {
    /// The git repository.
    #[schemars(with = "String")]
    pub src: Utf8PathBuf,
    /// The revision.
    pub rev: String,
    /// Snapshot message (default `import of REV`).
    #[serde(default)]
    pub message: Option<String>,
    /// `key=value` labels.
    #[serde(default)]
    pub labels: Vec<String>,
    /// Keep deny-pattern paths.
    #[serde(default)]
    pub include_denied: bool,
}

/// What an import did.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImportOutcome {
    /// The snapshot.
    pub snapshot: SnapshotId,
    /// Its tree.
    pub tree: TreeId,
    /// Files.
    pub files: u64,
    /// Bytes.
    pub bytes: u64,
    /// Paths left out.
    pub skipped: Vec<SkippedPath>,
    /// The commit imported.
    pub source: GitState,
    /// The repository, as found.
    #[schemars(with = "String")]
    pub repository: Utf8PathBuf,
}

impl Engine {
    /// `cairn onboard SRC --git REV`.
    pub fn import(&self, call: &Call, options: ImportOptions) -> Result<ImportOutcome, Error> {
        let labels = labels(&options.labels)?;
        let repo = canonical_dir(&call.path(&options.src))?;
        let git = self.git_for(&repo)?;
        let store = self.store(Access::Create)?;
        let message = options
            .message
            .clone()
            .unwrap_or_else(|| format!("import of {}", options.rev));
        let deny = if options.include_denied {
            path_policy::DenyList::nothing()
        } else {
            path_policy::DenyList::load(store.root().as_std_path(), repo.as_std_path())
                .map_err(crate::error::ConfigError::Deny)?
        };
        let import = GitImport {
            repo: &repo,
            rev: &options.rev,
            message: &message,
            labels: &labels,
            deny: &deny,
            records: &|batch, id| {
                let op = fs_manager::OpRecord::new("import", None, Some(id));
                Ok(batch.append_op(&repo, &op)?)
            },
        };
        let out = git.import(&store, &import)?;
        Ok(ImportOutcome {
            snapshot: out.snapshot,
            tree: out.tree,
            files: out.files,
            bytes: out.bytes,
            skipped: out
                .skipped
                .into_iter()
                .map(|(path, reason)| SkippedPath {
                    path: RawPath::from(path),
                    reason,
                    denied_by: None,
                })
                .collect(),
            source: GitState {
                git_commit: out.commit,
                dirty: false,
            },
            repository: repo,
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Snapshot a git revision of a repository, without a worktree.
    Import(ImportOptions) -> ImportOutcome = "import" via import [];
}

impl VerbSpec for verbs::Import {}
