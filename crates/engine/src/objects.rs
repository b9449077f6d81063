//! The store itself: `init`, `show`, `ref set|rm|list`, `fsck`, `gc`.

use camino::{Utf8Path, Utf8PathBuf};
use cas::{EntryKind, ObjectId, ObjectKind, Reader, SnapshotId, TreeId};
use path_policy::RepoPathBuf;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::{Code, Error};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// The store `init` made (or found).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InitOutcome {
    /// The store folder.
    pub store: Utf8PathBuf,
    /// Whether it existed already.
    #[serde(skip)]
    pub existed: bool,
}

/// Why a store folder cannot be created.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitError {
    /// Something else is there.
    #[error("{path}: exists and is not a directory")]
    NotADirectory {
        /// The path.
        path: Utf8PathBuf,
    },
}

crate::error::coded!(GcError, InitError, RefsError, ShowError);

impl InitError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            InitError::NotADirectory { .. } => Code::InvalidPath,
        }
    }
}

/// Why `show SNAP:PATH` names nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShowError {
    /// A path into a blob.
    #[error("{spec} is a blob, not a tree")]
    BlobNotTree {
        /// The object named.
        spec: String,
    },
    /// A path the tree does not have.
    #[error("{spec}:{path}: no such path")]
    NoSuchPath {
        /// The object named.
        spec: String,
        /// The path.
        path: String,
    },
    /// A path through a file.
    #[error("{spec}:{path}: not a directory")]
    NotADirectory {
        /// The object named.
        spec: String,
        /// The path up to the file.
        path: String,
    },
}

impl ShowError {
    /// Its code.
    pub fn code(&self) -> Code {
        Code::InvalidPath
    }
}

/// Why a ref call's arguments do not go together.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RefsError {
    /// `--expect` on a local ref.
    #[error("--expect is for remote refs (NAME@REMOTE), not {name}")]
    ExpectOnLocal {
        /// The ref.
        name: String,
    },
}

impl RefsError {
    /// Its code.
    pub fn code(&self) -> Code {
        Code::Usage
    }
}

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

impl GcError {
    /// Its code.
    pub fn code(&self) -> Code {
        Code::Usage
    }
}

/// Creates the store folder `path` (nothing happens to one that exists).
pub fn init_store(path: &Utf8Path, options: &cas::OpenOptions) -> Result<InitOutcome, Error> {
    if path.exists() && !path.is_dir() {
        return Err(InitError::NotADirectory {
            path: path.to_owned(),
        }
        .into());
    }
    let existed = path.join(cas::DATABASE_FILE).is_file();
    let options = cas::OpenOptions {
        create: true,
        ..options.clone()
    };
    let store = cas::Store::open(path, &options)?;
    Ok(InitOutcome {
        store: store.root().to_owned(),
        existed,
    })
}

/// `show OBJECT`: `SNAP`, `SNAP:PATH`, or any object id.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowOptions {
    /// SNAP, SNAP:PATH, or an object id.
    #[schemars(extend("x-snapshot" = true))]
    pub object: String,
    /// For a file: its bytes too.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub contents: bool,
}

/// An entry of a tree listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShowEntry {
    /// Its name.
    pub name: RepoPathBuf,
    /// `file`, `executable`, `symlink` or `tree`.
    pub kind: String,
    /// Its id.
    pub id: ObjectId,
    /// Its size.
    pub size: u64,
}

/// A file, or a tree listing.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ShowOutcome {
    /// A file (`SNAP:PATH`, or a blob named by id); its bytes are the blob's.
    Blob {
        /// Its blob.
        blob: ObjectId,
        /// Its path in the tree (empty for a blob named by id).
        path: String,
        /// Its size.
        size: u64,
        /// Its bytes, if asked for (verified).
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            with = "crate::engine::base64_bytes"
        )]
        #[schemars(with = "String", extend("contentEncoding" = "base64"))]
        contents: Option<Vec<u8>>,
    },
    /// A tree listing.
    Tree {
        /// Its id.
        tree: TreeId,
        /// Its path.
        path: String,
        /// Its entries.
        entries: Vec<ShowEntry>,
    },
}

/// `ref set NAME SNAP`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefSetOptions {
    /// The ref, or NAME@REMOTE.
    pub name: String,
    /// The snapshot.
    #[schemars(extend("x-snapshot" = true))]
    pub snapshot: String,
    /// For NAME@REMOTE: the snapshot it must still hold.
    #[serde(default)]
    #[schemars(extend("x-snapshot" = true))]
    pub expect: Option<String>,
}

/// `ref rm NAME`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefRmOptions {
    /// The ref, NAME@REMOTE or ID@REMOTE.
    pub name: String,
    /// For NAME@REMOTE: the snapshot it must still hold.
    #[serde(default)]
    #[schemars(extend("x-snapshot" = true))]
    pub expect: Option<String>,
}

/// `ref list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefListOptions {
    /// List this remote's refs.
    #[serde(default)]
    pub remote: Option<String>,
}

/// A ref.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RefEntry {
    /// A ref, or NAME@REMOTE.
    pub name: String,
    /// The snapshot it names.
    pub snapshot: SnapshotId,
}

/// Refs set, removed or listed.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RefsOutcome {
    /// Them.
    pub refs: Vec<RefEntry>,
    /// The refusal: a remote ref that did not hold what was expected (`refs` then holds
    /// its value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `fsck`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsckOptions {}

/// A problem `fsck` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FsckProblem {
    /// What it is about.
    pub kind: String,
    /// The id, ref, worktree or table.
    pub name: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for FsckProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.kind, self.name, self.message)
    }
}

/// How much `fsck` checked.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FsckChecked {
    /// Blobs.
    pub blobs: u64,
    /// Trees.
    pub trees: u64,
    /// Snapshots.
    pub snapshots: u64,
    /// References.
    pub references: u64,
    /// Attestations and their signatures (left out when there are none, as before there
    /// were any).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attestations: u64,
}

/// What `fsck` found; problems make it a refusal.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FsckOutcome {
    /// Every problem.
    pub problems: Vec<FsckProblem>,
    /// What was checked.
    pub checked: FsckChecked,
    /// The refusal, when there are problems.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `gc [--dry-run] [--keep-within DAYS] [--max-size BYTES]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GcOptions {
    /// Report what would be removed; change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Days: drop op-log entries older than this; newer ones are never dropped. `prune_ops` is its older name.
    #[serde(
        default,
        alias = "prune_ops",
        deserialize_with = "crate::engine::whole_number::deserialize"
    )]
    pub keep_within: Option<u32>,
    /// Bytes the store's database file may take (mount layers and other files in the store folder are not counted): older history goes, oldest first, until it fits.
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
    /// entry `undo` would revert) or `recent op`.
    pub reason: String,
    /// The ref, remote ref (`NAME@REMOTE`) or checkpoint name, or the op-log entry (`#SEQ`).
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

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn entry_kind(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "file",
        EntryKind::Executable => "executable",
        EntryKind::Symlink => "symlink",
        EntryKind::Tree => "tree",
    }
}

fn object_kind(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Blob => "blob",
        ObjectKind::Tree => "tree",
        ObjectKind::Snapshot => "snapshot",
    }
}

fn show_blob(
    reader: &Reader,
    id: ObjectId,
    path: &str,
    contents: bool,
) -> Result<ShowOutcome, Error> {
    // Verified in full before anything is reported, as every read is.
    let (size, contents) = if contents {
        let bytes = reader.blob(id.as_blob())?;
        (bytes.len() as u64, Some(bytes))
    } else {
        let size = reader.blob_size(id.as_blob())?;
        reader.blob(id.as_blob())?;
        (size, None)
    };
    Ok(ShowOutcome::Blob {
        blob: id,
        path: path.to_owned(),
        size,
        contents,
    })
}

impl Engine {
    /// `cairn show SNAP[:PATH]`: a file or a tree listing; any object id also works.
    pub fn show(&self, call: &Call, options: ShowOptions) -> Result<ShowOutcome, Error> {
        let object = options.object.as_str();
        let (spec, path) = match object.split_once(':') {
            Some((s, p)) => (s, Some(p)),
            None => (object, None),
        };
        let store = self.store(Access::Read)?;
        let reader = store.reader()?;
        // A checkpoint name of the current worktree comes first, as everywhere.
        let checkpoint = fs_manager::find_worktree(&reader, &call.cwd)?
            .and_then(|r| r.checkpoint(spec).map(|c| c.snapshot));
        let (kind, id) = match checkpoint {
            Some(s) => (ObjectKind::Snapshot, s.into()),
            None => reader.resolve_object(spec)?,
        };
        let tree = match kind {
            ObjectKind::Snapshot => reader.snapshot(id.as_snapshot())?.tree,
            ObjectKind::Tree => id.as_tree(),
            ObjectKind::Blob => {
                if path.is_some_and(|p| !p.is_empty()) {
                    return Err(ShowError::BlobNotTree { spec: spec.into() }.into());
                }
                return show_blob(&reader, id, "", options.contents);
            }
        };
        let path = path.unwrap_or("").trim_matches('/');
        let mut current = tree;
        let mut walked = String::new();
        let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        for (i, name) in components.iter().enumerate() {
            let listing = reader.tree(current)?;
            let Some(entry) = listing.get(name.as_bytes()) else {
                return Err(ShowError::NoSuchPath {
                    spec: spec.into(),
                    path: path.into(),
                }
                .into());
            };
            if !walked.is_empty() {
                walked.push('/');
            }
            walked.push_str(name);
            match entry.tree() {
                Some(t) => current = t,
                None if i + 1 == components.len() => {
                    return show_blob(&reader, entry.id, &walked, options.contents);
                }
                None => {
                    return Err(ShowError::NotADirectory {
                        spec: spec.into(),
                        path: walked,
                    }
                    .into());
                }
            }
        }
        let entries = reader
            .tree(current)?
            .entries()
            .iter()
            .map(|e| ShowEntry {
                // A tree entry's name passed `check_name` when the tree was written.
                name: RepoPathBuf::from_bytes_unchecked(e.name.clone()),
                kind: entry_kind(e.kind).to_owned(),
                id: e.id,
                size: e.size,
            })
            .collect();
        Ok(ShowOutcome::Tree {
            tree: current,
            path: walked,
            entries,
        })
    }

    /// `cairn ref set NAME SNAP`.
    pub fn ref_set(&self, call: &Call, options: RefSetOptions) -> Result<RefsOutcome, Error> {
        if let Some((name, at)) = crate::engine::remote_ref(&options.name) {
            let (refs, message) =
                self.remote_ref_set(call, name, at, &options.snapshot, options.expect.as_deref())?;
            return Ok(RefsOutcome { refs, message });
        }
        if options.expect.is_some() {
            return Err(RefsError::ExpectOnLocal { name: options.name }.into());
        }
        cas::validate_ref_name(&options.name)?;
        let store = self.store(Access::Create)?;
        let id = resolve_snapshot(&store.reader()?, &call.cwd, &options.snapshot)?;
        store.set_ref(&options.name, id)?;
        Ok(RefsOutcome {
            refs: vec![RefEntry {
                name: options.name,
                snapshot: id,
            }],
            message: None,
        })
    }

    /// `cairn ref rm NAME`.
    pub fn ref_rm(&self, call: &Call, options: RefRmOptions) -> Result<RefsOutcome, Error> {
        if let Some((name, at)) = crate::engine::remote_ref(&options.name) {
            let (refs, message) = self.remote_ref_rm(call, name, at, options.expect.as_deref())?;
            return Ok(RefsOutcome { refs, message });
        }
        if options.expect.is_some() {
            return Err(RefsError::ExpectOnLocal { name: options.name }.into());
        }
        let store = self.store(Access::Write)?;
        let id = store.remove_ref(&options.name)?;
        Ok(RefsOutcome {
            refs: vec![RefEntry {
                name: options.name,
                snapshot: id,
            }],
            message: None,
        })
    }

    /// `cairn ref list`.
    pub fn ref_list(&self, call: &Call, options: RefListOptions) -> Result<RefsOutcome, Error> {
        if let Some(at) = &options.remote {
            let refs = self.remote_ref_list(call, at)?;
            return Ok(RefsOutcome {
                refs,
                message: None,
            });
        }
        let store = self.store(Access::Read)?;
        let refs = store
            .reader()?
            .refs()?
            .into_iter()
            .map(|(name, snapshot)| RefEntry { name, snapshot })
            .collect();
        Ok(RefsOutcome {
            refs,
            message: None,
        })
    }

    /// `cairn fsck`: every object and reference verified.
    pub fn fsck(&self, _call: &Call, _options: FsckOptions) -> Result<FsckOutcome, Error> {
        let store = self.store(Access::Read)?;
        let registry = fs_manager::Registry {
            store: Some(store.root().to_owned()),
            ..fs_manager::Registry::default()
        };
        let owners: [&dyn cas::SideOwner; 2] = [&registry, &remote::RemotesOwner];
        let mut out = store.fsck(&cas::StoreFsckOptions::default(), &owners)?;
        out.problems.extend(signature_problems(&store.reader()?)?);
        let n = out.problems.len();
        let message = (n > 0).then(|| {
            format!(
                "fsck found {n} problem{} in store {}",
                if n == 1 { "" } else { "s" },
                store.root()
            )
        });
        Ok(FsckOutcome {
            problems: out
                .problems
                .into_iter()
                .map(|p| FsckProblem {
                    kind: p.kind.to_owned(),
                    name: p.name,
                    message: p.message,
                })
                .collect(),
            checked: FsckChecked {
                blobs: out.blobs,
                trees: out.trees,
                snapshots: out.snapshots,
                references: out.references,
                attestations: out.attestations,
            },
            message,
        })
    }

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
        let out = store.gc(
            &cas::StoreGcOptions {
                dry_run: options.dry_run,
                max_size: options.max_size,
            },
            &[&registry, &remote::RemotesOwner],
        )?;
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
            store_bytes: out.store_bytes_after,
            remote: None,
        })
    }
}

/// What `fsck` finds wrong with the attestations' signatures, which the store keeps without
/// reading: one that is not an SSH signature, is filed under another key's fingerprint, or
/// does not match its attestation's bytes (they were altered). A signature of no recorded
/// attestation the store itself reports.
fn signature_problems(reader: &cas::Reader) -> Result<Vec<cas::Problem>, Error> {
    let records: std::collections::HashMap<Vec<u8>, Vec<u8>> = reader
        .side_entries(cas::ATTESTATIONS)?
        .into_iter()
        .map(|(_, key, value)| (key, value))
        .collect();
    let mut problems = Vec::new();
    for (scope, key, armored) in reader.side_entries(cas::ATTESTATION_SIGNATURES)? {
        let fingerprint = String::from_utf8_lossy(&key).into_owned();
        let name = format!("{scope} {fingerprint}");
        let Some(bytes) = scope
            .parse::<cas::AttestationId>()
            .ok()
            .and_then(|id| records.get(id.as_bytes().as_slice()))
        else {
            continue;
        };
        let problem = match attest::Signature::from_pem(&String::from_utf8_lossy(&armored)) {
            Err(e) => Some(e.to_string()),
            Ok(signature) if signature.fingerprint() != fingerprint => Some(format!(
                "made by {}, filed as {fingerprint}'s",
                signature.fingerprint()
            )),
            Ok(signature) => signature.matches(bytes).err().map(|e| e.to_string()),
        };
        if let Some(message) = problem {
            problems.push(cas::Problem::new("signature", name, message));
        }
    }
    Ok(problems)
}

// What each verb of this module says of itself beyond its types (see `VerbSpec`).

verb! {
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
}

impl VerbSpec for verbs::Show {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        vec![
            options
                .object
                .split_once(':')
                .map_or(options.object.as_str(), |(spec, _)| spec),
        ]
    }

    const EXAMPLE: Option<&'static str> = Some(r#"{"object": "base:a.txt"}"#);
}

impl VerbSpec for verbs::RefSet {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        vec![&options.snapshot]
    }

    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        outcome.message.as_deref()
    }

    const REFUSED: Option<&'static str> = Some(
        "A refusal: the remote ref holds another snapshot than expected (`refs` gives it); `message` names it.",
    );

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"name": "main@origin", "snapshot": "main", "expect": null}"#);
}

impl VerbSpec for verbs::RefRm {
    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        outcome.message.as_deref()
    }

    const REFUSED: Option<&'static str> =
        Some("A refusal: the remote ref holds another snapshot than expected; `message` names it.");

    const EXAMPLE: Option<&'static str> = Some(r#"{"name": "main@origin"}"#);
}

impl VerbSpec for verbs::RefList {
    const EXAMPLE: Option<&'static str> = Some(r#"{"remote": "origin"}"#);
}

impl VerbSpec for verbs::Fsck {
    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        outcome.message.as_deref()
    }

    const REFUSED: Option<&'static str> = Some(
        "A negative answer, nothing changed: problems found (`problems`); `message` says why.",
    );

    const EXAMPLE: Option<&'static str> = Some(r#"{}"#);
}

impl VerbSpec for verbs::Gc {
    const EXAMPLE: Option<&'static str> = Some(r#"{"keep_within": 7, "max_size": 2000000000}"#);
}
