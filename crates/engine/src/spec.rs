//! What is said of each verb apart: every verb as a type of its own ([`verbs`]), its types
//! ([`VerbTypes`], from its `verb!` block) and what it says of itself beyond them
//! ([`VerbSpec`]), both written in its engine module. Below every verb's module, so each
//! can declare its verbs beside their options.
//!
//! No list of verbs is written by hand: each module declares its verbs in a `verb!` block
//! (`verb!`), and `build.rs` collects the blocks into the verb table (`verb_table!`), from
//! which the [`verbs`] types here and `Request`, `Outcome`, `Engine::handle` and
//! `with_verbs!` in `request.rs` are expanded. A verb of its own module goes in
//! `src/verbs/`, whose files `build.rs` declares (and re-exports at the crate's root).

/// A verb's types, as its `verb!` block gives them.
pub trait VerbTypes {
    /// Its options: the arguments of its [`Request`](crate::Request) variant.
    type Options;
    /// Its outcome: what its [`Outcome`](crate::Outcome) variant holds.
    type Outcome;
    /// Its name ([`Request::verb`](crate::Request::verb)).
    const NAME: &'static str;
}

/// What a verb says of itself beyond its types, written in its engine module beside its
/// options and outcome (`impl VerbSpec for verbs::Snapshot {}` says it needs none of it).
/// [`Request::named_snapshots`](crate::Request::named_snapshots),
/// [`Outcome::refusal`](crate::Outcome::refusal) and the verb's entry in `docs/openapi.yaml`
/// read it; every verb of the table must implement it.
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

    /// It only reads: it opens the store read-only and changes nothing anywhere, but for
    /// fetching from a remote what it reads and the store lacks (where it is not offline),
    /// which adds to the store and changes no answer. Its MCP tool's `readOnlyHint`;
    /// `cairn mcp` runs it offline first, without holding the store for writing.
    const READS_ONLY: bool = false;
}

/// Declares verbs, in the module that implements them: each verb's doc comment (its
/// description on every face), its [`crate::Request`] variant, options and outcome types,
/// its name, the [`crate::Engine`] method that runs it and where besides the command line
/// and `/v1/call` it is offered (`Route`: `POST /v1/{verb}`; `Tool`: a `cairn mcp` tool):
///
/// ```text
/// verb! {
///     /// Snapshot a worktree.
///     Snapshot(SnapshotOptions) -> SnapshotOutcome = "snapshot" via snapshot [Route, Tool];
/// }
/// ```
///
/// Here it gives the verb its [`VerbTypes`], the types named as that module names them.
/// `build.rs` reads the same blocks (a line `verb! {` at the start of a line, the verbs, a
/// line `}`; the build fails naming the file and line of anything else in one) and writes
/// the table of every verb from them, `verb_table!`, in the order of their files' paths and
/// lines.
macro_rules! verb {
    ($( $(#[doc = $doc:literal])+ $variant:ident($options:ty) -> $outcome:ty = $verb:literal via $method:ident [$($face:ident),*]; )+) => {
        $( impl $crate::spec::VerbTypes for $crate::spec::verbs::$variant {
            type Options = $options;
            type Outcome = $outcome;
            const NAME: &'static str = $verb;
        } )+
    };
}
pub(crate) use verb;

// `verb_table!($then)`: calls the macro `$then` with every verb's block, as `verb!` takes
// them (the types only as text: `Request` names them through each verb's `VerbTypes`).
include!(concat!(env!("OUT_DIR"), "/verb_table.rs"));
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
