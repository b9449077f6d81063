//! `compare`: which of several snapshots (parallel attempts at one task) agree on each path
//! any of them changed against their base, each one's change summary and checks, and which
//! have equal trees.

use std::collections::{BTreeMap, HashMap};

use cas::{ObjectId, SnapshotId, TreeId};
use path_policy::RepoPathBuf;
use serde::{Deserialize, Serialize};

use crate::ancestry::{Named, base_of};
use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::{Code, Error};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::verbs::checks::{CheckEntry, ChecksOptions};
use crate::view::stored_changes;

/// `compare SNAP SNAP… [--base SNAP]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompareOptions {
    /// The snapshots to compare (at least two, each once): refs, id prefixes or checkpoint
    /// names.
    #[schemars(extend("x-snapshot" = true))]
    pub snapshots: Vec<String>,
    /// The snapshot their changes are taken against (default: their nearest common
    /// ancestor).
    #[serde(default)]
    #[schemars(extend("x-snapshot" = true))]
    pub base: Option<String>,
}

impl CompareOptions {
    /// Compare `snapshots`.
    pub fn new<S: Into<String>>(snapshots: impl IntoIterator<Item = S>) -> CompareOptions {
        CompareOptions {
            snapshots: snapshots.into_iter().map(Into::into).collect(),
            base: None,
        }
    }

    /// The snapshot the changes are taken against.
    pub fn base(mut self, base: impl Into<String>) -> CompareOptions {
        self.base = Some(base.into());
        self
    }
}

/// One compared snapshot: its changes against the base, counted as `diff --stat` counts
/// them, and the checks recorded of its tree.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompareSnapshot {
    /// The snapshot.
    #[schemars(with = "String")]
    pub id: SnapshotId,
    /// Its tree.
    #[schemars(with = "String")]
    pub tree: TreeId,
    /// Files changed against the base.
    pub files: u64,
    /// Lines added.
    pub insertions: u64,
    /// Lines removed.
    pub deletions: u64,
    /// The checks recorded of its tree, newest first (as `checks` lists them).
    pub checks: Vec<CheckEntry>,
}

/// A path one or more of the snapshots changed against the base.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ComparePath {
    /// The path.
    pub path: RepoPathBuf,
    /// Every snapshot, in groups of equal content there (same blob and mode; a deletion is a
    /// content, and so is the base's), each group in the order given, the groups in the
    /// order of their first member.
    #[schemars(with = "Vec<Vec<String>>")]
    pub groups: Vec<Vec<SnapshotId>>,
    /// The group that left the path as the base has it (empty if every snapshot changed it).
    #[schemars(with = "Vec<String>")]
    pub unchanged: Vec<SnapshotId>,
    /// The group that deleted the path (empty if none did).
    #[schemars(with = "Vec<String>")]
    pub deleted: Vec<SnapshotId>,
}

/// What `compare` found.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompareOutcome {
    /// The snapshot the changes are taken against.
    #[schemars(with = "String")]
    pub base: SnapshotId,
    /// The snapshots, in the order given.
    pub snapshots: Vec<CompareSnapshot>,
    /// Every path any of them changed, in byte order (as git prints paths).
    pub paths: Vec<ComparePath>,
    /// Groups (two or more) of snapshots with equal trees, in the order given.
    #[schemars(with = "Vec<Vec<String>>")]
    pub identical: Vec<Vec<SnapshotId>>,
}

/// Why snapshots cannot be compared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompareError {
    /// Fewer than two snapshots.
    #[error("compare needs at least two snapshots, {given} given")]
    TooFew {
        /// How many were given.
        given: usize,
    },
    /// A name resolved to another snapshot while `compare` ran (a ref moved).
    #[error("compare: {spec} named snapshot {was}, then {now} (it moved); compare again")]
    Moved {
        /// The name.
        spec: String,
        /// What it named first.
        was: SnapshotId,
        /// What it named when its checks were read.
        now: SnapshotId,
    },
}

crate::error::coded!(CompareError);

impl CompareError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            CompareError::TooFew { .. } => Code::Usage,
            CompareError::Moved { .. } => Code::RefMoved,
        }
    }
}

/// What a snapshot holds at a changed path: the base's content, or a file (blob and mode),
/// or nothing (deleted, or a directory now).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Content {
    AsBase,
    Changed(Option<(ObjectId, String)>),
}

impl Engine {
    /// `cairn compare SNAP SNAP… [--base SNAP]`: for every path any snapshot changed
    /// against the base, the groups of snapshots with equal content there; each snapshot's
    /// change summary and checks; the groups with equal trees.
    pub fn compare(&self, call: &Call, options: CompareOptions) -> Result<CompareOutcome, Error> {
        if options.snapshots.len() < 2 {
            return Err(CompareError::TooFew {
                given: options.snapshots.len(),
            }
            .into());
        }
        let store = self.store(Access::Read)?;
        let reader = store.reader()?;
        let named = options
            .snapshots
            .iter()
            .map(|spec| Ok((spec.as_str(), resolve_snapshot(&reader, &call.cwd, spec)?)))
            .collect::<Result<Vec<_>, Error>>()?;
        let base = match &options.base {
            Some(spec) => Some(resolve_snapshot(&reader, &call.cwd, spec)?),
            None => None,
        };
        let named = Named {
            verb: "compare",
            snapshots: &named,
            advice: "; name one with --base",
        };
        let base = base_of(&reader, &named, base)?;
        let ids: Vec<SnapshotId> = named.snapshots.iter().map(|&(_, id)| id).collect();
        let base_tree = reader.snapshot(base)?.tree;

        let mut snapshots = Vec::with_capacity(ids.len());
        // Each changed path: what each snapshot holds there (the base's content until its
        // diff says otherwise). Keyed by bytes: git's order.
        let mut paths: BTreeMap<Vec<u8>, (RepoPathBuf, Vec<Content>)> = BTreeMap::new();
        for (at, &id) in ids.iter().enumerate() {
            let tree = reader.snapshot(id)?.tree;
            let changes = stored_changes(&reader, base_tree, tree)?;
            let mut hold = |path: &RepoPathBuf, content: Content| {
                paths
                    .entry(path.as_bytes().to_vec())
                    .or_insert_with(|| (path.clone(), vec![Content::AsBase; ids.len()]))
                    .1[at] = content;
            };
            for change in changes.changes() {
                let file = change.new.as_ref().map(|e| (e.blob, e.mode.clone()));
                match (&change.from, &change.to) {
                    // An exact rename is its old path gone and its new path added.
                    (Some(from), Some(to)) => {
                        hold(from, Content::Changed(None));
                        hold(to, Content::Changed(file));
                    }
                    _ => hold(&change.path, Content::Changed(file)),
                }
            }
            snapshots.push(CompareSnapshot {
                id,
                tree,
                files: changes.stats.files,
                insertions: changes.stats.insertions,
                deletions: changes.stats.deletions,
                checks: Vec::new(),
            });
        }
        drop(reader);
        drop(store);

        let paths = paths
            .into_values()
            .map(|(path, held)| {
                let groups = groups(&ids, &held);
                let holding = |content: &Content| {
                    groups
                        .iter()
                        .find(|g| held[g.0[0]] == *content)
                        .map(|g| g.1.clone())
                        .unwrap_or_default()
                };
                let unchanged = holding(&Content::AsBase);
                let deleted = holding(&Content::Changed(None));
                ComparePath {
                    path,
                    groups: groups.into_iter().map(|g| g.1).collect(),
                    unchanged,
                    deleted,
                }
            })
            .collect();
        let trees: Vec<TreeId> = snapshots.iter().map(|s| s.tree).collect();
        let identical = groups(&ids, &trees)
            .into_iter()
            .filter(|g| g.1.len() > 1)
            .map(|g| g.1)
            .collect();

        // The checks as `checks` lists them, by the name given (as `checks SNAP` would be).
        for (entry, spec) in snapshots.iter_mut().zip(&options.snapshots) {
            let listed = self.checks(call, ChecksOptions::new(spec.as_str()))?;
            if listed.snapshot != entry.id {
                return Err(CompareError::Moved {
                    spec: spec.clone(),
                    was: entry.id,
                    now: listed.snapshot,
                }
                .into());
            }
            entry.checks = listed.checks;
        }
        Ok(CompareOutcome {
            base,
            snapshots,
            paths,
            identical,
        })
    }
}

/// `ids` grouped by equal `values` (one per id): each group's indexes and ids in the order
/// given, the groups in the order of their first member.
fn groups<T: Eq + std::hash::Hash>(
    ids: &[SnapshotId],
    values: &[T],
) -> Vec<(Vec<usize>, Vec<SnapshotId>)> {
    let mut out: Vec<(Vec<usize>, Vec<SnapshotId>)> = Vec::new();
    let mut index: HashMap<&T, usize> = HashMap::new();
    for (at, (id, value)) in ids.iter().zip(values).enumerate() {
        let group = *index.entry(value).or_insert_with(|| {
            out.push((Vec::new(), Vec::new()));
            out.len() - 1
        });
        out[group].0.push(at);
        out[group].1.push(*id);
    }
    out
}

// What the verb of this module says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Compare several snapshots (parallel attempts at one task) against their base (default: their nearest common ancestor): for every path any of them changed, the groups of snapshots with equal content there (a deletion is a content); each snapshot's change summary (files, insertions, deletions) and the checks recorded of its tree; and which snapshots have equal trees. Reads only.
    Compare(CompareOptions) -> CompareOutcome = "compare" via compare [Route, Tool];
}

impl VerbSpec for verbs::Compare {
    const READS_ONLY: bool = true;

    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        options
            .snapshots
            .iter()
            .map(String::as_str)
            .chain(options.base.as_deref())
            .collect()
    }

    const EXAMPLE: Option<&'static str> = Some(
        r#"{"snapshots": ["attempt-1", "attempt-2", "attempt-3"], "cwd": "/home/agent/project"}"#,
    );
}
