//! `cairn-engine`: cairn as a library. An [`Engine`] owns an open store and everything
//! long-lived around it: the lock that lets `gc` have the store to itself, reopening after
//! a write that ran out of space, the thread pools calls run on, and the store's
//! `fs_manager::Worktrees` (per-worktree locks, kept stat caches and, when watching, the
//! inotify watches). Each verb is one method taking an options struct and returning an
//! outcome that serializes to the JSON object SPEC.md names for that verb (extra fields
//! allowed) and deserializes back, so a face can render an outcome from another process.
//!
//! Nor does it link git: `onboard`'s git source, `onboard --git`, `merge`, `combine`,
//! `rebase` and recovering a `merge --checkout` go through the [`Git`] backend given to
//! [`Engine::with_git`] (the `cairn-git` crate's gitoxide one). An engine without one
//! records no git source and refuses those calls (code `no_git`), naming the repository
//! (`combine` and `rebase`, which have none, naming themselves). Nor does it confine
//! processes: `run` starts its command through the [`Sandbox`] given to
//! [`Engine::with_sandbox`] (the `sandbox` crate's Landlock one), which also puts back the
//! secrets the command touched; an engine without one refuses `run`.
//!
//! Every call fails with an [`Error`]: opaque, with a stable [`Code`] (one enum, each code
//! with its exit status) and, as its `source()`, the typed error it comes of (an
//! operation's own, such as [`PolicyError`], or a lower crate's, such as `cas::ReadError`).
//!
//! The engine does not print, parse command lines or know HTTP: the `cairn` CLI, `cairn
//! serve` and `cairn mcp` are faces that build a [`Request`], call an engine (or a server
//! holding one) and present the [`Outcome`]. The caller's directory and progress are
//! arguments of each call ([`Call`]), never process-wide state.
//!
//! Its modules form layers; each uses only those below it:
//!
//! ```text
//! wire                               a call and its answer as values (for another process)
//! verb                               a verb as routes and tools see it: schema, reading
//! request                            Request / Outcome of every verb, Engine::handle
//! limits                             how large a request's arguments may be (as JSON)
//! verbs                              the verbs, one module each (verbs/, declared by build.rs)
//! view, reversible, objects,         what several verbs share: comparing trees, undo and
//! remotes, transfer, policy,         redo, refs, remotes and fetching, grants, the base
//! ancestry, deps                     of several snapshots' changes, dependency layers
//! worktrees                          worktree types the worktree verbs share
//! mounts                             worktrees served by this engine (FUSE)
//! engine                             Engine, Call, resolving snapshot names
//! git, confine                       Git, Sandbox: the backends an embedder injects
//! store                              finding and holding the store; thread pools
//! path                               PathArg, RawPath; directories against the caller's
//! texts                              the strings a value holds (through Serialize)
//! spec                               verb!, the verb table, each verb as a type, VerbSpec
//! error                              Error: a Code, its exit status, the typed source
//! ```
//!
//! An agent harness can drive a loop without a process boundary (`cairn-git`'s crate doc
//! carries it on to the merge):
//!
//! ```
//! use cairn_engine::{Call, CheckoutOptions, DiffOptions, Engine, OnboardOptions, SnapshotOptions};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! # let dir = camino::Utf8PathBuf::try_from(tmp.path().to_path_buf())?;
//! // A project.
//! let repo = dir.join("project");
//! std::fs::create_dir(&repo)?;
//! std::fs::write(repo.join("hello.txt"), "hello\n")?;
//!
//! // Open (creating) a store, and act from `dir`.
//! let engine = Engine::create(dir.join("store"))?;
//! let call = Call::new(dir.clone());
//!
//! // Onboard the project, and check its snapshot out where an agent may work.
//! let onboarded = engine.onboard(&call, OnboardOptions::new(&repo))?;
//! let work = dir.join("agent");
//! engine.checkout(&call, CheckoutOptions::new(onboarded.snapshot.to_string(), &work))?;
//!
//! // The agent edits; snapshot what it did and look at the change.
//! std::fs::write(work.join("hello.txt"), "hello, world\n")?;
//! let snap = engine.snapshot(&call, SnapshotOptions::new(&work).message("greet the world"))?;
//! let diff = engine.diff(
//!     &call,
//!     DiffOptions::new(onboarded.snapshot.to_string(), snap.snapshot.to_string()),
//! )?;
//! assert_eq!(diff.modified.len(), 1);
//! # Ok(())
//! # }
//! ```
#![deny(clippy::unwrap_used)]

mod ancestry;
mod confine;
mod deps;
mod engine;
mod error;
mod git;
mod lazy;
pub mod limits;
mod mounts;
mod objects;
pub mod path;
mod policy;
mod remotes;
mod request;
mod reversible;
mod spec;
mod store;
mod texts;
mod transfer;
mod verb;
pub mod verbs;
mod view;
pub mod wire;
mod worktrees;

/// How a store is opened (created if missing, lock timeout, cache size, read-only): the
/// store's own options, here so that an embedder needs this crate alone.
pub use cas::OpenOptions;
pub use cas::{Progress, Silent};
// Outcomes name tree paths by these, so an embedder needs no other crate for them.
pub use ancestry::AncestryError;
pub use confine::{
    Captured, Change, ConfineError, Confined, Denial, DenialsUnknown, Output, ProcessDir, PutBack,
    Ran, Sandbox, SandboxPolicy, SavedSecrets, WideningError,
};
pub use deps::{
    Attach, AttachedDeps, BUILT_IN, DepsError, DepsOutcome, LAYERS, LayerItem, LayerLockfile,
    LayerRecord, PAIRS_FILE, ROOT_MARKER,
};
pub use engine::{Call, Engine};
pub use error::{
    ArgumentError, Code, ConfigError, DiscardError, EXIT_STORE, EXIT_USAGE, Error, ErrorReply,
    GitError, IoError,
};
pub use fs_manager::{GrantRequest, GrantSet, SandboxGrants};
pub use git::{
    Git, GitCombine, GitCombined, GitImport, GitImported, GitMerge, GitMerged, GitRecovered, NoGit,
};
pub use mount::{FuseUnavailable, fuse_available};
pub use mounts::{MATERIALIZE_COPY, MountsError, materialize_copy};
pub use objects::{InitError, InitOutcome, RefEntry, RefsError, RefsOutcome, init_store};
pub use path::{PathArg, PathError, RawPath};
pub use path_policy::{RepoPath, RepoPathBuf};
pub use policy::{
    MAX_ASKER, MAX_GRANT_PATHS, MAX_OPEN_REQUESTS, MAX_REASON, PolicyError, PolicyOutcome,
    check_writable,
};
pub use remotes::{RemoteEntry, RemotesError, RemotesOutcome};
pub use request::{Face, Outcome, Request, RequestError, Verb};
pub use reversible::{NothingToUndo, RefusedPath, UndoDone, UndoOptions, UndoOutcome};
pub use spec::{VerbSpec, VerbTypes};
pub use store::discover_store;
pub use transfer::TransferError;
pub use verb::{ArgumentsError, JsonObject, output_schemas};
pub use view::{
    CheckMark, Detail, DiffOutcome, EntrySide, FileChange, LogEntry, SourceOut, Stats, ViewError,
};
// The public items of each module of `verbs/` (a verb of its own), written by `build.rs`.
include!(concat!(env!("OUT_DIR"), "/verb_exports.rs"));
pub use worktrees::{GitState, SkippedPath, WorktreeHead, WorktreePathOptions, WorktreesChanged};
