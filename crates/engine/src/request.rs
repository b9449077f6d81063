//! Every verb as one value: a [`Request`] built by a face (from a command line, a verb
//! name and JSON arguments, or a wire message), handled by [`Engine::handle`], answered
//! with an [`Outcome`].

use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::merge::{MergeOptions, MergeOutcome};
use crate::mounts::{MountOptions, MountOutcome, UnmountOptions, UnmountOutcome};
use crate::objects::{
    FsckOptions, FsckOutcome, GcOptions, GcOutcome, RefListOptions, RefRmOptions, RefSetOptions,
    RefsOutcome, ShowOptions, ShowOutcome,
};
use crate::policy::{
    PolicyAllowOptions, PolicyOptions, PolicyOutcome, PolicyRequestOptions, PolicyRevokeOptions,
};
use crate::remotes::{
    PullOptions, PullOutcome, PushOptions, PushOutcome, RemoteAddOptions, RemoteListOptions,
    RemoteRmOptions, RemotesOutcome,
};
use crate::reversible::{
    AcceptOptions, AcceptOutcome, CheckpointOptions, CheckpointOutcome, DiscardOptions,
    DiscardOutcome, OpLogOptions, OpLogOutcome, RecoverOptions, RecoverOutcome, RewindOptions,
    TimelineOptions, TimelineOutcome, UndoOptions, UndoOutcome,
};
use crate::view::{
    DiffOptions, DiffOutcome, LogOptions, LogOutcome, ReviewOptions, ReviewOutcome, StatusOptions,
    StatusOutcome,
};
use crate::worktrees::{
    CheckoutOptions, CheckoutOutcome, ImportOptions, ImportOutcome, OnboardOptions, OnboardOutcome,
    RollbackOptions, RollbackOutcome, SnapshotOptions, SnapshotOutcome, WorktreeListOptions,
    WorktreeListOutcome, WorktreePathOptions, WorktreesChanged,
};

macro_rules! verbs {
    ($( $variant:ident($options:ty) -> $outcome:ty = $verb:literal via $method:ident; )*) => {
        /// One call of any verb, with its options. Serialized as
        /// `{"verb": NAME, "args": {...}}`; the args' names are the verb's JSON arguments.
        #[derive(Debug, Clone, Serialize, Deserialize)]
        #[serde(tag = "verb", content = "args", try_from = "Tagged")]
        #[allow(missing_docs)]
        pub enum Request {
            $( #[serde(rename = $verb)] $variant($options), )*
        }

        impl TryFrom<Tagged> for Request {
            type Error = String;

            fn try_from(t: Tagged) -> Result<Request, String> {
                let args = serde_json::Value::Object(t.args);
                match t.verb.as_str() {
                    $( $verb => serde_json::from_value(args)
                        .map(Request::$variant)
                        .map_err(|e| format!("{}: {e}", $verb)), )*
                    other => Err(format!("unknown verb {other:?}")),
                }
            }
        }

        /// The outcome of any verb. Serialized as `{"verb": NAME, "outcome": {...}}`;
        /// [`Outcome::to_json`] gives the verb's own JSON object.
        #[derive(Debug, Clone, Serialize, Deserialize)]
        #[serde(tag = "verb", content = "outcome")]
        #[allow(missing_docs)]
        pub enum Outcome {
            $( #[serde(rename = $verb)] $variant($outcome), )*
        }

        impl Request {
            /// Every verb's name.
            pub const VERBS: &'static [&'static str] = &[$( $verb, )*];

            /// The verb's name.
            pub fn verb(&self) -> &'static str {
                match self {
                    $( Request::$variant(_) => $verb, )*
                }
            }
        }

        impl Outcome {
            /// The verb's name.
            pub fn verb(&self) -> &'static str {
                match self {
                    $( Outcome::$variant(_) => $verb, )*
                }
            }

            /// The verb's JSON object (SPEC.md's fields).
            pub fn to_json(&self) -> serde_json::Value {
                let value = match self {
                    $( Outcome::$variant(o) => serde_json::to_value(o), )*
                };
                value.unwrap_or(serde_json::Value::Null)
            }
        }

        impl Engine {
            /// Runs `request`.
            pub fn handle(&self, call: &Call, request: Request) -> Result<Outcome, Error> {
                refuse_nul(call, &request)?;
                crate::limits::refuse_oversized(
                    request.verb(),
                    &call.cwd,
                    &serde_json::to_value(&request).unwrap_or_default(),
                )?;
                // What the call names or reaches but the store lacks (a full id, a remote
                // ref, a parent of a snapshot fetched alone) is fetched when the call fails
                // for want of it, and the call runs again: nothing is asked of a remote
                // while the store has what a call needs.
                let mut fetched = 0;
                loop {
                    let result = match request.clone() {
                        $( Request::$variant(o) => self.$method(call, o).map(Outcome::$variant), )*
                    };
                    match result {
                        Err(e) if fetched < MAX_FETCHES_PER_CALL
                            && (self.fetch_promised(call, &e)?
                                || (fetched == 0
                                    && matches!(e.code(), "unknown_id" | "unknown_ref")
                                    && self.fetch_named(call, snapshot_specs(&request))?)) =>
                        {
                            fetched += 1;
                        }
                        other => return other,
                    }
                }
            }
        }
    };
}

verbs! {
    Onboard(OnboardOptions) -> OnboardOutcome = "onboard" via onboard;
    Import(ImportOptions) -> ImportOutcome = "import" via import;
    Snapshot(SnapshotOptions) -> SnapshotOutcome = "snapshot" via snapshot;
    Checkout(CheckoutOptions) -> CheckoutOutcome = "checkout" via checkout;
    Rollback(RollbackOptions) -> RollbackOutcome = "rollback" via rollback;
    Merge(MergeOptions) -> MergeOutcome = "merge" via merge;
    WorktreeList(WorktreeListOptions) -> WorktreeListOutcome = "worktree_list" via worktree_list;
    WorktreeRemove(WorktreePathOptions) -> WorktreesChanged = "worktree_remove" via worktree_remove;
    WorktreeRebind(WorktreePathOptions) -> WorktreesChanged = "worktree_rebind" via worktree_rebind;
    Diff(DiffOptions) -> DiffOutcome = "diff" via diff;
    Status(StatusOptions) -> StatusOutcome = "status" via status;
    Review(ReviewOptions) -> ReviewOutcome = "review" via review;
    Log(LogOptions) -> LogOutcome = "log" via log;
    Show(ShowOptions) -> ShowOutcome = "show" via show;
    RefSet(RefSetOptions) -> RefsOutcome = "ref_set" via ref_set;
    RefRm(RefRmOptions) -> RefsOutcome = "ref_rm" via ref_rm;
    RefList(RefListOptions) -> RefsOutcome = "ref_list" via ref_list;
    Fsck(FsckOptions) -> FsckOutcome = "fsck" via fsck;
    Gc(GcOptions) -> GcOutcome = "gc" via gc;
    Checkpoint(CheckpointOptions) -> CheckpointOutcome = "checkpoint" via checkpoint;
    Rewind(RewindOptions) -> RollbackOutcome = "rewind" via rewind;
    Undo(UndoOptions) -> UndoOutcome = "undo" via undo;
    Redo(UndoOptions) -> UndoOutcome = "redo" via redo;
    OpLog(OpLogOptions) -> OpLogOutcome = "op_log" via op_log;
    Timeline(TimelineOptions) -> TimelineOutcome = "timeline" via timeline;
    Accept(AcceptOptions) -> AcceptOutcome = "accept" via accept;
    Discard(DiscardOptions) -> DiscardOutcome = "discard" via discard;
    Recover(RecoverOptions) -> RecoverOutcome = "recover" via recover;
    RemoteAdd(RemoteAddOptions) -> RemotesOutcome = "remote_add" via remote_add;
    RemoteRm(RemoteRmOptions) -> RemotesOutcome = "remote_rm" via remote_rm;
    RemoteList(RemoteListOptions) -> RemotesOutcome = "remote_list" via remote_list;
    Push(PushOptions) -> PushOutcome = "push" via push;
    Pull(PullOptions) -> PullOutcome = "pull" via pull;
    Mount(MountOptions) -> MountOutcome = "mount" via mount;
    Unmount(UnmountOptions) -> UnmountOutcome = "unmount" via unmount;
    Policy(PolicyOptions) -> PolicyOutcome = "policy" via policy;
    PolicyAllow(PolicyAllowOptions) -> PolicyOutcome = "policy_allow" via policy_allow;
    PolicyRevoke(PolicyRevokeOptions) -> PolicyOutcome = "policy_revoke" via policy_revoke;
    PolicyRequest(PolicyRequestOptions) -> PolicyOutcome = "policy_request" via policy_request;
}

/// The snapshot specs a request names that a fetch could supply.
fn snapshot_specs(request: &Request) -> Vec<String> {
    let value = serde_json::to_value(request).unwrap_or_default();
    let Some(args) = value.get("args").and_then(serde_json::Value::as_object) else {
        return Vec::new();
    };
    const KEYS: &[&str] = &["snapshot", "a", "b", "object", "to", "base", "target"];
    let verb = request.verb();
    // These name remote refs or snapshots to push, not ones to fetch.
    if matches!(verb, "push" | "pull") {
        return Vec::new();
    }
    KEYS.iter()
        .filter_map(|k| args.get(*k).and_then(serde_json::Value::as_str))
        .map(|s| match (verb, s.split_once(':')) {
            ("show", Some((spec, _))) => spec.to_owned(),
            _ => s.to_owned(),
        })
        .filter(|s| {
            crate::remotes::is_full_id(s)
                || crate::engine::remote_ref(s)
                    .is_some_and(|(n, r)| !n.is_empty() && remote::validate_remote_name(r).is_ok())
        })
        .collect()
}

/// How often one call may stop at a snapshot only promised by a remote, fetch it and run
/// again (a `log` through a history fetched one snapshot at a time).
const MAX_FETCHES_PER_CALL: usize = 256;

/// No command line or path can hold a NUL byte: one in a request is bad input, never a
/// path to try.
fn refuse_nul(call: &Call, request: &Request) -> Result<(), Error> {
    fn find(v: &serde_json::Value) -> Option<&str> {
        match v {
            serde_json::Value::String(s) => s.contains('\0').then_some(s.as_str()),
            serde_json::Value::Array(items) => items.iter().find_map(find),
            serde_json::Value::Object(map) => map.values().find_map(find),
            _ => None,
        }
    }
    let args = serde_json::to_value(request).unwrap_or(serde_json::Value::Null);
    let bad = find(&args).or_else(|| {
        call.cwd
            .as_str()
            .contains('\0')
            .then_some(call.cwd.as_str())
    });
    match bad {
        Some(bad) => Err(Error::usage(
            "invalid_input",
            format!(
                "{}: contains a NUL byte, which no argument or path can",
                diff::path_text(bad.as_bytes())
            ),
        )),
        None => Ok(()),
    }
}

/// A request as it is read: the verb and its arguments, which must be a JSON object.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tagged {
    verb: String,
    args: serde_json::Map<String, serde_json::Value>,
}

impl Request {
    /// The request of verb `verb` with JSON arguments `args` (unknown arguments, missing
    /// required ones and wrong types are refused, naming them).
    pub fn from_verb(
        verb: &str,
        args: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Request, String> {
        Request::try_from(Tagged {
            verb: verb.to_owned(),
            args,
        })
    }
}

impl Outcome {
    /// The refusal's message, if the outcome is one (exit status 1).
    pub fn refusal(&self) -> Option<&str> {
        match self {
            Outcome::Merge(o) => o.message.as_deref(),
            Outcome::Fsck(o) => o.message.as_deref(),
            Outcome::Push(o) => o.message.as_deref(),
            Outcome::RefSet(o) | Outcome::RefRm(o) => o.message.as_deref(),
            Outcome::Diff(o) if o.differ => o.message.as_deref(),
            Outcome::Undo(o) | Outcome::Redo(o) => match o {
                UndoOutcome::Done(d) => d.message.as_deref(),
                UndoOutcome::Nothing(n) => Some(&n.message),
            },
            _ => None,
        }
    }

    /// The exit status: 0, or 1 for a refusal.
    pub fn exit(&self) -> u8 {
        u8::from(self.refusal().is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(body: &str) -> Result<crate::wire::CallRequest, String> {
        serde_json::from_str(body).map_err(|e| e.to_string())
    }

    #[test]
    fn a_request_is_a_verb_and_an_object_of_its_arguments_and_nothing_else() {
        let ok = call(r#"{"cwd": "/", "request": {"verb": "log", "args": {"max_count": 5.0}}}"#)
            .expect("a whole float is a count");
        let Request::Log(log) = ok.request else {
            panic!("a log")
        };
        assert_eq!(log.max_count, Some(5));
        for bad in [
            // The arguments as a list, which serde would read field by field.
            r#"{"cwd": "/", "request": {"verb": "checkpoint", "args": [null, null]}}"#,
            r#"{"cwd": "/", "request": {"verb": "log", "args": {}, "extra": 1}}"#,
            r#"{"cwd": "/", "request": {"verb": "log", "args": {"max_count": 1.5}}}"#,
            r#"{"cwd": "/", "request": {"verb": "log", "args": {"max_count": -1}}}"#,
            r#"{"cwd": "/", "request": {"verb": "gc", "args": {"prune_ops": 4294967296}}}"#,
            r#"{"cwd": "/", "request": {"verb": "nope", "args": {}}}"#,
            r#"{"cwd": "/", "request": {"verb": "status"}}"#,
        ] {
            assert!(call(bad).is_err(), "accepted {bad}");
        }
    }

    #[test]
    fn every_verb_reads_back_as_itself() {
        for verb in Request::VERBS {
            // The least each takes: its required arguments, as strings.
            let required: &[&str] = match *verb {
                "onboard" => &["src"],
                "import" => &["src", "rev"],
                "snapshot" => &["worktree"],
                "checkout" => &["snapshot", "dest"],
                "rollback" => &["worktree", "snapshot"],
                "merge" => &["snapshot", "into"],
                "worktree_remove" | "worktree_rebind" => &["path"],
                "diff" => &["a", "b"],
                "show" => &["object"],
                "ref_set" => &["name", "snapshot"],
                "ref_rm" => &["name"],
                "remote_add" => &["name", "url"],
                "remote_rm" => &["name"],
                "mount" | "unmount" => &["dir"],
                "policy_allow" | "policy_revoke" => &["worktree"],
                "policy_request" => &["worktree", "by"],
                _ => &[],
            };
            let args = required
                .iter()
                .map(|k| ((*k).to_owned(), serde_json::Value::from("x")))
                .collect();
            let request = Request::from_verb(verb, args).expect(verb);
            assert_eq!(request.verb(), *verb);
            let wire = serde_json::to_string(&request).expect("encodes");
            let back: Request = serde_json::from_str(&wire).expect("decodes");
            assert_eq!(back.verb(), *verb);
        }
    }
}
