//! `log [TARGET]`: snapshot history, newest first.

use camino::Utf8Path;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::{ArgumentError, Error};
use crate::path::absolute;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::view::{LogEntry, log_entry, worktree_head};

/// `log [TARGET] [-n N] [--stat]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogOptions {
    /// A worktree directory or a snapshot.
    #[serde(default)]
    #[schemars(extend("x-default-cwd" = true, "x-snapshot" = true))]
    pub target: Option<String>,
    /// At most this many.
    #[serde(
        default,
        deserialize_with = "crate::engine::whole_number::at_least_one"
    )]
    #[schemars(range(min = 1))]
    pub max_count: Option<usize>,
    /// Each snapshot's changes against its first parent.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub stat: bool,
}

/// A history, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogOutcome {
    /// The snapshots.
    pub snapshots: Vec<LogEntry>,
}

impl Engine {
    /// `cairn log [TARGET] [-n N] [--stat]`.
    pub fn log(&self, call: &Call, options: LogOptions) -> Result<LogOutcome, Error> {
        // As every face reads a count (`whole_number::at_least_one`): a caller building
        // the options itself gets the same answer.
        if options.max_count == Some(0) {
            return Err(ArgumentError::Zero { name: "max_count" }.into());
        }
        let store = self.store(Access::Read)?;
        let reader = store.reader()?;
        let start = match &options.target {
            Some(t) if absolute(&call.cwd, Utf8Path::new(t)).is_dir() => {
                worktree_head(&reader, &absolute(&call.cwd, Utf8Path::new(t)), true)?
            }
            Some(t) => Some(resolve_snapshot(&reader, &call.cwd, t)?),
            None => worktree_head(&reader, &call.cwd, false)?,
        };
        let history = match start {
            Some(id) => reader.log(id, options.max_count)?,
            None => Vec::new(),
        };
        let snapshots = history
            .into_iter()
            .map(|(id, snap)| log_entry(&reader, id, snap, options.stat))
            .collect::<Result<_, _>>()?;
        Ok(LogOutcome { snapshots })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Snapshot history, newest first, of a worktree or from a snapshot.
    Log(LogOptions) -> LogOutcome = "log" via log [Route, Tool];
}

impl VerbSpec for verbs::Log {
    const READS_ONLY: bool = true;

    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        options.target.as_deref().into_iter().collect()
    }

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"target": "wt", "max_count": 5, "cwd": "/home/agent/project"}"#);
}
