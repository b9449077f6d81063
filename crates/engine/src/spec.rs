//! What is said of each verb apart: every verb as a type of its own ([`verbs`]), its types
//! ([`VerbTypes`], from its line in the table) and what it says of itself beyond them
//! ([`VerbSpec`], written in its engine module). Below every verb's module, so each can
//! implement its [`VerbSpec`] beside its options; the table names their types, which are
//! resolved where it is expanded (`request.rs`, above them), not here.

/// A verb's types, as its line in the table gives them.
pub trait VerbTypes {
    /// Its options: the arguments of its [`Request`] variant.
    type Options;
    /// Its outcome: what its [`Outcome`] variant holds.
    type Outcome;
    /// Its name ([`Request::verb`]).
    const NAME: &'static str;
}

/// What a verb says of itself beyond its types, written in its engine module beside its
/// options and outcome (`impl VerbSpec for verbs::Snapshot {}` says it needs none of it).
/// [`Request::named_snapshots`], [`Outcome::refusal`] and the verb's entry in
/// `docs/openapi.yaml` read it; every verb of the table must implement it.
pub trait VerbSpec: VerbTypes {
    /// The snapshots `options` name as they name them (ids, prefixes, refs, checkpoint
    /// names) that a remote could supply when the store lacks them.
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        let _ = options;
        Vec::new()
    }

    /// The refusal's message, if `outcome` is one (exit status 1, HTTP 409).
    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        let _ = outcome;
        None
    }

    /// What a refusal of its route means (the description of its HTTP 409), if it can
    /// refuse there.
    const REFUSED: Option<&'static str> = None;

    /// An example of its route's JSON arguments (`docs/openapi.yaml`); every route has one,
    /// and it must be a valid request of the verb.
    const EXAMPLE: Option<&'static str> = None;
}

/// The table of every verb: its doc comment (its description on every face), its
/// [`crate::Request`] variant, options and outcome types, its name, the [`crate::Engine`]
/// method that runs it and where besides the command line and `/v1/call` it is offered
/// (`Route`: `POST /v1/{verb}`; `Tool`: a `cairn mcp` tool). Calls the macro `$then` with
/// it.
macro_rules! verb_table {
    ($then:ident) => {
        $then! {
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
    };
}
pub(crate) use verb_table;

macro_rules! markers {
    ($( $(#[doc = $doc:literal])+ $variant:ident($options:ty) -> $outcome:ty = $verb:literal via $method:ident [$($face:ident),*]; )*) => {
        /// Each verb as a type of its own, so that what is said of one verb alone (its
        /// [`VerbSpec`], a face's rendering of its outcome) is an impl for it, which the
        /// compiler requires of every verb.
        pub mod verbs {
            $( $(#[doc = $doc])+ #[derive(Debug)] pub enum $variant {} )*
        }
    };
}

verb_table!(markers);
