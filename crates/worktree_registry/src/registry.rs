//! The worktree registry, op logs and stat caches: the worktree crates' side tables in the store
//! (`cas` keeps their bytes and commits them with the objects they name). Records are JSON so
//! later fields can be added with defaults without a format change.
//!
//! [`RegistryRead`] and [`RegistryWrite`] read and write them through a store's `Reader` and
//! `WriteBatch`; [`Registry`] tells `gc` and `fsck` what they keep alive.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{Format1Keys, Format1Table, Reader, SideTable, SnapshotId, StorageFailure, WriteBatch};

/// Worktree root → JSON [`WorktreeRecord`] (key `""`).
pub const WORKTREES: SideTable = SideTable::new("fs.worktrees");
/// Worktree root, sequence number → JSON [`OpRecord`].
pub const OPLOG: SideTable = SideTable::new("fs.oplog");
/// Worktree root, directory key → the stat cache of that directory (see `dirstate`).
pub const FILE_STATES: SideTable = SideTable::new("fs.file_states");

/// Where a format 1 store kept these tables, so opening one moves them here
/// ([`cas::OpenOptions::format_1_tables`]).
pub const FORMAT_1_TABLES: [Format1Table; 3] = [
    Format1Table {
        name: "worktrees",
        keys: Format1Keys::Scope,
        now: WORKTREES,
    },
    Format1Table {
        name: "oplog",
        keys: Format1Keys::Sequence,
        now: OPLOG,
    },
    Format1Table {
        name: "file_states",
        keys: Format1Keys::ScopedBytes,
        now: FILE_STATES,
    },
];

/// A registry record could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A record could not be decoded.
    #[error("registry record for {root} is corrupt: {reason}")]
    Corrupt {
        /// The worktree root.
        root: Utf8PathBuf,
        /// Why.
        reason: String,
        /// The decoding error `reason` tells of, when there is one.
        #[source]
        source: Option<serde_json::Error>,
    },
    /// A record could not be encoded.
    #[error("encoding the registry record for {root}: {source}")]
    Encode {
        /// The worktree root.
        root: Utf8PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// The database failed.
    #[error(transparent)]
    Storage(#[from] StorageFailure),
}

/// How a worktree came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorktreeKind {
    /// A user's directory, onboarded where it is.
    InPlace,
    /// A directory hydrated by `checkout`.
    Isolated,
    /// A copy-on-write view of a snapshot served by `cairn mount`; its files live in the
    /// store's layer for it.
    Mounted,
}

/// A registered worktree.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorktreeRecord {
    /// Absolute path of the worktree root.
    pub root: Utf8PathBuf,
    /// How it was created.
    pub kind: WorktreeKind,
    /// Its current snapshot.
    pub head: Option<SnapshotId>,
    /// Whether deny-pattern paths (secrets) are in scope for it.
    #[serde(default)]
    pub include_denied: bool,
    /// When it was registered.
    pub created: jiff::Timestamp,
    /// Its checkpoints, oldest first; names are unique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<Checkpoint>,
    /// The task under way, if a checkpoint started one that was not yet accepted or
    /// discarded as a whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Task>,
    /// Files larger than this many bytes are left out of captures (and reported); no cap if
    /// `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_size: Option<u64>,
    /// The root directory's identity when it was registered (or rebound): a root that is
    /// now another directory, swapped in behind cairn's back, is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<DirIdentity>,
    /// For a mounted worktree, the snapshot its layer applies to (kept while the layer is,
    /// so the mount can be attached again whatever `gc` prunes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_base: Option<SnapshotId>,
    /// For a mounted worktree, whether it was mounted `--read-only`: every later attach of
    /// its layer refuses changes too. Records from before it was kept read as writable.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mount_read_only: bool,
    /// For a mounted worktree of a snapshot only a remote held, that remote: its files are
    /// fetched from it when first read, on every attach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_remote: Option<String>,
    /// What `cairn run` of this worktree may do beyond writing inside it (`cairn policy`).
    #[serde(default, skip_serializing_if = "SandboxGrants::is_empty")]
    pub grants: SandboxGrants,
    /// Grants asked for through MCP or HTTP, waiting for a person's decision.
    #[serde(default, skip_serializing_if = "GrantRequests::is_empty")]
    pub requests: GrantRequests,
    /// The dependency layers attached to it: never captured, never in `status`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deps: Vec<AttachedLayer>,
}

/// A dependency layer attached to a worktree (the engine's `deps` module says what a
/// layer is).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AttachedLayer {
    /// The layer's directory, from the worktree root (`node_modules`).
    pub path: Utf8PathBuf,
    /// The layer's key.
    pub key: String,
    /// Its tree as written for this worktree's root (relocated), stored.
    pub tree: cas::TreeId,
}

/// Writable paths and the network, granted to sandboxed commands.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct GrantSet {
    /// Absolute, canonical paths a command may write beneath.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub writable: Vec<Utf8PathBuf>,
    /// Whether TCP bind and connect are allowed.
    #[serde(default)]
    pub network: bool,
}

impl GrantSet {
    /// True if it grants nothing.
    pub fn is_empty(&self) -> bool {
        self.writable.is_empty() && !self.network
    }
}

/// A worktree's sandbox grants: for every run, and (`once`) for the next run only.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct SandboxGrants {
    /// Granted to every run.
    #[serde(flatten)]
    pub always: GrantSet,
    /// Granted to the next run only.
    #[serde(default)]
    pub once: GrantSet,
}

impl SandboxGrants {
    /// True if it grants nothing.
    pub fn is_empty(&self) -> bool {
        self.always.is_empty() && self.once.is_empty()
    }
}

/// A grant an agent asked for (through MCP or HTTP): only a person grants it.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct GrantRequest {
    /// Its number in the worktree, never given to another request.
    pub id: u64,
    /// What it asks for.
    #[serde(flatten)]
    pub grant: GrantSet,
    /// For the next run only.
    #[serde(default)]
    pub once: bool,
    /// Who asked: `MCP client NAME VERSION`, or `HTTP client pid N (PROGRAM)`.
    pub by: String,
    /// Why, in the asker's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When.
    pub asked: jiff::Timestamp,
}

/// A worktree's open grant requests, and the last number given to one.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GrantRequests {
    /// The last request number given (numbers are never reused, so granting request N
    /// grants what was listed as N).
    #[serde(default)]
    pub last: u64,
    /// The requests waiting for a decision, oldest first.
    #[serde(default)]
    pub open: Vec<GrantRequest>,
}

impl GrantRequests {
    /// True if no request was ever made.
    pub fn is_empty(&self) -> bool {
        self.last == 0 && self.open.is_empty()
    }
}

/// Which directory a path named: its device and inode numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DirIdentity {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl WorktreeRecord {
    /// A new record with no head, checkpoints or task.
    pub fn new(root: Utf8PathBuf, kind: WorktreeKind) -> WorktreeRecord {
        WorktreeRecord {
            root,
            kind,
            head: None,
            include_denied: false,
            created: jiff::Timestamp::now(),
            checkpoints: Vec::new(),
            task: None,
            max_file_size: None,
            identity: None,
            mount_base: None,
            mount_read_only: false,
            mount_remote: None,
            grants: SandboxGrants::default(),
            requests: GrantRequests::default(),
            deps: Vec::new(),
        }
    }

    /// Every snapshot the record keeps alive: head, checkpoints, task baseline.
    pub fn snapshots(&self) -> impl Iterator<Item = SnapshotId> + '_ {
        self.head
            .iter()
            .copied()
            .chain(self.checkpoints.iter().map(|c| c.snapshot))
            .chain(self.task.iter().map(|t| t.baseline))
            .chain(self.mount_base)
    }

    /// The checkpoint called `name`.
    pub fn checkpoint(&self, name: &str) -> Option<&Checkpoint> {
        self.checkpoints
            .iter()
            .find(|c| c.name.as_deref() == Some(name))
    }
}

/// One checkpoint of a worktree.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checkpoint {
    /// Its name, if it was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The snapshot it recorded.
    pub snapshot: SnapshotId,
    /// When it was taken.
    pub created: jiff::Timestamp,
}

/// A task: what `review`, `accept` and `discard` compare against.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// The first checkpoint, with accepted paths moved forward.
    pub baseline: SnapshotId,
    /// When its first checkpoint was taken.
    pub started: jiff::Timestamp,
}

/// One entry of a worktree's op log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OpRecord {
    /// Position in the worktree's log, from 1; assigned by the store.
    #[serde(default)]
    pub seq: u64,
    /// When it ran.
    pub time: jiff::Timestamp,
    /// The command (`snapshot`, `checkout`, `rollback`, ...).
    pub op: String,
    /// The worktree's recorded state before.
    pub before: Option<SnapshotId>,
    /// The worktree's recorded state after.
    pub after: Option<SnapshotId>,
    /// For an `undo`: the entry whose change it reverted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undoes: Option<u64>,
    /// For a `redo`: the entry whose change it re-applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redoes: Option<u64>,
    /// What it changed beyond the state, in words (a sandbox grant given or taken back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Who did it (the user the engine ran as), where recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

impl OpRecord {
    /// A new entry for `op`, timed now.
    pub fn new(op: &str, before: Option<SnapshotId>, after: Option<SnapshotId>) -> OpRecord {
        OpRecord {
            seq: 0,
            time: jiff::Timestamp::now(),
            op: op.to_owned(),
            before,
            after,
            undoes: None,
            redoes: None,
            detail: None,
            by: None,
        }
    }

    /// True if the entry changed the worktree's recorded state.
    pub fn is_change(&self) -> bool {
        self.before != self.after
    }

    /// Every snapshot the entry references.
    pub fn snapshots(&self) -> impl Iterator<Item = SnapshotId> + '_ {
        self.before.iter().chain(self.after.iter()).copied()
    }
}

/// Which change sets can be undone and redone, from the op log.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct UndoStacks {
    /// Entries (by `seq`) whose change can be undone, newest last.
    pub undo: Vec<u64>,
    /// Undone entries that can be redone, newest last.
    pub redo: Vec<u64>,
}

/// Replays the op log: a change set pushes onto the undo stack and clears the redo stack;
/// `undo` moves its entry to the redo stack, `redo` moves it back. A worktree's first
/// capture (no state before) is not undoable.
pub fn undo_stacks(ops: &[OpRecord]) -> UndoStacks {
    let mut s = UndoStacks::default();
    for op in ops {
        // An entry pruned from the log (`gc --prune-ops`) is on neither stack, and neither
        // is what undid or redid it.
        if let Some(seq) = op.undoes {
            if s.undo.contains(&seq) {
                s.undo.retain(|&x| x != seq);
                s.redo.push(seq);
            }
        } else if let Some(seq) = op.redoes {
            if s.redo.contains(&seq) {
                s.redo.retain(|&x| x != seq);
                s.undo.push(seq);
            }
        } else if op.is_change() {
            s.redo.clear();
            match op.before {
                Some(_) => s.undo.push(op.seq),
                // A first capture (a new registration): nothing before it can be undone.
                None => s.undo.clear(),
            }
        }
    }
    s
}

/// Decodes a worktree record (of the worktree at `root`, for the error).
pub fn decode_worktree(root: &Utf8Path, bytes: &[u8]) -> Result<WorktreeRecord, RegistryError> {
    serde_json::from_slice(bytes).map_err(|e| RegistryError::Corrupt {
        root: root.to_owned(),
        reason: e.to_string(),
        source: Some(e),
    })
}

/// Decodes an op-log entry; its sequence number is its key's.
pub fn decode_op(root: &Utf8Path, key: &[u8], bytes: &[u8]) -> Result<OpRecord, RegistryError> {
    let seq = cas::sequence_of(key).ok_or_else(|| RegistryError::Corrupt {
        root: root.to_owned(),
        reason: "op-log key is not a sequence number".into(),
        source: None,
    })?;
    let mut op: OpRecord = serde_json::from_slice(bytes).map_err(|e| RegistryError::Corrupt {
        root: root.to_owned(),
        reason: format!("op-log entry: {e}"),
        source: Some(e),
    })?;
    op.seq = seq;
    Ok(op)
}

/// Reading the registry, op logs and stat caches from a store's [`Reader`].
pub trait RegistryRead {
    /// The record of the worktree at `root`.
    fn worktree(&self, root: &Utf8Path) -> Result<Option<WorktreeRecord>, RegistryError>;
    /// Every registered worktree, by root path.
    fn worktrees(&self) -> Result<Vec<WorktreeRecord>, RegistryError>;
    /// A worktree's op log, oldest first.
    fn ops(&self, root: &Utf8Path) -> Result<Vec<OpRecord>, RegistryError>;
    /// Every stat-cache entry of worktree `root`: (key, value), sorted by key.
    fn file_states(&self, root: &Utf8Path) -> Result<Vec<cas::KeyValue>, StorageFailure>;
    /// One stat-cache entry of worktree `root`.
    fn file_state(&self, root: &Utf8Path, key: &[u8]) -> Result<Option<Vec<u8>>, StorageFailure>;
}

impl RegistryRead for Reader {
    fn worktree(&self, root: &Utf8Path) -> Result<Option<WorktreeRecord>, RegistryError> {
        match self.side_get(WORKTREES, root.as_str(), b"")? {
            None => Ok(None),
            Some(bytes) => decode_worktree(root, &bytes).map(Some),
        }
    }

    fn worktrees(&self) -> Result<Vec<WorktreeRecord>, RegistryError> {
        self.side_entries(WORKTREES)?
            .into_iter()
            .map(|(root, _, bytes)| decode_worktree(Utf8Path::new(&root), &bytes))
            .collect()
    }

    fn ops(&self, root: &Utf8Path) -> Result<Vec<OpRecord>, RegistryError> {
        self.side_scope(OPLOG, root.as_str())?
            .into_iter()
            .map(|(key, bytes)| decode_op(root, &key, &bytes))
            .collect()
    }

    fn file_states(&self, root: &Utf8Path) -> Result<Vec<cas::KeyValue>, StorageFailure> {
        self.side_scope(FILE_STATES, root.as_str())
    }

    fn file_state(&self, root: &Utf8Path, key: &[u8]) -> Result<Option<Vec<u8>>, StorageFailure> {
        self.side_get(FILE_STATES, root.as_str(), key)
    }
}

/// Writing the registry, op logs and stat caches into a store's [`WriteBatch`].
pub trait RegistryWrite {
    /// Registers or updates a worktree; the snapshots it keeps must be stored or in the batch.
    fn put_worktree(&mut self, record: &WorktreeRecord) -> Result<(), RegistryError>;
    /// Forgets a worktree and its stat cache (its op log stays until `gc --prune-ops`).
    fn remove_worktree(&mut self, root: &Utf8Path);
    /// Appends an entry to a worktree's op log; the store gives it the next sequence number.
    fn append_op(&mut self, root: &Utf8Path, op: &OpRecord) -> Result<(), RegistryError>;
    /// Drops worktree `root`'s whole stat cache (before the batch's later entries).
    fn clear_file_states(&mut self, root: &Utf8Path);
    /// Sets (`Some`) or removes (`None`) one stat-cache entry of worktree `root`.
    fn set_file_state(&mut self, root: &Utf8Path, key: &[u8], state: Option<Vec<u8>>);
}

impl RegistryWrite for WriteBatch {
    fn put_worktree(&mut self, record: &WorktreeRecord) -> Result<(), RegistryError> {
        let json = serde_json::to_vec(record).map_err(|source| RegistryError::Encode {
            root: record.root.clone(),
            source,
        })?;
        self.require_snapshots(record.snapshots());
        self.put_side(WORKTREES, record.root.as_str(), b"", json);
        Ok(())
    }

    fn remove_worktree(&mut self, root: &Utf8Path) {
        self.remove_side(WORKTREES, root.as_str(), b"");
        self.clear_side_scope(FILE_STATES, root.as_str());
    }

    fn append_op(&mut self, root: &Utf8Path, op: &OpRecord) -> Result<(), RegistryError> {
        let json = serde_json::to_vec(op).map_err(|source| RegistryError::Encode {
            root: root.to_owned(),
            source,
        })?;
        self.require_snapshots(op.snapshots());
        self.append_side(OPLOG, root.as_str(), json);
        Ok(())
    }

    fn clear_file_states(&mut self, root: &Utf8Path) {
        self.clear_side_scope(FILE_STATES, root.as_str());
    }

    fn set_file_state(&mut self, root: &Utf8Path, key: &[u8], state: Option<Vec<u8>>) {
        match state {
            Some(v) => self.put_side(FILE_STATES, root.as_str(), key, v),
            None => self.remove_side(FILE_STATES, root.as_str(), key),
        }
    }
}

/// What the registry and op logs keep alive, for `gc` and `fsck`: every worktree's head,
/// checkpoints, task baseline and mount base, and the states every op-log entry names.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    /// `gc` first drops op-log entries older than this; they then keep nothing alive, and
    /// those left, with the unnamed checkpoints made since, are recent: no size budget drops
    /// them. Without it every entry and unnamed checkpoint is history that a size budget may
    /// drop, oldest first, except each registered worktree's newest undoable entry (what
    /// `undo` would revert): no budget drops that.
    pub prune_ops_before: Option<jiff::Timestamp>,
    /// The store's folder: `fsck` reports every worktree registered there, inside it or
    /// around it (an older cairn registered such). Without it that is not checked.
    pub store: Option<Utf8PathBuf>,
}

impl Registry {
    /// How many of the entries a `gc` dropped were op-log entries.
    pub fn ops_pruned(dropped: &[cas::SideKey]) -> u64 {
        dropped.iter().filter(|k| k.table == OPLOG).count() as u64
    }

    /// How many of the parts a `gc` dropped were (unnamed) checkpoints.
    pub fn checkpoints_pruned(parts: &[cas::HistoryEntry]) -> u64 {
        parts.iter().filter(|p| p.key.table == WORKTREES).count() as u64
    }
}

impl Registry {
    /// What keeps each snapshot a worktree record names. An unnamed checkpoint made before
    /// `prune_ops_before` (any, without it) is history a size budget may drop.
    fn keep_record(&self, wt: &WorktreeRecord, roots: &mut cas::Roots) {
        let of = |reason| cas::Keeper::new(reason).of(wt.root.as_str());
        if let Some(head) = wt.head {
            roots.keep(head, of("worktree head"));
        }
        for c in &wt.checkpoints {
            match &c.name {
                Some(name) => roots.keep(c.snapshot, of("named checkpoint").named(name.as_str())),
                None if self.prune_ops_before.is_some_and(|t| c.created >= t) => {
                    roots.keep(c.snapshot, of("checkpoint"));
                }
                None => roots.history.push(cas::HistoryEntry {
                    time: c.created,
                    snapshots: vec![c.snapshot],
                    key: cas::SideKey {
                        table: WORKTREES,
                        scope: wt.root.to_string(),
                        key: Vec::new(),
                    },
                    part: Some(checkpoint_part(c)),
                }),
            }
        }
        if let Some(task) = &wt.task {
            roots.keep(task.baseline, of("task baseline"));
        }
        if let Some(base) = wt.mount_base {
            roots.keep(base, of("mount base"));
        }
    }
}

impl Registry {
    /// The problem with `wt` if it is, lies inside or holds the store's folder.
    fn overlap(&self, wt: &WorktreeRecord) -> Option<cas::Problem> {
        let store = self.store.as_deref()?;
        // A live mount's root is served by this process, maybe: only the path to it counts.
        let look_at_root = wt.kind != WorktreeKind::Mounted;
        let overlap = crate::apart::overlap_with(store, &wt.root, look_at_root)?;
        Some(cas::Problem::new(
            "worktree",
            &wt.root,
            format!(
                "{} {store}; a worktree may not be the store's folder, lie inside it or hold it, so every command on it is refused: `cairn worktree remove {}` forgets it (its files stay)",
                overlap.relation(),
                wt.root
            ),
        ))
    }
}

/// How an unnamed checkpoint is named as a part of its worktree's record.
fn checkpoint_part(c: &Checkpoint) -> String {
    format!("checkpoint {} {}", c.snapshot, c.created)
}

impl cas::SideOwner for Registry {
    fn roots(&self, reader: &Reader, roots: &mut cas::Roots) -> Result<(), cas::BoxError> {
        let mut registered = std::collections::HashSet::new();
        for wt in reader.worktrees()? {
            self.keep_record(&wt, roots);
            registered.insert(wt.root.into_string());
        }
        // Each worktree's log, in order.
        let mut logs: BTreeMap<String, Vec<(Vec<u8>, OpRecord)>> = BTreeMap::new();
        for (root, key, bytes) in reader.side_entries(OPLOG)? {
            let op = decode_op(Utf8Path::new(&root), &key, &bytes)?;
            logs.entry(root).or_default().push((key, op));
        }
        for (root, mut log) in logs {
            log.sort_by_key(|(_, op)| op.seq);
            let (old, recent): (Vec<_>, Vec<_>) = log
                .into_iter()
                .partition(|(_, op)| self.prune_ops_before.is_some_and(|t| op.time < t));
            let entry = |key| cas::SideKey {
                table: OPLOG,
                scope: root.clone(),
                key,
            };
            roots
                .drop
                .extend(old.into_iter().map(|(key, _)| entry(key)));
            // What `undo` would revert once the old entries are gone: its states are the
            // only copy of what the change replaced (a rewind's capture of live edits). A
            // worktree no longer registered has nothing `undo` can revert.
            let ops: Vec<OpRecord> = recent.iter().map(|(_, op)| op.clone()).collect();
            let undoable = registered
                .contains(&root)
                .then(|| undo_stacks(&ops).undo.last().copied())
                .flatten();
            for (key, op) in recent {
                let reason = if Some(op.seq) == undoable {
                    "undo"
                } else if self.prune_ops_before.is_some() {
                    "recent op"
                } else {
                    roots.history.push(cas::HistoryEntry {
                        time: op.time,
                        snapshots: op.snapshots().collect(),
                        key: entry(key),
                        part: None,
                    });
                    continue;
                };
                for id in op.snapshots() {
                    roots.keep(
                        id,
                        cas::Keeper::new(reason)
                            .named(format!("#{}", op.seq))
                            .of(root.as_str()),
                    );
                }
            }
        }
        Ok(())
    }

    fn check(&self, reader: &Reader) -> Result<cas::Checked, cas::BoxError> {
        let mut out = cas::Checked::default();
        match reader.worktrees() {
            Ok(records) => {
                for wt in records {
                    out.references += 1;
                    if let Some(problem) = self.overlap(&wt) {
                        out.problems.push(problem);
                    }
                    for id in wt.snapshots() {
                        if !reader.has_snapshot(id)? {
                            out.problems.push(cas::Problem::new(
                                "worktree",
                                &wt.root,
                                format!("snapshot {id} (head, checkpoint or baseline) is missing"),
                            ));
                        }
                    }
                }
            }
            Err(RegistryError::Storage(e)) => return Err(e.into()),
            Err(e) => out.problems.push(cas::Problem::new("worktree", "", e)),
        }
        for (root, key, bytes) in reader.side_entries(OPLOG)? {
            out.references += 1;
            let name = match cas::sequence_of(&key) {
                Some(seq) => format!("{root}#{seq}"),
                None => format!("{root}#?"),
            };
            match decode_op(Utf8Path::new(&root), &key, &bytes) {
                Ok(op) => {
                    for id in op.snapshots() {
                        if !reader.has_snapshot(id)? {
                            out.problems.push(cas::Problem::new(
                                "op",
                                &name,
                                format!("snapshot {id} is missing"),
                            ));
                        }
                    }
                }
                Err(e) => out.problems.push(cas::Problem::new("op", &name, e)),
            }
        }
        Ok(out)
    }

    fn name(&self) -> &'static str {
        "worktree registry"
    }

    /// Worktree records without the unnamed checkpoints a size budget dropped.
    fn forget(
        &self,
        reader: &Reader,
        parts: &[cas::HistoryEntry],
    ) -> Result<Vec<cas::Rewrite>, cas::BoxError> {
        let mut out = Vec::new();
        for wt in reader.worktrees()? {
            let gone: Vec<&str> = parts
                .iter()
                .filter(|p| p.key.table == WORKTREES && p.key.scope == wt.root.as_str())
                .filter_map(|p| p.part.as_deref())
                .collect();
            if gone.is_empty() {
                continue;
            }
            let mut record = wt.clone();
            record
                .checkpoints
                .retain(|c| c.name.is_some() || !gone.contains(&checkpoint_part(c).as_str()));
            let json = serde_json::to_vec(&record).map_err(|source| RegistryError::Encode {
                root: record.root.clone(),
                source,
            })?;
            out.push((
                cas::SideKey {
                    table: WORKTREES,
                    scope: wt.root.to_string(),
                    key: Vec::new(),
                },
                Some(json),
            ));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_where_format_1_moved_their_records() {
        let moves: Vec<_> = FORMAT_1_TABLES.iter().map(|t| (t.name, t.now)).collect();
        assert_eq!(
            moves,
            [
                ("worktrees", WORKTREES),
                ("oplog", OPLOG),
                ("file_states", FILE_STATES)
            ]
        );
    }

    /// A record written before grants existed reads as granting nothing, and grants
    /// round-trip in the shape `cairn policy` shows.
    #[test]
    fn records_without_grants_read_and_grants_round_trip() {
        let old =
            br#"{"root":"/w","kind":"in_place","head":null,"created":"2026-01-01T00:00:00Z"}"#;
        let record = decode_worktree(Utf8Path::new("/w"), old).expect("an old record reads");
        assert!(record.grants.is_empty());
        assert!(
            !String::from_utf8(serde_json::to_vec(&record).expect("encodes"))
                .expect("utf-8")
                .contains("grants"),
            "no grants, no field"
        );
        let mut record = record;
        record.grants.always.writable.push("/srv/cache".into());
        record.grants.once.network = true;
        let json = serde_json::to_value(&record).expect("encodes");
        assert_eq!(
            json["grants"],
            serde_json::json!({"writable": ["/srv/cache"], "network": false,
                "once": {"writable": [], "network": true}})
        );
        let back: WorktreeRecord = serde_json::from_value(json).expect("decodes");
        assert_eq!(back, record);
    }

    /// A mounted worktree's record from before `--read-only` was kept reads as writable;
    /// a read-only one keeps the flag through encoding, and a writable one writes no field.
    #[test]
    fn mount_read_only_is_kept_and_older_records_read_as_writable() {
        let old = br#"{"root":"/m","kind":"mounted","head":null,"created":"2026-01-01T00:00:00Z","mount_base":null}"#;
        let record = decode_worktree(Utf8Path::new("/m"), old).expect("an old record reads");
        assert!(!record.mount_read_only);
        let json = serde_json::to_vec(&record).expect("encodes");
        assert!(
            !String::from_utf8_lossy(&json).contains("read_only"),
            "writable, no field"
        );
        let record = WorktreeRecord {
            mount_read_only: true,
            ..record
        };
        let json = serde_json::to_vec(&record).expect("encodes");
        let back = decode_worktree(Utf8Path::new("/m"), &json).expect("decodes");
        assert!(back.mount_read_only);
        assert_eq!(back, record);
    }
}
