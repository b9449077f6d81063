//! What keeps a dependency layer: `gc` keeps a layer's snapshot while a worktree's record
//! names its key (and the tree written for that worktree's root, which a mount reads), or
//! while it was used within `--keep-within`. Without `--keep-within` every layer stays,
//! but under `--max-size` the layers no worktree uses go first, least recently used first,
//! before any history. A layer that goes takes its record with it, in `gc`'s transaction.

use fs_manager::RegistryRead as _;

use super::{LAYERS, records};

/// What `retained` says keeps a layer (its name is the layer's key).
pub const REASON: &str = "dependency layer";

/// The layer records' owner, for `gc` and `fsck`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LayerRecords {
    /// `gc --keep-within`: layers used since then stay; the others no worktree uses go.
    /// `None`: every layer stays unless a size budget drops it.
    pub used_since: Option<jiff::Timestamp>,
}

impl cas::SideOwner for LayerRecords {
    fn roots(&self, reader: &cas::Reader, roots: &mut cas::Roots) -> Result<(), cas::BoxError> {
        let mut in_use = std::collections::BTreeSet::new();
        for wt in reader.worktrees()? {
            for layer in &wt.deps {
                in_use.insert(layer.key.clone());
                roots.trees.push(layer.tree);
            }
        }
        for record in records(reader)? {
            let recent = self.used_since.is_some_and(|since| record.used >= since);
            let entry = cas::SideKey {
                table: LAYERS,
                scope: String::new(),
                key: record.key.clone().into_bytes(),
            };
            if in_use.contains(&record.key) || recent {
                roots.keep(record.snapshot, cas::Keeper::new(REASON).named(record.key));
            } else if self.used_since.is_some() {
                roots.drop.push(entry);
            } else {
                roots.spare.push(cas::HistoryEntry {
                    time: record.used,
                    snapshots: vec![record.snapshot],
                    key: entry,
                    part: None,
                });
            }
        }
        Ok(())
    }

    fn check(&self, reader: &cas::Reader) -> Result<cas::Checked, cas::BoxError> {
        let mut out = cas::Checked::default();
        for record in records(reader)? {
            out.references += 1;
            if !reader.has_snapshot(record.snapshot)? {
                out.problems.push(cas::Problem::new(
                    "dependency layer",
                    &record.key,
                    format!("its snapshot {} is missing", record.snapshot),
                ));
            }
        }
        Ok(out)
    }

    fn name(&self) -> &'static str {
        "dependency layers"
    }
}
