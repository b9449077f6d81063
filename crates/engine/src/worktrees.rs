//! `onboard`, `snapshot`, `checkout`, `rollback`, `worktree list|remove|rebind`.

use camino::{Utf8Path, Utf8PathBuf};
use cas::{SnapshotId, TreeId};
use fs_manager::RegistryWrite as _;
use path_policy::RepoPathBuf;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, labels, registered, resolve_in, resolve_snapshot};
use crate::error::Error;
use crate::git::GitImport;
use crate::path::{PathArg, RawPath, tree_paths};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// A path left out of a capture, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SkippedPath {
    /// From the worktree root.
    pub path: RawPath,
    /// Why.
    pub reason: String,
    /// For a path a deny pattern matched (a secret such as `.env`): the pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied_by: Option<String>,
}

pub(crate) fn skipped(list: &[fs_manager::Skipped]) -> Vec<SkippedPath> {
    list.iter()
        .map(|s| SkippedPath {
            path: RawPath::from(s.path.clone()),
            reason: s.reason.to_string(),
            denied_by: match &s.reason {
                fs_manager::SkipReason::Denied { pattern } => Some(pattern.clone()),
                _ => None,
            },
        })
        .collect()
}

/// The git state of a captured directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitState {
    /// The commit checked out.
    pub git_commit: String,
    /// Whether the files differed from it.
    pub dirty: bool,
}

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

/// `snapshot`: a new snapshot of a worktree, parent = its head.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotOptions {
    /// The worktree directory.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Snapshot message.
    #[serde(default)]
    pub message: Option<String>,
    /// `key=value` labels.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub labels: Vec<String>,
}

impl SnapshotOptions {
    /// Snapshot `worktree`.
    pub fn new(worktree: impl Into<Utf8PathBuf>) -> SnapshotOptions {
        SnapshotOptions {
            worktree: worktree.into(),
            ..SnapshotOptions::default()
        }
    }

    /// With this message.
    pub fn message(mut self, message: impl Into<String>) -> SnapshotOptions {
        self.message = Some(message.into());
        self
    }
}

/// What `snapshot` made.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SnapshotOutcome {
    /// The snapshot (the head, if nothing changed).
    pub snapshot: SnapshotId,
    /// Its tree.
    pub tree: TreeId,
    /// Its parent.
    pub parent: Option<SnapshotId>,
    /// Whether anything changed.
    pub changed: bool,
    /// Files added.
    pub added: u64,
    /// Files modified.
    pub modified: u64,
    /// Files removed.
    pub removed: u64,
    /// Paths left out.
    pub skipped: Vec<SkippedPath>,
}

impl SnapshotOutcome {
    /// The outcome of the capture `out`.
    pub(crate) fn of(out: &fs_manager::CaptureOutcome) -> SnapshotOutcome {
        SnapshotOutcome {
            snapshot: out.snapshot,
            tree: out.tree,
            parent: out.parent,
            changed: out.changed,
            added: out.added,
            modified: out.modified,
            removed: out.removed,
            skipped: skipped(&out.skipped),
        }
    }
}

/// `checkout`: hydrate a snapshot into a new or empty directory.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckoutOptions {
    /// Snapshot id prefix, ref or checkpoint name.
    #[schemars(extend("x-snapshot" = true))]
    pub snapshot: String,
    /// The destination directory.
    #[schemars(with = "String")]
    pub dest: Utf8PathBuf,
}

impl CheckoutOptions {
    /// Check `snapshot` out into `dest`.
    pub fn new(snapshot: impl Into<String>, dest: impl Into<Utf8PathBuf>) -> CheckoutOptions {
        CheckoutOptions {
            snapshot: snapshot.into(),
            dest: dest.into(),
        }
    }
}

/// What `checkout` wrote.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckoutOutcome {
    /// The new worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The snapshot.
    pub snapshot: SnapshotId,
    /// Files written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// `rollback`: make a worktree's scope equal a snapshot.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackOptions {
    /// The worktree directory.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Snapshot id prefix, ref or checkpoint name.
    #[schemars(extend("x-snapshot" = true))]
    pub snapshot: String,
    /// Only list what would change.
    #[serde(default)]
    pub dry_run: bool,
    /// Paths relative to the worktree root.
    #[serde(default)]
    pub paths: Vec<PathArg>,
}

/// What `rollback` (or `rewind`) changed.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RollbackOutcome {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The snapshot rolled back to.
    pub snapshot: SnapshotId,
    /// The live state captured first.
    pub captured: SnapshotId,
    /// Files written.
    pub written: Vec<RepoPathBuf>,
    /// Files deleted.
    pub deleted: Vec<RepoPathBuf>,
    /// Paths left out.
    pub skipped: Vec<SkippedPath>,
    /// Whether nothing was changed.
    pub dry_run: bool,
}

impl RollbackOutcome {
    pub(crate) fn of(out: &fs_manager::WorktreeRollbackOutcome, dry_run: bool) -> RollbackOutcome {
        RollbackOutcome {
            worktree: out.root.clone(),
            snapshot: out.snapshot,
            captured: out.captured,
            written: out.written.clone(),
            deleted: out.deleted.clone(),
            skipped: skipped(&out.skipped),
            dry_run,
        }
    }
}

/// `worktree list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorktreeListOptions {}

/// A registered worktree.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorktreeItem {
    /// Its root.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// `in-place`, `isolated` or `mounted`.
    pub kind: String,
    /// Its head.
    pub head: Option<SnapshotId>,
    /// For a mounted worktree, whether its mount is live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<bool>,
    /// For a mounted worktree, whether it is mounted read-only (`mount --read-only`, kept
    /// for every attach).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
}

/// The registry.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorktreeListOutcome {
    /// Every worktree.
    pub worktrees: Vec<WorktreeItem>,
}

/// `worktree remove` / `worktree rebind`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorktreePathOptions {
    /// The worktree's root.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
}

/// A worktree and its head.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorktreeHead {
    /// Its root.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// Its head.
    pub head: Option<SnapshotId>,
}

/// The worktree removed or rebound.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorktreesChanged {
    /// It.
    pub worktrees: Vec<WorktreeHead>,
}

impl WorktreesChanged {
    fn one(record: fs_manager::WorktreeRecord) -> WorktreesChanged {
        WorktreesChanged {
            worktrees: vec![WorktreeHead {
                path: record.root,
                head: record.head,
            }],
        }
    }
}

pub(crate) use crate::path::canonical_dir;

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

    /// `cairn snapshot WORKTREE`.
    pub fn snapshot(
        &self,
        call: &Call,
        options: SnapshotOptions,
    ) -> Result<SnapshotOutcome, Error> {
        let labels = labels(&options.labels)?;
        let store = self.store(Access::Create)?;
        let capture = fs_manager::CaptureOptions {
            message: options.message.as_deref().unwrap_or(""),
            labels: &labels,
            progress: call.progress,
            ..fs_manager::CaptureOptions::default()
        };
        let out = self
            .worktrees
            .snapshot(&store, &call.path(&options.worktree), &capture)?;
        Ok(SnapshotOutcome::of(&out))
    }

    /// `cairn checkout SNAP DEST`.
    pub fn checkout(
        &self,
        call: &Call,
        options: CheckoutOptions,
    ) -> Result<CheckoutOutcome, Error> {
        let store = self.store(Access::Write)?;
        let id = resolve_snapshot(&store.reader()?, &call.cwd, &options.snapshot)?;
        let out = self.worktrees.checkout(
            &store,
            id,
            &call.path(&options.dest),
            &fs_manager::WorktreeCheckoutOptions {
                progress: call.progress,
            },
        )?;
        Ok(CheckoutOutcome {
            worktree: out.worktree,
            snapshot: out.snapshot,
            files: out.files,
            bytes: out.bytes,
        })
    }

    /// `cairn rollback WORKTREE SNAP [--dry-run] [-- PATH…]`.
    pub fn rollback(
        &self,
        call: &Call,
        options: RollbackOptions,
    ) -> Result<RollbackOutcome, Error> {
        let store = self.store(Access::Write)?;
        let worktree = call.path(&options.worktree);
        let reader = store.reader()?;
        let record = registered(&reader, &worktree)?;
        let target = resolve_in(&reader, &record, &options.snapshot)?;
        drop(reader);
        let paths = tree_paths(Some(&record.root), &options.paths)?;
        let rollback = fs_manager::WorktreeRollbackOptions {
            paths: &paths,
            dry_run: options.dry_run,
            progress: call.progress,
            ..fs_manager::WorktreeRollbackOptions::default()
        };
        let out = self
            .worktrees
            .rollback(&store, &record.root, target, &rollback)?;
        Ok(RollbackOutcome::of(&out, options.dry_run))
    }

    /// `cairn worktree list`.
    pub fn worktree_list(
        &self,
        _call: &Call,
        _options: WorktreeListOptions,
    ) -> Result<WorktreeListOutcome, Error> {
        let store = self.store(Access::Read)?;
        let records = fs_manager::list_worktrees(&store)?;
        let worktrees = records
            .into_iter()
            .map(|r| WorktreeItem {
                kind: match r.kind {
                    fs_manager::WorktreeKind::InPlace => "in-place",
                    fs_manager::WorktreeKind::Isolated => "isolated",
                    fs_manager::WorktreeKind::Mounted => "mounted",
                }
                .to_owned(),
                live: (r.kind == fs_manager::WorktreeKind::Mounted)
                    .then(|| self.is_mounted(&r.root)),
                read_only: (r.kind == fs_manager::WorktreeKind::Mounted)
                    .then_some(r.mount_read_only),
                path: r.root,
                head: r.head,
            })
            .collect();
        Ok(WorktreeListOutcome { worktrees })
    }

    /// `cairn worktree remove PATH`: forget a worktree (its files stay).
    pub fn worktree_remove(
        &self,
        call: &Call,
        options: WorktreePathOptions,
    ) -> Result<WorktreesChanged, Error> {
        let path = call.path(&options.path);
        // No `mount` of it meanwhile attaches the layer this removes.
        let mut claim = self.mounts.claim(&path);
        if self.is_mounted(&path) {
            self.unmount_claimed(&path, false, &mut claim)?;
        }
        let store = self.store(Access::Write)?;
        let record = self.worktrees.remove(&store, &path)?;
        if record.kind == fs_manager::WorktreeKind::Mounted {
            self.drop_layer(&record.root);
        }
        Ok(WorktreesChanged::one(record))
    }

    /// `cairn worktree rebind PATH`: the worktree's root is the directory there now.
    pub fn worktree_rebind(
        &self,
        call: &Call,
        options: WorktreePathOptions,
    ) -> Result<WorktreesChanged, Error> {
        let store = self.store(Access::Write)?;
        let record = self.worktrees.rebind(&store, &call.path(&options.path))?;
        Ok(WorktreesChanged::one(record))
    }
}

// What each verb of this module says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Snapshot a directory and register it as an in-place worktree.
    Onboard(OnboardOptions) -> OnboardOutcome = "onboard" via onboard [];
    /// Snapshot a git revision of a repository, without a worktree.
    Import(ImportOptions) -> ImportOutcome = "import" via import [];
    /// Snapshot a worktree: a new immutable snapshot whose parent is its head (changed: false if nothing changed). Returns the snapshot id to pass to other agents.
    Snapshot(SnapshotOptions) -> SnapshotOutcome = "snapshot" via snapshot [Route, Tool];
    /// Hydrate a snapshot into a new or empty directory and register it as an isolated worktree.
    Checkout(CheckoutOptions) -> CheckoutOutcome = "checkout" via checkout [Route, Tool];
    /// Make a worktree equal a snapshot (only the given paths, if any). The live state is captured first, so `undo` brings it back.
    Rollback(RollbackOptions) -> RollbackOutcome = "rollback" via rollback [Route, Tool];
    /// The worktrees the store knows.
    WorktreeList(WorktreeListOptions) -> WorktreeListOutcome = "worktree_list" via worktree_list [];
    /// Forget a worktree (its files stay).
    WorktreeRemove(WorktreePathOptions) -> WorktreesChanged = "worktree_remove" via worktree_remove [];
    /// Register a moved worktree at its new path.
    WorktreeRebind(WorktreePathOptions) -> WorktreesChanged = "worktree_rebind" via worktree_rebind [];
}

impl VerbSpec for verbs::Onboard {}

impl VerbSpec for verbs::Import {}

impl VerbSpec for verbs::Snapshot {
    const EXAMPLE: Option<&'static str> = Some(
        r#"{"worktree": "wt", "message": "before the refactor", "cwd": "/home/agent/project"}"#,
    );
}

impl VerbSpec for verbs::Checkout {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        vec![&options.snapshot]
    }

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"snapshot": "base", "dest": "wt-copy", "cwd": "/home/agent/project"}"#);
}

impl VerbSpec for verbs::Rollback {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        vec![&options.snapshot]
    }

    const EXAMPLE: Option<&'static str> = Some(
        r#"{"worktree": "wt", "snapshot": "base", "dry_run": true, "cwd": "/home/agent/project"}"#,
    );
}

impl VerbSpec for verbs::WorktreeList {}

impl VerbSpec for verbs::WorktreeRemove {}

impl VerbSpec for verbs::WorktreeRebind {}
