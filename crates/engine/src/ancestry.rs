//! The base several snapshots' changes are taken against (`combine`, `compare`, `rebase`):
//! each snapshot named once, and their nearest common ancestor unless a base is named.

use std::collections::{HashMap, VecDeque};

use cas::SnapshotId;

use crate::error::{Code, Error};

/// Why snapshots have no base to take their changes against.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AncestryError {
    /// One snapshot named twice.
    #[error("{verb}: snapshot {id} is named twice ({first}, {second}); name each snapshot once")]
    Twice {
        /// The verb.
        verb: &'static str,
        /// The first name given for it.
        first: String,
        /// The second.
        second: String,
        /// The snapshot.
        id: SnapshotId,
    },
    /// No snapshot is an ancestor of all of them.
    #[error(
        "{verb}: snapshots {} have no common ancestor in their history{advice}",
        .snapshots.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    NoBase {
        /// The verb.
        verb: &'static str,
        /// The snapshots.
        snapshots: Vec<SnapshotId>,
        /// What the caller can do about it (`; name one with --base`), or nothing.
        advice: &'static str,
    },
}

crate::error::coded!(AncestryError);

impl AncestryError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            AncestryError::Twice { .. } => Code::Usage,
            AncestryError::NoBase { .. } => Code::NoBase,
        }
    }
}

/// The snapshots of one call of `verb`, each with the name it was given by.
pub(crate) struct Named<'a> {
    /// The verb, as its errors name it.
    pub verb: &'static str,
    /// Each snapshot and the name given for it, in the order given.
    pub snapshots: &'a [(&'a str, SnapshotId)],
    /// Appended to the error when there is no common ancestor (`; name one with --base`).
    pub advice: &'static str,
}

/// The base `named`'s changes are taken against: `base`, else their nearest common
/// ancestor. Refuses a snapshot named twice (naming both names), and snapshots whose
/// histories never meet.
pub(crate) fn base_of(
    reader: &cas::Reader,
    named: &Named<'_>,
    base: Option<SnapshotId>,
) -> Result<SnapshotId, Error> {
    for (at, &(second, id)) in named.snapshots.iter().enumerate() {
        if let Some(&(first, _)) = named.snapshots[..at].iter().find(|(_, p)| *p == id) {
            return Err(AncestryError::Twice {
                verb: named.verb,
                first: first.to_owned(),
                second: second.to_owned(),
                id,
            }
            .into());
        }
    }
    if let Some(base) = base {
        return Ok(base);
    }
    let ids: Vec<SnapshotId> = named.snapshots.iter().map(|&(_, id)| id).collect();
    nearest_common_ancestor(reader, &ids)?.ok_or_else(|| {
        AncestryError::NoBase {
            verb: named.verb,
            snapshots: ids,
            advice: named.advice,
        }
        .into()
    })
}

/// The nearest snapshot that is an ancestor of (or is) every one of `snapshots`: of the
/// common ancestors, the one with the fewest steps from them all together (then the
/// smallest id), walking parents history gc kept. `None` if their histories never meet.
pub(crate) fn nearest_common_ancestor(
    reader: &cas::Reader,
    snapshots: &[SnapshotId],
) -> Result<Option<SnapshotId>, Error> {
    let mut steps: HashMap<SnapshotId, (usize, u64)> = HashMap::new();
    for &start in snapshots {
        let mut seen = HashMap::from([(start, 0u64)]);
        let mut queue = VecDeque::from([start]);
        while let Some(id) = queue.pop_front() {
            let depth = seen[&id];
            for parent in reader.snapshot(id)?.parents {
                // History gc pruned (or never fetched) is not walked.
                if seen.contains_key(&parent) || !reader.has_snapshot(parent)? {
                    continue;
                }
                seen.insert(parent, depth + 1);
                queue.push_back(parent);
            }
        }
        for (id, depth) in seen {
            let entry = steps.entry(id).or_insert((0, 0));
            entry.0 += 1;
            entry.1 += depth;
        }
    }
    Ok(steps
        .into_iter()
        .filter(|(_, (reached, _))| *reached == snapshots.len())
        .min_by_key(|&(id, (_, total))| (total, id))
        .map(|(id, _)| id))
}
