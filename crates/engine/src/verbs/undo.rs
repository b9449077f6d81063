//! `undo [WORKTREE]`: the newest change set of a worktree reverted.

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::reversible::{UndoOptions, UndoOutcome, undo_refusal};
use crate::spec::{VerbSpec, verb, verbs};

impl Engine {
    /// `cairn undo [WORKTREE]`.
    pub fn undo(&self, call: &Call, options: UndoOptions) -> Result<UndoOutcome, Error> {
        self.undo_or_redo(call, options, false)
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Revert the newest change set of the worktree that is not undone yet. Refuses, changing nothing, if any file it would touch changed since; each such file is listed with the reason.
    Undo(UndoOptions) -> UndoOutcome = "undo" via undo [Route, Tool];
}

impl VerbSpec for verbs::Undo {
    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        undo_refusal(outcome)
    }

    const REFUSED: Option<&'static str> = Some(
        "A negative answer, nothing changed: undo refused, or nothing to undo (`No edits have been applied to any file with this session.`); `message` says why.",
    );

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"worktree": "wt", "cwd": "/home/agent/project"}"#);
}
