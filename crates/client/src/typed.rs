//! Typed calls (feature `engine`): any verb as a `cairn_engine::Request`, answered with the
//! engine's own outcome or error, as an engine in this process would answer. This is what
//! the `cairn` CLI sends to a running `cairn serve`.

use cairn_engine::wire::{CallReply, CallRequest};
use cairn_engine::{Outcome, Request};
use camino::Utf8Path;

use crate::{Client, ClientError, ProgressEvent};

/// The engine's answer: the outcome and its exit status (0, or 1 for a refusal), or its
/// error.
pub type Answer = Result<(Outcome, u8), cairn_engine::Error>;

impl Client {
    /// The same client, its calls never fetching from a remote (`--offline`).
    pub fn offline(mut self, offline: bool) -> Client {
        self.offline = offline;
        self
    }

    /// Runs `request` on the server's engine as if from `cwd` (absolute). Progress events
    /// go to `on_progress` as they arrive, if it is given. The outer error is the
    /// transport's ([`ClientError::Unavailable`]: nothing was sent); the inner one is the
    /// engine's.
    pub fn run(
        &self,
        cwd: &Utf8Path,
        request: Request,
        on_progress: Option<&mut dyn FnMut(&ProgressEvent)>,
    ) -> Result<Answer, ClientError> {
        let body = CallRequest {
            cwd: cwd.to_owned(),
            request,
            offline: self.offline,
        };
        let (status, value) = match on_progress {
            Some(on_progress) => self.post_json_streaming("/v1/call", &body, on_progress)?,
            None => self.post_json("/v1/call", &body)?,
        };
        match serde_json::from_value::<CallReply>(value.clone()) {
            Ok(reply) => Ok(reply.into_result()),
            Err(_) => Err(ClientError::Status {
                socket: self.socket.clone(),
                status,
                body: value.to_string(),
            }),
        }
    }
}
