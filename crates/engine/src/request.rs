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
use crate::run::{RunOptions, RunOutcome};
use crate::view::{
    DiffOptions, DiffOutcome, LogOptions, LogOutcome, ReviewOptions, ReviewOutcome, StatusOptions,
    StatusOutcome,
};
use crate::worktrees::{
    CheckoutOptions, CheckoutOutcome, ImportOptions, ImportOutcome, OnboardOptions, OnboardOutcome,
    RollbackOptions, RollbackOutcome, SnapshotOptions, SnapshotOutcome, WorktreeListOptions,
    WorktreeListOutcome, WorktreePathOptions, WorktreesChanged,
};

/// Where a verb is offered besides the command line and `/v1/call`, which take every verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    /// `POST /v1/{verb}` of `cairn serve`.
    Route,
    /// A tool of `cairn mcp`.
    Tool,
}

/// One verb of [`Request`], as its faces describe and read it.
pub struct Verb {
    pub(crate) name: &'static str,
    /// The doc comment of its [`Request`] variant, a line an item.
    pub(crate) doc: &'static [&'static str],
    pub(crate) faces: &'static [Face],
    /// Its options type's schema.
    pub(crate) schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
    /// Its options type read from JSON, naming where reading failed.
    pub(crate) parse:
        fn(serde_json::Value) -> Result<Request, serde_path_to_error::Error<serde_json::Error>>,
}

macro_rules! verbs {
    ($( $(#[doc = $doc:literal])+ $variant:ident($options:ty) -> $outcome:ty = $verb:literal via $method:ident [$($face:ident),*]; )*) => {
        /// One call of any verb, with its options. Serialized as
        /// `{"verb": NAME, "args": {...}}`; the args' names are the verb's JSON arguments.
        #[derive(Debug, Clone, Serialize, Deserialize)]
        #[serde(tag = "verb", content = "args", try_from = "Tagged")]
        pub enum Request {
            $( $(#[doc = $doc])+ #[serde(rename = $verb)] $variant($options), )*
        }

        /// Every verb as the faces that call verbs by name describe it (see [`Verb`]).
        pub(crate) const ALL_VERBS: &[Verb] = &[$(
            Verb {
                name: $verb,
                doc: &[$($doc),+],
                faces: &[$(Face::$face),*],
                schema: <$options as schemars::JsonSchema>::json_schema,
                parse: |args| serde_path_to_error::deserialize(args).map(Request::$variant),
            },
        )*];

        impl TryFrom<Tagged> for Request {
            type Error = RequestError;

            fn try_from(t: Tagged) -> Result<Request, RequestError> {
                let args = serde_json::Value::Object(t.args);
                match t.verb.as_str() {
                    $( $verb => serde_json::from_value(args)
                        .map(Request::$variant)
                        .map_err(|source| RequestError::Arguments { verb: $verb, source }), )*
                    _ => Err(RequestError::UnknownVerb(t.verb)),
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

            /// Walks the options (the verb's arguments, each a field at depth 1).
            pub(crate) fn visit_options(&self, visitor: &mut dyn crate::texts::Visit) {
                match self {
                    $( Request::$variant(o) => crate::texts::walk(o, visitor), )*
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
                crate::limits::refuse_oversized(request.verb(), &call.cwd, |v| {
                    request.visit_options(v)
                })?;
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
                        // A command that ran is never run again.
                        Err(e) if fetched < MAX_FETCHES_PER_CALL
                            && !matches!(request, Request::Run(_))
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
    /// Three-way merge a snapshot into the git repository it came from, as a commit on a new branch (or with checkout: the current branch, index and files). Conflicts are reported and the repository is left exactly as it was.
    Merge(MergeOptions) -> MergeOutcome = "merge" via merge [Route, Tool];
    /// The worktrees the store knows.
    WorktreeList(WorktreeListOptions) -> WorktreeListOutcome = "worktree_list" via worktree_list [];
    /// Forget a worktree (its files stay).
    WorktreeRemove(WorktreePathOptions) -> WorktreesChanged = "worktree_remove" via worktree_remove [];
    /// Register a moved worktree at its new path.
    WorktreeRebind(WorktreePathOptions) -> WorktreesChanged = "worktree_rebind" via worktree_rebind [];
    /// Compare two snapshots or worktrees (a directory means its live files): added, removed, modified and renamed files with line counts.
    Diff(DiffOptions) -> DiffOutcome = "diff" via diff [Route, Tool];
    /// Changes in a worktree since its head snapshot.
    Status(StatusOptions) -> StatusOutcome = "status" via status [Route, Tool];
    /// The task's changes against its baseline (the first checkpoint).
    Review(ReviewOptions) -> ReviewOutcome = "review" via review [Route, Tool];
    /// Snapshot history, newest first, of a worktree or from a snapshot.
    Log(LogOptions) -> LogOutcome = "log" via log [Route, Tool];
    /// A snapshot's (or tree's) listing, SNAP or SNAP:PATH.
    Show(ShowOptions) -> ShowOutcome = "show" via show [Route];
    /// Point a ref at a snapshot; NAME@REMOTE sets a ref on a remote, only if it still holds `expect` (or does not exist), so two machines never overwrite each other.
    RefSet(RefSetOptions) -> RefsOutcome = "ref_set" via ref_set [Route, Tool];
    /// Remove a ref (NAME@REMOTE: on the remote; ID@REMOTE: unpin a snapshot pushed by id).
    RefRm(RefRmOptions) -> RefsOutcome = "ref_rm" via ref_rm [Route];
    /// The refs of the store, or of a remote.
    RefList(RefListOptions) -> RefsOutcome = "ref_list" via ref_list [Route, Tool];
    /// Verify every object and reference of the store.
    Fsck(FsckOptions) -> FsckOutcome = "fsck" via fsck [Route];
    /// Drop what nothing reaches and shrink the store file. keep_within drops op-log entries older than that many days; max_size then drops older history (op-log entries, unnamed checkpoints, snapshot ancestry), oldest first, until the store's database file takes at most that many bytes (mount layers are not counted); refs, worktree heads, named checkpoints, task baselines, each worktree's newest undoable change and what is within keep_within always stay, and `retained` says what they keep. Waits until no other call uses the store.
    Gc(GcOptions) -> GcOutcome = "gc" via gc [Route, Tool];
    /// Snapshot a directory onto its checkpoint stack, optionally named (onboards it in place if new; nothing git owns is touched). The first checkpoint starts a task.
    Checkpoint(CheckpointOptions) -> CheckpointOutcome = "checkpoint" via checkpoint [Route, Tool];
    /// Roll the worktree back to a checkpoint (default: the latest); later checkpoints stay reachable.
    Rewind(RewindOptions) -> RollbackOutcome = "rewind" via rewind [Route, Tool];
    /// Revert the newest change set of the worktree that is not undone yet. Refuses, changing nothing, if any file it would touch changed since; each such file is listed with the reason.
    Undo(UndoOptions) -> UndoOutcome = "undo" via undo [Route, Tool];
    /// Re-apply the newest undone change set of the worktree.
    Redo(UndoOptions) -> UndoOutcome = "redo" via redo [Route, Tool];
    /// The worktree's op log: every recorded change, oldest first.
    OpLog(OpLogOptions) -> OpLogOutcome = "op_log" via op_log [];
    /// The worktree's snapshots and checkpoints, newest first.
    Timeline(TimelineOptions) -> TimelineOutcome = "timeline" via timeline [];
    /// Accept the task's changes (or only the given paths): the baseline moves forward to them.
    Accept(AcceptOptions) -> AcceptOutcome = "accept" via accept [];
    /// Discard the task's changes (or only the given paths): the worktree goes back to the baseline.
    Discard(DiscardOptions) -> DiscardOutcome = "discard" via discard [];
    /// Finish or roll back an operation a crash interrupted.
    Recover(RecoverOptions) -> RecoverOutcome = "recover" via recover [];
    /// Add a remote (s3://BUCKET[/PREFIX] or file:///PATH), checking it is reachable and whether it enforces conditional writes.
    RemoteAdd(RemoteAddOptions) -> RemotesOutcome = "remote_add" via remote_add [Route];
    /// Forget a remote (nothing on it changes).
    RemoteRm(RemoteRmOptions) -> RemotesOutcome = "remote_rm" via remote_rm [Route];
    /// The remotes this store knows, and whether refs can be updated on each.
    RemoteList(RemoteListOptions) -> RemotesOutcome = "remote_list" via remote_list [Route, Tool];
    /// Copy snapshots (with their history) to a remote so other machines can check them out by id, sending only what it lacks; a ref also sets REF@REMOTE if nobody moved it meanwhile.
    Push(PushOptions) -> PushOutcome = "push" via push [Route, Tool];
    /// Copy snapshots (with their history) from a remote, verifying every object; updates NAME@REMOTE, never a local ref.
    Pull(PullOptions) -> PullOutcome = "pull" via pull [Route, Tool];
    /// Mount a snapshot as a copy-on-write worktree, ready at once: files are read from the store when first opened and writes stay in the worktree's own layer; snapshot, status, diff and rollback work on it as on any worktree. Without a snapshot, attaches a registered mount again (its layer keeps every change).
    Mount(MountOptions) -> MountOutcome = "mount" via mount [Route, Tool];
    /// Unmount a mounted worktree; its layer stays, so a later mount brings every change back. With materialize: leave an ordinary directory with the worktree's current files instead.
    Unmount(UnmountOptions) -> UnmountOutcome = "unmount" via unmount [Route, Tool];
    /// A worktree's remembered sandbox grants: the paths `cairn run` of it may write beyond the worktree, and whether it may use the network; `once` holds those for the next run only; `requests` lists the grants asked for that wait for a person. Reading is allowed everywhere.
    Policy(PolicyOptions) -> PolicyOutcome = "policy" via policy [Route, Tool];
    /// Ask for a grant: writing beneath paths, or the network, for every later `cairn run` of a worktree (or, with once, the next one only). Granting is the user's decision: this records a request (who asked, what, why) that `cairn policy` lists and a person grants or denies on a terminal; an MCP client that supports elicitation asks its user at once. Ask for exactly what a run's `denied` listed, and say why. A path must be absolute, existing and canonical, never the store's folder; /proc, /sys and /dev are never granted; system directories and the user's credentials are granted only when the person names them.
    PolicyAllow(PolicyAllowOptions) -> PolicyOutcome = "policy_allow" via policy_allow [Route, Tool];
    /// Take back grants of a worktree (with once: next-run-only grants), recorded in its op log; one that was not granted is an error.
    PolicyRevoke(PolicyRevokeOptions) -> PolicyOutcome = "policy_revoke" via policy_revoke [Route, Tool];
    /// Record a grant an agent asks for, for a person to decide on.
    PolicyRequest(PolicyRequestOptions) -> PolicyOutcome = "policy_request" via policy_request [];
    /// Run a command in a worktree, confined by the OS sandbox (Landlock): it may write only in the worktree (and `also`), the worktrees' remembered grants and a private $TMPDIR; it reads everywhere but the store; no network unless a grant allows it. The command runs where the engine runs: through cairn serve or cairn mcp, on the server's machine, with no stdin; its stdout and stderr are returned (each cut at 1 MiB). Afterwards each worktree is snapshotted and every denied path (secret) the command changed is put back and listed in `violations`; `denied` lists what the kernel refused it, to ask for with policy_allow. Only a person on a terminal widens the sandbox (`cairn run --network`, `--allow-write`, `--no-sandbox`).
    Run(RunOptions) -> Box<RunOutcome> = "run" via run_boxed [Route, Tool];
}

/// The snapshot specs a request names that a fetch could supply: full ids and remote refs.
fn snapshot_specs(request: &Request) -> Vec<String> {
    request
        .named_snapshots()
        .into_iter()
        .filter(|s| {
            crate::remotes::is_full_id(s)
                || crate::engine::remote_ref(s)
                    .is_some_and(|(n, r)| !n.is_empty() && remote::validate_remote_name(r).is_ok())
        })
        .map(str::to_owned)
        .collect()
}

impl Request {
    /// The snapshots the request names as it names them (ids, prefixes, refs, checkpoint
    /// names; `show`'s `SNAP` of `SNAP:PATH`). `push` and `pull` name none: their snapshots
    /// are to send or to get, not to fetch first.
    pub fn named_snapshots(&self) -> Vec<&str> {
        match self {
            Request::Checkout(o) => vec![&o.snapshot],
            Request::Rollback(o) => vec![&o.snapshot],
            Request::RefSet(o) => vec![&o.snapshot],
            Request::Merge(o) => std::iter::once(o.snapshot.as_str())
                .chain(o.base.as_deref())
                .collect(),
            Request::Diff(o) => vec![&o.a, &o.b],
            Request::Show(o) => {
                vec![
                    o.object
                        .split_once(':')
                        .map_or(o.object.as_str(), |(spec, _)| spec),
                ]
            }
            Request::Mount(o) => o.snapshot.as_deref().into_iter().collect(),
            Request::Rewind(o) => o.to.as_deref().into_iter().collect(),
            Request::Log(o) => o.target.as_deref().into_iter().collect(),
            _ => Vec::new(),
        }
    }
}

/// How often one call may stop at a snapshot only promised by a remote, fetch it and run
/// again (a `log` through a history fetched one snapshot at a time).
const MAX_FETCHES_PER_CALL: usize = 256;

/// No command line or path can hold a NUL byte: one in a request is bad input, never a
/// path to try.
fn refuse_nul(call: &Call, request: &Request) -> Result<(), Error> {
    let has_nul = |s: &str| s.contains('\0');
    let bad = crate::texts::find_text(request, &has_nul)
        .or_else(|| has_nul(call.cwd.as_str()).then(|| call.cwd.to_string()));
    match bad {
        Some(bad) => Err(crate::error::ArgumentError::Nul {
            text: diff::path_text(bad.as_bytes()),
        }
        .into()),
        None => Ok(()),
    }
}

/// Why a verb's name and JSON arguments are not a [`Request`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// No verb has that name.
    #[error("unknown verb {0:?}")]
    UnknownVerb(String),
    /// The arguments are not the verb's options (an unknown or missing argument, a wrong
    /// type or range).
    #[error("{verb}: {source}")]
    Arguments {
        /// The verb.
        verb: &'static str,
        /// What reading its options said, naming the argument.
        #[source]
        source: serde_json::Error,
    },
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
    ) -> Result<Request, RequestError> {
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
            Outcome::Run(o) => o.message.as_deref(),
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

    /// Each verb's snapshot arguments, as the JSON key list once found them.
    #[test]
    fn a_request_names_its_snapshots() {
        let named = |verb: &str, args: serde_json::Value| {
            let serde_json::Value::Object(args) = args else {
                panic!("an object")
            };
            let request = Request::from_verb(verb, args).expect(verb);
            request
                .named_snapshots()
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        use serde_json::json;
        assert_eq!(
            named("checkout", json!({ "snapshot": "s", "dest": "d" })),
            ["s"]
        );
        assert_eq!(
            named(
                "merge",
                json!({ "snapshot": "s", "into": "r", "base": "b" })
            ),
            ["s", "b"]
        );
        assert_eq!(named("diff", json!({ "a": "x", "b": "y" })), ["x", "y"]);
        assert_eq!(
            named("show", json!({ "object": "main@origin:src/a" })),
            ["main@origin"]
        );
        assert_eq!(named("rewind", json!({ "to": "t" })), ["t"]);
        assert_eq!(named("log", json!({ "target": "main" })), ["main"]);
        assert_eq!(
            named("mount", json!({ "dir": "d", "snapshot": "s" })),
            ["s"]
        );
        assert_eq!(
            named("ref_set", json!({ "name": "n", "snapshot": "s" })),
            ["s"]
        );
        assert!(named("push", json!({ "snapshots": ["a"] })).is_empty());
        assert!(named("status", json!({ "worktree": "w" })).is_empty());
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
                "run" => &["worktree"],
                _ => &[],
            };
            let mut args: serde_json::Map<String, serde_json::Value> = required
                .iter()
                .map(|k| ((*k).to_owned(), serde_json::Value::from("x")))
                .collect();
            if *verb == "run" {
                args.insert("command".to_owned(), serde_json::json!(["x"]));
            }
            let request = Request::from_verb(verb, args).expect(verb);
            assert_eq!(request.verb(), *verb);
            let wire = serde_json::to_string(&request).expect("encodes");
            let back: Request = serde_json::from_str(&wire).expect("decodes");
            assert_eq!(back.verb(), *verb);
        }
    }
}
