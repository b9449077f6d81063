//! `checkout SNAP DEST`: a snapshot hydrated into a new or empty directory.

use camino::Utf8PathBuf;
use cas::SnapshotId;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `checkout`: hydrate a snapshot into a new or empty directory.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckoutOptions {
    /// Snapshot id prefix, ref or checkpoint name.
    #[schemars(extend("x-snapshot" = true))]
    pub snapshot: String,
    /// The destination directory.
    #[schemars(with = "String")]
    pub dest: Utf8PathBuf,
    /// Leave dependency layers (node_modules, .venv, ... saved by `cairn deps save`) out.
    #[serde(default)]
    pub no_deps: bool,
}

impl CheckoutOptions {
    /// Check `snapshot` out into `dest`.
    pub fn new(snapshot: impl Into<String>, dest: impl Into<Utf8PathBuf>) -> CheckoutOptions {
        CheckoutOptions {
            snapshot: snapshot.into(),
            dest: dest.into(),
            no_deps: false,
        }
    }
}

/// What `checkout` wrote.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckoutOutcome {
    /// The new worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The snapshot.
    pub snapshot: SnapshotId,
    /// Files written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
    /// The dependency layers attached (written into the worktree; never captured).
    pub deps: Vec<crate::deps::AttachedDeps>,
}

impl Engine {
    /// `cairn checkout SNAP DEST`.
    pub fn checkout(
        &self,
        call: &Call,
        options: CheckoutOptions,
    ) -> Result<CheckoutOutcome, Error> {
        let store = self.store(Access::Write)?;
        let id = resolve_snapshot(&store.reader()?, &call.cwd, &options.snapshot)?;
        let out = self.worktrees.checkout(
            &store,
            id,
            &call.path(&options.dest),
            &fs_manager::WorktreeCheckoutOptions {
                progress: call.progress,
            },
        )?;
        let attach = if options.no_deps {
            Vec::new()
        } else {
            crate::deps::plan(&store, id, &out.worktree)?
        };
        let deps = self.write_deps(
            &store,
            &out.worktree,
            &attach,
            Registered::Yes,
            call.progress,
        )?;
        Ok(CheckoutOutcome {
            worktree: out.worktree,
            snapshot: out.snapshot,
            files: out.files,
            bytes: out.bytes,
            deps,
        })
    }
}

/// Whether the folder dependency layers are written into is a registered worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Registered {
    /// A worktree: its record names the layers (out of scope from the first file on).
    Yes,
    /// A folder no record names (`verify`'s throwaway view).
    No,
}

impl Engine {
    /// Writes the dependency layers `attach` (planned for `root` by [`crate::deps::plan`])
    /// into the folder `root` as `checkout` writes them; how an outcome names them.
    pub(crate) fn write_deps(
        &self,
        store: &cas::Store,
        root: &camino::Utf8Path,
        attach: &[crate::deps::Attach],
        registered: Registered,
        progress: &dyn cas::Progress,
    ) -> Result<Vec<crate::deps::AttachedDeps>, Error> {
        let layers: Vec<_> = attach.iter().map(crate::deps::Attach::to_write).collect();
        let written = match registered {
            Registered::Yes => (self.worktrees).attach_deps(store, root, &layers, progress)?,
            Registered::No => fs_manager::write_layers(store, root, &layers, progress)?,
        };
        Ok((attach.iter().zip(written))
            .map(|(a, w)| crate::deps::AttachedDeps {
                cloned: Some(w.cloned),
                ..crate::deps::AttachedDeps::of(a)
            })
            .collect())
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Hydrate a snapshot into a new or empty directory and register it as an isolated worktree.
    Checkout(CheckoutOptions) -> CheckoutOutcome = "checkout" via checkout [Route, Tool];
}

impl VerbSpec for verbs::Checkout {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        vec![&options.snapshot]
    }

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"snapshot": "base", "dest": "wt-copy", "cwd": "/home/agent/project"}"#);
}
