//! `op log [DIR]`: a worktree's operation log, newest first.

use camino::Utf8PathBuf;
use cas::SnapshotId;
use fs_manager::RegistryRead as _;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, registered};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `op log [DIR]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpLogOptions {
    /// The worktree (default: the caller's directory).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub dir: Option<Utf8PathBuf>,
}

/// One operation of a worktree.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpItem {
    /// Its number.
    pub seq: u64,
    /// When.
    pub time: jiff::Timestamp,
    /// What (`snapshot`, `rollback`, `undo`, ...).
    pub op: String,
    /// The head before.
    pub before: Option<SnapshotId>,
    /// The head after.
    pub after: Option<SnapshotId>,
    /// The op it undid.
    pub undoes: Option<u64>,
    /// The op it redid.
    pub redoes: Option<u64>,
    /// Whether it is undone (on the redo stack).
    pub undone: bool,
    /// Whether `undo` would revert it (on the undo stack).
    pub undoable: bool,
    /// What it changed beyond the head (a sandbox grant given or taken back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Who did it, where recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// A worktree's operation log, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpLogOutcome {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Its operations.
    pub ops: Vec<OpItem>,
}

impl Engine {
    /// `cairn op log [DIR]`.
    pub fn op_log(&self, call: &Call, options: OpLogOptions) -> Result<OpLogOutcome, Error> {
        let dir = call.dir(options.dir.as_deref());
        let store = self.store(Access::Read)?;
        let reader = store.reader()?;
        let record = registered(&reader, &dir)?;
        let ops = reader.ops(&record.root)?;
        let stacks = fs_manager::undo_stacks(&ops);
        let ops = ops
            .iter()
            .rev()
            .map(|op| OpItem {
                seq: op.seq,
                time: op.time,
                op: op.op.clone(),
                before: op.before,
                after: op.after,
                undoes: op.undoes,
                redoes: op.redoes,
                undone: stacks.redo.contains(&op.seq),
                undoable: stacks.undo.contains(&op.seq),
                detail: op.detail.clone(),
                by: op.by.clone(),
            })
            .collect();
        Ok(OpLogOutcome {
            worktree: record.root,
            ops,
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// The worktree's op log: every recorded change, oldest first.
    OpLog(OpLogOptions) -> OpLogOutcome = "op_log" via op_log [Route];
}

impl VerbSpec for verbs::OpLog {
    const READS_ONLY: bool = true;

    const EXAMPLE: Option<&'static str> = Some(r#"{"dir": "wt", "cwd": "/home/agent/project"}"#);
}
