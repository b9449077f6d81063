//! `diff A B`: two snapshots or worktrees compared.

use camino::Utf8Path;
use cas::{Reader, TreeId};
use path_policy::RepoPathBuf;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::Error;
use crate::path::{PathArg, tree_paths};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::view::{Detail, DiffOutcome, Side, compare, side};

/// `diff A B`: two snapshots or worktrees (a directory means its live files).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffOptions {
    /// A snapshot or a worktree directory; left out, `b`'s first parent (a first snapshot: none).
    #[serde(default)]
    #[schemars(extend("x-snapshot" = true))]
    pub a: Option<String>,
    /// A snapshot or a worktree directory.
    #[schemars(extend("x-snapshot" = true))]
    pub b: String,
    /// Only these paths.
    #[serde(default)]
    pub paths: Vec<PathArg>,
    /// How much to read.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub detail: Detail,
    /// Each text file's hunks too (`patch`), as `cairn diff -p` prints them.
    #[serde(default)]
    pub patch: bool,
    /// Refuse (exit 1) if anything differs.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub exit_code: bool,
}

impl DiffOptions {
    /// Compare `a` and `b`.
    pub fn new(a: impl Into<String>, b: impl Into<String>) -> DiffOptions {
        DiffOptions {
            a: Some(a.into()),
            b: b.into(),
            ..DiffOptions::default()
        }
    }
}

impl Engine {
    /// `cairn diff A B [-- PATH…]`.
    pub fn diff(&self, call: &Call, options: DiffOptions) -> Result<DiffOutcome, Error> {
        let store = self.store(Access::Read)?;
        let reader = store.reader()?;
        let a = match &options.a {
            Some(a) => side(&self.worktrees, &store, &reader, &call.cwd, a)?,
            None => match first_parent_tree(&reader, &call.cwd, &options.b)? {
                Some(tree) => Side::stored(tree),
                None => {
                    let message = format!("{}: a first snapshot, nothing before it", options.b);
                    return Ok(DiffOutcome {
                        message: Some(message),
                        ..DiffOutcome::default()
                    });
                }
            },
        };
        let b = side(&self.worktrees, &store, &reader, &call.cwd, &options.b)?;
        let root = a.root.as_deref().or(b.root.as_deref());
        let paths = tree_paths(root, &options.paths)?;
        let mut out = compare(&reader, &a, &b, &paths, options.detail, options.patch)?;
        let missing = unmatched(&paths, &out);
        if !missing.is_empty() {
            out.message = Some(format!("no changes under {}", missing.join(", ")));
        }
        if options.exit_code && !out.is_empty() {
            let n = out.stats.files;
            out.message = Some(format!("{n} file{} differ", if n == 1 { "" } else { "s" }));
            out.differ = true;
        }
        Ok(out)
    }
}

/// The tree of snapshot `spec`'s first parent; None for a first snapshot.
fn first_parent_tree(reader: &Reader, cwd: &Utf8Path, spec: &str) -> Result<Option<TreeId>, Error> {
    let id = resolve_snapshot(reader, cwd, spec)?;
    let parent = reader.snapshot(id)?.parents.first().copied();
    Ok(match parent {
        Some(p) => Some(reader.snapshot(p)?.tree),
        None => None,
    })
}

/// The paths asked for that nothing changed under.
fn unmatched(paths: &[RepoPathBuf], changes: &DiffOutcome) -> Vec<String> {
    let all = changes.changes();
    paths
        .iter()
        .filter(|f| {
            !all.iter().any(|c| {
                [c.old_path(), c.new_path()]
                    .into_iter()
                    .flatten()
                    .any(|p| path_policy::raw_path::is_under(p, f.as_bytes()))
            })
        })
        .map(|f| diff::quote_path(f.as_bytes()))
        .collect()
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Compare two snapshots or worktrees (a directory means its live files): added, removed, modified and renamed files with line counts.
    Diff(DiffOptions) -> DiffOutcome = "diff" via diff [Route, Tool];
}

impl VerbSpec for verbs::Diff {
    const READS_ONLY: bool = true;

    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        options
            .a
            .iter()
            .chain([&options.b])
            .map(String::as_str)
            .collect()
    }

    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        if outcome.differ {
            outcome.message.as_deref()
        } else {
            None
        }
    }

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"a": "base", "b": "wt", "cwd": "/home/agent/project"}"#);
}
