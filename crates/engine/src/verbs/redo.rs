//! `redo [WORKTREE]`: the newest undone change set applied again.

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::reversible::{UndoOptions, UndoOutcome, undo_refusal};
use crate::spec::{VerbSpec, verb, verbs};

impl Engine {
    /// `cairn redo [WORKTREE]`.
    pub fn redo(&self, call: &Call, options: UndoOptions) -> Result<UndoOutcome, Error> {
        self.undo_or_redo(call, options, true)
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Re-apply the newest undone change set of the worktree.
    Redo(UndoOptions) -> UndoOutcome = "redo" via redo [Route, Tool];
}

impl VerbSpec for verbs::Redo {
    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        undo_refusal(outcome)
    }

    const REFUSED: Option<&'static str> = Some(
        "A negative answer, nothing changed: redo refused (`refused`), or nothing to redo; `message` says why.",
    );

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"worktree": "wt", "cwd": "/home/agent/project"}"#);
}
