//! `gc`: what nothing reaches dropped, and the store shrunk to its budget.

use cas::ObjectKind;
use serde::{Deserialize, Serialize};

use crate::deps::keep::LayerRecords;
use crate::engine::{Call, Engine};
use crate::error::{Code, Error};
use crate::spec::{VerbSpec, verb, verbs};

/// Why a gc's arguments do not go together.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GcError {
    /// The store's own limits given with `--remote`.
    #[error("--keep-within and --max-size are for the store's own gc, not --remote")]
    LocalOptionsWithRemote,
    /// `--grace` without `--remote`.
    #[error("--grace is for gc --remote NAME")]
    GraceWithoutRemote,
    /// A `--keep-within` reaching before any time cairn can represent.
    #[error(
        "--keep-within (--prune-ops) {days}: that many days ago is before any time cairn can represent"
    )]
    KeepWithinTooFar {
        /// The days.
        days: u32,
    },
}

crate::error::coded!(GcError);

impl GcError {
    /// Its code.
    pub fn code(&self) -> Code {
        Code::Usage
    }
}

/// `gc [--dry-run] [--keep-within DAYS] [--max-size BYTES]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GcOptions {
    /// Report what would be removed; change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Days: drop op-log entries older than this, and dependency layers no worktree uses that were last used before; newer ones are never dropped. `prune_ops` is its older name.
    #[serde(
        default,
        alias = "prune_ops",
        deserialize_with = "crate::engine::whole_number::deserialize"
    )]
    pub keep_within: Option<u32>,
    /// Bytes the store's database file may take (mount layers and other files in the store folder are not counted): dependency layers no worktree uses go first, least recently used first, then older history, oldest first, until it fits.
    #[serde(default, deserialize_with = "crate::engine::whole_number::deserialize")]
    pub max_size: Option<u64>,
    /// Collect this remote's garbage instead (packs no remote ref or pinned snapshot reaches).
    #[serde(default)]
    pub remote: Option<String>,
    /// With remote: hours a pack stays condemned before it is deleted (default 24).
    #[serde(default, deserialize_with = "crate::engine::whole_number::deserialize")]
    pub grace: Option<u32>,
}

/// An object gc removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GcRemoved {
    /// `blob`, `tree`, `snapshot` or `attestation` (`pack` for `gc --remote`).
    pub kind: String,
    /// Its id.
    pub id: String,
}

/// Stored bytes gc could not free because something named or recent keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GcRetained {
    /// `ref`, `remote ref`, `worktree head`, `named checkpoint`, `checkpoint` (unnamed,
    /// within `keep_within`), `task baseline`, `mount base`, `undo` (the worktree's op-log
    /// entry `undo` would revert), `recent op` or `dependency layer` (one a worktree uses
    /// or, with `keep_within`, used within it).
    pub reason: String,
    /// The ref, remote ref (`NAME@REMOTE`) or checkpoint name, the op-log entry (`#SEQ`),
    /// or the dependency layer's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The worktree it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
    /// The snapshot it keeps.
    pub snapshot: String,
    /// Stored bytes it keeps that no entry listed before it does (the entries add up).
    pub bytes: u64,
}

/// What `gc` removed (or would remove), what it could not and why.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GcOutcome {
    /// The objects.
    pub removed: Vec<GcRemoved>,
    /// Stored (compressed) bytes of the removed objects.
    pub bytes_freed: u64,
    /// Op-log entries dropped, by age (`keep_within`) or by the size budget (`max_size`).
    pub ops_pruned: u64,
    /// Unnamed checkpoints the size budget dropped from their worktrees' stacks.
    #[serde(default)]
    pub checkpoints_pruned: u64,
    /// What keeps the bytes that stay, one entry per keeper that keeps something no keeper
    /// listed before it does; its bytes are those only it adds, so the entries add up to
    /// what every keeper together keeps. History kept because it fit is not listed.
    #[serde(default)]
    pub retained: Vec<GcRetained>,
    /// Whether nothing was removed.
    pub dry_run: bool,
    /// The database file's size before.
    pub file_bytes_before: u64,
    /// And after (compacted): the size `max_size` is about.
    pub file_bytes_after: u64,
    /// What the store folder's files take after, mount layers included (what
    /// `CAIRN_STORE_BUDGET` counts; on a dry run, now). `--max-size` is about
    /// `file_bytes_after`.
    #[serde(default)]
    pub store_bytes: u64,
    /// With `--remote`: what remote gc did (`removed` then lists packs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<remote::RemoteGcOutcome>,
}

impl Engine {
    /// `cairn gc [--dry-run] [--keep-within DAYS] [--max-size BYTES]`: waits until no other
    /// call uses the store.
    pub fn gc(&self, _call: &Call, options: GcOptions) -> Result<GcOutcome, Error> {
        if let Some(name) = &options.remote {
            if options.keep_within.is_some() || options.max_size.is_some() {
                return Err(GcError::LocalOptionsWithRemote.into());
            }
            let out = self.remote_gc(name, options.grace.unwrap_or(24), options.dry_run)?;
            return Ok(GcOutcome {
                removed: out
                    .removed
                    .iter()
                    .map(|pack| GcRemoved {
                        kind: "pack".to_owned(),
                        id: pack.clone(),
                    })
                    .collect(),
                bytes_freed: out.bytes_freed,
                ops_pruned: 0,
                checkpoints_pruned: 0,
                retained: Vec::new(),
                dry_run: options.dry_run,
                file_bytes_before: 0,
                file_bytes_after: 0,
                store_bytes: 0,
                remote: Some(out),
            });
        }
        if options.grace.is_some() {
            return Err(GcError::GraceWithoutRemote.into());
        }
        let prune_ops_before = options
            .keep_within
            .map(|days| {
                jiff::Timestamp::now()
                    .checked_sub(jiff::SignedDuration::from_hours(24 * i64::from(days)))
                    .map_err(|_| GcError::KeepWithinTooFar { days })
            })
            .transpose()?;
        let mut store = self.store_exclusive()?;
        let registry = fs_manager::Registry {
            prune_ops_before,
            ..fs_manager::Registry::default()
        };
        let layers = LayerRecords {
            used_since: prune_ops_before,
        };
        let out = store.gc(
            &cas::StoreGcOptions {
                dry_run: options.dry_run,
                max_size: options.max_size,
            },
            &[&registry, &remote::RemotesOwner, &layers],
        )?;
        let mut store_bytes = out.store_bytes_after;
        if !options.dry_run {
            // The unpacked copies of layers gone, and what a kill left half made.
            let keep = crate::deps::stored_trees(&store.reader()?)?;
            match fs_manager::layer_copies::sweep(store.root(), &keep) {
                Ok(removed) if removed.is_empty() => {}
                Ok(_) => store_bytes = cas::store_bytes(store.root()),
                Err(e) => tracing::warn!("{}: {e}", fs_manager::layer_copies::folder(store.root())),
            }
        }
        Ok(GcOutcome {
            removed: out
                .removed
                .iter()
                .map(|(kind, id)| GcRemoved {
                    kind: object_kind(*kind).to_owned(),
                    id: id.to_hex(),
                })
                .chain(out.attestations_removed.iter().map(|id| GcRemoved {
                    kind: "attestation".to_owned(),
                    id: id.to_hex(),
                }))
                .collect(),
            bytes_freed: out.bytes_freed,
            ops_pruned: fs_manager::Registry::ops_pruned(&out.dropped),
            checkpoints_pruned: fs_manager::Registry::checkpoints_pruned(&out.dropped_parts),
            retained: out
                .retained
                .into_iter()
                .map(|r| GcRetained {
                    reason: r.keeper.reason.to_owned(),
                    name: r.keeper.name,
                    worktree: r.keeper.worktree,
                    snapshot: r.snapshot.to_hex(),
                    bytes: r.bytes,
                })
                .collect(),
            dry_run: options.dry_run,
            file_bytes_before: out.file_bytes_before,
            file_bytes_after: out.file_bytes_after,
            store_bytes,
            remote: None,
        })
    }
}

fn object_kind(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Blob => "blob",
        ObjectKind::Tree => "tree",
        ObjectKind::Snapshot => "snapshot",
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Drop what nothing reaches and shrink the store file. keep_within drops op-log entries older than that many days, and dependency layers no worktree uses last used before; max_size then drops the dependency layers no worktree uses (least recently used first) and older history (op-log entries, unnamed checkpoints, snapshot ancestry), oldest first, until the store's database file takes at most that many bytes (mount layers are not counted); refs, worktree heads, named checkpoints, task baselines, each worktree's newest undoable change, the dependency layers worktrees use and what is within keep_within always stay, and `retained` says what they keep. Waits until no other call uses the store.
    Gc(GcOptions) -> GcOutcome = "gc" via gc [Route, Tool];
}

impl VerbSpec for verbs::Gc {
    const EXAMPLE: Option<&'static str> = Some(r#"{"keep_within": 7, "max_size": 2000000000}"#);
}
