//! `fsck`: verify every object and every reference.

use std::collections::HashMap;

use rayon::prelude::*;
use redb::ReadableTable;

use super::blob::Location;
use super::error::ReadError;
use super::error::{MaintenanceError, StorageResult};
use super::handle::Store;
use super::owner::{Problem, SideOwner};
use super::reader::{Reader, decode_snapshot_value};
use crate::id::{BlobId, SnapshotId, TreeId};
use crate::object::ObjectKind;

/// Knobs for [`Store::fsck`].
#[derive(Debug, Clone, Default)]
pub struct StoreFsckOptions {
    /// Skip reading blob content (checks structure and references only).
    pub skip_content: bool,
}

/// What `fsck` checked and found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StoreFsckOutcome {
    /// Every problem, in no particular order of importance.
    pub problems: Vec<Problem>,
    /// Blobs checked (chunks included).
    pub blobs: u64,
    /// Trees checked.
    pub trees: u64,
    /// Snapshots checked.
    pub snapshots: u64,
    /// Refs, and records of side-table owners, checked.
    pub references: u64,
    /// Attestation records and their signatures checked.
    pub attestations: u64,
}

fn problem(kind: &'static str, name: impl ToString, message: impl ToString) -> Problem {
    Problem::new(kind, name, message)
}

fn read_problem(e: &ReadError) -> Problem {
    match e {
        ReadError::NotFound { kind, id } | ReadError::Corrupt { kind, id, .. } => {
            let kind = match kind {
                ObjectKind::Blob => "blob",
                ObjectKind::Tree => "tree",
                ObjectKind::Snapshot => "snapshot",
            };
            let message = match e {
                ReadError::Corrupt { reason, .. } => format!("corrupt: {reason}"),
                _ => "missing".to_owned(),
            };
            problem(kind, id, message)
        }
        // The database, not the object, failed: reported once for the table.
        other => problem("store", "blobs", format!("could not be read: {other}")),
    }
}

/// Discards bytes; fsck only needs the verification that reading does.
struct Discard;
impl std::io::Write for Discard {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Store {
    /// Verifies every object's hash, tree invariants (sorted, unique, valid names, sizes) and
    /// that every tree entry, snapshot parent and ref points at something present, then has
    /// each of `owners` check its side-table records. Problems are reported in the outcome,
    /// not as errors; so is a part of the database that cannot be read (kind `store`, named
    /// by its table or owner), and the checks that needed it are skipped rather than
    /// reporting what it holds as missing.
    pub fn fsck(
        &self,
        options: &StoreFsckOptions,
        owners: &[&dyn SideOwner],
    ) -> Result<StoreFsckOutcome, MaintenanceError> {
        let mut out = StoreFsckOutcome::default();
        // Nothing at all can be read: that is an error, not a finding.
        // One snapshot for everything: what is listed is what is read, and a write landing
        // meanwhile (a lazy mount storing a blob and dropping its promise) is seen whole or
        // not at all, never listed and then missing.
        let reader = self.reader()?;

        // Blobs: location records, then content in parallel.
        let sizes = self.fsck_part(&mut out, "blobs", |out| {
            let mut sizes: HashMap<BlobId, u64> = HashMap::new();
            for item in reader.blobs.iter().storage()? {
                let (k, v) = item.storage()?;
                let id = BlobId::from_bytes(k.value());
                match Location::decode(v.value()) {
                    Some(loc) => {
                        sizes.insert(id, loc.size());
                    }
                    None => out
                        .problems
                        .push(problem("blob", id, "unreadable location record")),
                }
            }
            Ok(sizes)
        });
        if let Some(sizes) = &sizes {
            out.blobs = sizes.len() as u64;
            if !options.skip_content {
                let ids: Vec<BlobId> = sizes.keys().copied().collect();
                let found: Vec<Problem> = ids
                    .par_iter()
                    .filter_map(|id| reader.write_blob_to(*id, &mut Discard).err())
                    .map(|e| read_problem(&e))
                    .collect();
                out.problems.extend(found);
            }
        }

        // Trees: hash and invariants, then references and sizes.
        let trees = self.fsck_part(&mut out, "trees", |out| {
            let mut trees = HashMap::new();
            for item in reader.trees.iter().storage()? {
                let (k, v) = item.storage()?;
                let id = TreeId::from_bytes(k.value());
                match reader.tree_from_record(id, v.value()) {
                    Ok(tree) => {
                        trees.insert(id, tree);
                    }
                    Err(e) => out.problems.push(read_problem(&e)),
                }
            }
            Ok(trees)
        });
        if let Some(trees) = &trees {
            out.trees = trees.len() as u64;
            for (id, tree) in trees {
                for entry in tree.entries() {
                    let name = String::from_utf8_lossy(&entry.name);
                    let actual = match (entry.blob(), entry.tree()) {
                        (Some(b), _) => match &sizes {
                            Some(sizes) => sizes.get(&b).copied(),
                            None => continue,
                        },
                        (_, Some(t)) => trees.get(&t).map(|t| t.size()),
                        _ => None,
                    };
                    match actual {
                        None if reader.promised(entry.id).ok().flatten().is_some() => {}
                        None => out.problems.push(problem(
                            "tree",
                            id,
                            format!("entry '{name}' points at missing {}", entry.id),
                        )),
                        Some(size) if size != entry.size => out.problems.push(problem(
                            "tree",
                            id,
                            format!(
                                "entry '{name}' records {} bytes, object has {size}",
                                entry.size
                            ),
                        )),
                        Some(_) => {}
                    }
                }
            }
        }

        // Snapshots.
        let snapshots = self.fsck_part(&mut out, "snapshots", |out| {
            let mut snapshots = Vec::new();
            for item in reader.snapshots.iter().storage()? {
                let (k, v) = item.storage()?;
                let id = SnapshotId::from_bytes(k.value());
                match decode_snapshot_value(id, v.value()) {
                    Ok(s) => snapshots.push((id, s)),
                    Err(e) => out.problems.push(read_problem(&e)),
                }
            }
            Ok(snapshots)
        });
        if let Some(snapshots) = snapshots {
            out.snapshots = snapshots.len() as u64;
            self.fsck_part(&mut out, "snapshots", |out| {
                for (id, snap) in &snapshots {
                    if trees.as_ref().is_some_and(|t| !t.contains_key(&snap.tree))
                        && reader.promised(snap.tree.into())?.is_none()
                    {
                        out.problems.push(problem(
                            "snapshot",
                            id,
                            format!("root tree {} is missing", snap.tree),
                        ));
                    }
                    for p in &snap.parents {
                        if !reader.has_snapshot(*p)? && !reader.absent_by_design(*p)? {
                            out.problems.push(problem(
                                "snapshot",
                                id,
                                format!("parent {p} is missing"),
                            ));
                        }
                    }
                }
                Ok(())
            });
        }

        // References into the object graph.
        self.fsck_part(&mut out, "refs", |out| check_refs(&reader, out));
        self.fsck_part(&mut out, "attestations", |out| {
            out.attestations = super::attested::check(&reader, &mut out.problems)?;
            Ok(())
        });
        for owner in owners {
            self.fsck_part(&mut out, owner.name(), |out| {
                let checked = owner
                    .check(&reader)
                    .map_err(|source| MaintenanceError::Owner {
                        owner: owner.name(),
                        source,
                    })?;
                out.references += checked.references;
                out.problems.extend(checked.problems);
                Ok(())
            });
        }

        // A store that stopped reading answers every later read alike: say it once.
        let mut seen = std::collections::HashSet::new();
        out.problems
            .retain(|p| p.kind != "store" || seen.insert((p.name.clone(), p.message.clone())));
        Ok(out)
    }

    /// Runs one part of the check; if the database cannot be read for it, records that as a
    /// problem of kind `store` named `table` and returns `None`.
    fn fsck_part<T>(
        &self,
        out: &mut StoreFsckOutcome,
        table: &'static str,
        check: impl FnOnce(&mut StoreFsckOutcome) -> Result<T, MaintenanceError>,
    ) -> Option<T> {
        match self.health.run(|| check(out)) {
            Ok(v) => Some(v),
            Err(e) => {
                out.problems
                    .push(problem("store", table, format!("could not be read: {e}")));
                None
            }
        }
    }
}

fn check_refs(reader: &Reader, out: &mut StoreFsckOutcome) -> Result<(), MaintenanceError> {
    for (name, target) in reader.refs()? {
        out.references += 1;
        if !reader.has_snapshot(target)? {
            out.problems.push(problem(
                "ref",
                name,
                format!("points at missing snapshot {target}"),
            ));
        }
    }
    Ok(())
}
