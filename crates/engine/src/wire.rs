//! A call and its answer as values, for faces that carry them to an engine in another
//! process (`cairn serve`'s `/v1/call`): what is sent and answered, not how.

use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorReply};
use crate::request::{Outcome, Request};

/// A call: the caller's directory and the request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallRequest {
    /// The caller's directory (absolute).
    pub cwd: Utf8PathBuf,
    /// What to do.
    pub request: Request,
    /// Never fetch from a remote (`--offline`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub offline: bool,
}

/// The answer to a call: the outcome and its exit status, or the error.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum CallReply {
    /// It ran.
    Done {
        /// 0, or 1 for a refusal.
        #[schemars(range(max = 1))]
        exit: u8,
        /// What it did.
        outcome: Outcome,
    },
    /// It failed.
    Failed {
        /// Why.
        error: ErrorReply,
    },
}

impl CallReply {
    /// The answer for `result`.
    pub fn of(result: Result<Outcome, Error>) -> CallReply {
        match result {
            Ok(outcome) => CallReply::Done {
                exit: outcome.exit(),
                outcome,
            },
            Err(e) => CallReply::Failed {
                error: ErrorReply::from(&e),
            },
        }
    }

    /// The exit status: 0 success, 1 refusal, 2 bad input, 3 store or I/O failure.
    pub fn exit(&self) -> u8 {
        match self {
            CallReply::Done { exit, .. } => *exit,
            CallReply::Failed { error } => error.exit,
        }
    }

    /// The outcome and its exit status, or the error, as the engine would have returned it
    /// (a diff's refusal, which is not on the wire, comes back from its exit status).
    pub fn into_result(self) -> Result<(Outcome, u8), Error> {
        match self {
            CallReply::Done { exit, mut outcome } => {
                if let Outcome::Diff(d) = &mut outcome {
                    d.differ = exit == 1;
                }
                Ok((outcome, exit))
            }
            CallReply::Failed { error } => Err(error.into()),
        }
    }
}
