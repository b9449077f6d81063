//! `rewind -i`'s list: the states a worktree can be rewound to.

use camino::Utf8PathBuf;
use cas::SnapshotId;
use fs_manager::RegistryRead as _;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, registered};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::view::{LogEntry, log_entry};

/// `rewind -i`'s list: the states a worktree can be rewound to.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimelineOptions {
    /// The worktree (default: the caller's directory).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub dir: Option<Utf8PathBuf>,
    /// At most this many, the newest (default 500).
    #[serde(default, deserialize_with = "crate::engine::whole_number::deserialize")]
    pub max_count: Option<usize>,
    /// Leave out this many of the newest first (default 0): with `max_count`, one page.
    #[serde(default, deserialize_with = "crate::engine::whole_number::deserialize")]
    pub skip: Option<usize>,
}

/// One state of a worktree: a snapshot as `log --stat` shows it, its checkpoint name, and
/// whether it is the head.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimelineEntry {
    /// The snapshot, with its changes against its first parent.
    #[serde(flatten)]
    pub snapshot: LogEntry,
    /// Its checkpoint's name, if it is a named checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// Whether the worktree's head is this snapshot.
    pub head: bool,
}

/// A worktree's states, newest first: its checkpoints, the snapshots its op log went
/// through, and its head's history.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimelineOutcome {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Its head.
    pub head: Option<SnapshotId>,
    /// The baseline of its task, if it has one (`review` shows the task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<SnapshotId>,
    /// How many states it has in all (`entries` holds those of the page asked for).
    pub total: usize,
    /// Its states: those left after `skip`, at most `max_count`.
    pub entries: Vec<TimelineEntry>,
}

impl Engine {
    /// The states `rewind -i` offers: checkpoints (named or not), the heads the op log
    /// recorded, and the head's history, each once, newest first.
    pub fn timeline(
        &self,
        call: &Call,
        options: TimelineOptions,
    ) -> Result<TimelineOutcome, Error> {
        const DEFAULT_COUNT: usize = 500;
        let dir = call.dir(options.dir.as_deref());
        let store = self.store(Access::Read)?;
        let reader = store.reader()?;
        let record = registered(&reader, &dir)?;
        let most = options.max_count.unwrap_or(DEFAULT_COUNT);
        let skip = options.skip.unwrap_or(0);
        let mut ids: Vec<SnapshotId> = record.checkpoints.iter().map(|c| c.snapshot).collect();
        for op in reader.ops(&record.root)? {
            ids.extend(op.before.into_iter().chain(op.after));
        }
        // Each state once. A state gc has since collected, or a parent left on a remote,
        // is not offered.
        let read = |id: SnapshotId| match reader.snapshot(id) {
            Ok(snap) => Ok(Some(snap)),
            Err(cas::ReadError::NotFound { .. }) => Ok(None),
            Err(e) => Err(Error::from(e)),
        };
        let mut states: std::collections::HashMap<SnapshotId, cas::Snapshot> =
            std::collections::HashMap::new();
        for id in ids {
            if !states.contains_key(&id)
                && let Some(snap) = read(id)?
            {
                states.insert(id, snap);
            }
        }
        // The head's first-parent history, all of it: `total` counts every state.
        let mut next = record.head;
        while let Some(id) = next {
            next = match states.get(&id) {
                Some(snap) => snap.parents.first().copied(),
                None => match read(id)? {
                    Some(snap) => {
                        let parent = snap.parents.first().copied();
                        states.insert(id, snap);
                        parent
                    }
                    None => None,
                },
            };
        }
        let mut states: Vec<(SnapshotId, cas::Snapshot)> = states.into_iter().collect();
        states.sort_by(|a, b| b.1.created.cmp(&a.1.created).then(b.0.cmp(&a.0)));
        let total = states.len();
        states.drain(..skip.min(total));
        states.truncate(most);
        // Each entry's change summary is its own diff: in parallel.
        let entries = states
            .into_par_iter()
            .map(|(id, snap)| {
                // A parent left on a remote or pruned by gc leaves no change summary (and
                // is not fetched for one).
                let parent_absent = match snap.parents.first() {
                    Some(p) => reader.absent_by_design(*p)?,
                    None => false,
                };
                Ok(TimelineEntry {
                    snapshot: log_entry(&reader, id, snap, !parent_absent)?,
                    // The newest checkpoint of that snapshot with a name names it.
                    checkpoint: record
                        .checkpoints
                        .iter()
                        .rev()
                        .find(|c| c.snapshot == id)
                        .and_then(|c| c.name.clone()),
                    head: record.head == Some(id),
                })
            })
            .collect::<Result<_, Error>>()?;
        Ok(TimelineOutcome {
            task: record.task.as_ref().map(|t| t.baseline),
            worktree: record.root,
            head: record.head,
            total,
            entries,
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// The worktree's snapshots and checkpoints, newest first.
    Timeline(TimelineOptions) -> TimelineOutcome = "timeline" via timeline [Route];
}

impl VerbSpec for verbs::Timeline {
    const READS_ONLY: bool = true;

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"dir": "wt", "max_count": 200, "cwd": "/home/agent/project"}"#);
}
