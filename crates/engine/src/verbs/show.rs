//! `show OBJECT`: a file, or a tree listing, of a snapshot or any object id.

use cas::{EntryKind, ObjectId, ObjectKind, Reader, TreeId};
use path_policy::RepoPathBuf;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::{Code, Error};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::view::{CheckMark, check_marks};

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

crate::error::coded!(ShowError);

impl ShowError {
    /// Its code.
    pub fn code(&self) -> Code {
        Code::InvalidPath
    }
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
        /// For a snapshot's (or a tree's) whole listing: the checks recorded of its tree
        /// (`verify`), the newest run of each, by name.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        checks: Vec<CheckMark>,
    },
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
        // A checkpoint name of the current worktree comes first, as everywhere; steps back
        // (`~N`, `^N`) name a snapshot.
        let checkpoint = fs_manager::find_worktree(&reader, &call.cwd)?
            .and_then(|r| r.checkpoint(spec).map(|c| c.snapshot));
        let (kind, id) = match checkpoint {
            Some(s) => (ObjectKind::Snapshot, s.into()),
            None if spec.contains(['~', '^']) => (
                ObjectKind::Snapshot,
                resolve_snapshot(&reader, &call.cwd, spec)?.into(),
            ),
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
        // Checks are of a whole tree: a listing below its root has none of its own.
        let checks = if walked.is_empty() {
            check_marks(&reader, current)?
        } else {
            Vec::new()
        };
        Ok(ShowOutcome::Tree {
            tree: current,
            path: walked,
            entries,
            checks,
        })
    }
}

fn entry_kind(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "file",
        EntryKind::Executable => "executable",
        EntryKind::Symlink => "symlink",
        EntryKind::Tree => "tree",
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

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// A snapshot's (or tree's) listing, SNAP or SNAP:PATH; a whole snapshot's with the checks recorded of its tree.
    Show(ShowOptions) -> ShowOutcome = "show" via show [Route];
}

impl VerbSpec for verbs::Show {
    const READS_ONLY: bool = true;

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
