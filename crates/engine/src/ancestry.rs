//! A snapshot's ancestors: the steps back a spec may end with (`SNAP~2`, `SNAP^`), and the
//! base several snapshots' changes are taken against (`combine`, `compare`, `rebase`):
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
    /// A spec whose steps back are not `~N` or `^N`.
    #[error(
        "unknown snapshot '{spec}': after a name or id only steps back may follow, such as ~2 (two first parents back) or ^2 (the second parent)"
    )]
    Steps {
        /// The spec.
        spec: String,
    },
    /// A step back past the snapshots this store has.
    #[error("unknown snapshot '{spec}': {reason}")]
    NoParent {
        /// The spec.
        spec: String,
        /// Which parent is missing, and why.
        reason: String,
    },
}

crate::error::coded!(AncestryError);

impl AncestryError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            AncestryError::Twice { .. } => Code::Usage,
            AncestryError::NoBase { .. } => Code::NoBase,
            AncestryError::Steps { .. } | AncestryError::NoParent { .. } => Code::UnknownId,
        }
    }
}

/// One step back from a snapshot, as git spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// `^N`: its Nth parent (`^` is `^1`, `^0` the snapshot itself).
    Parent(u32),
    /// `~N`: N first parents back (`~` is `~1`).
    Back(u32),
}

/// `spec` split into the name or id it starts with and the steps back after it (`~` and
/// `^` are in no ref or checkpoint name, so the first one starts the steps).
pub(crate) fn parse(spec: &str) -> Result<(&str, Vec<Step>), Error> {
    let Some(at) = spec.find(['~', '^']) else {
        return Ok((spec, Vec::new()));
    };
    let malformed = || AncestryError::Steps {
        spec: spec.to_owned(),
    };
    let (base, mut rest) = spec.split_at(at);
    if base.is_empty() {
        return Err(malformed().into());
    }
    let mut steps = Vec::new();
    while let Some(kind) = rest.chars().next() {
        let step: fn(u32) -> Step = match kind {
            '~' => Step::Back,
            '^' => Step::Parent,
            _ => return Err(malformed().into()),
        };
        let after = &rest[1..];
        let digits = after
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after.len());
        steps.push(step(match &after[..digits] {
            "" => 1,
            n => n.parse().map_err(|_| malformed())?,
        }));
        rest = &after[digits..];
    }
    Ok((base, steps))
}

/// The snapshot `steps` back from `start` (resolved from `spec`).
pub(crate) fn walk(
    reader: &cas::Reader,
    spec: &str,
    start: SnapshotId,
    steps: &[Step],
) -> Result<SnapshotId, Error> {
    let mut id = start;
    for step in steps {
        let (nth, times) = match *step {
            Step::Parent(0) => continue,
            Step::Parent(n) => (n, 1),
            Step::Back(n) => (1, n),
        };
        for _ in 0..times {
            let parents = reader.snapshot(id)?.parents;
            let missing = |reason: String| AncestryError::NoParent {
                spec: spec.to_owned(),
                reason,
            };
            let Some(&parent) = parents.get(nth as usize - 1) else {
                return Err(missing(match parents.len() {
                    0 => format!("snapshot {id} has no parent"),
                    n => format!("snapshot {id} has {n} parent(s), not {nth}"),
                })
                .into());
            };
            if !reader.has_snapshot(parent)? {
                return Err(missing(format!(
                    "parent {parent} of snapshot {id} is not in this store (history gc pruned, or never fetched)"
                ))
                .into());
            }
            id = parent;
        }
    }
    Ok(id)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_parsed_and_anything_else_after_them_is_refused() {
        assert_eq!(parse("main").unwrap(), ("main", vec![]));
        assert_eq!(
            parse("ab12cd~3^^2~").unwrap(),
            (
                "ab12cd",
                vec![
                    Step::Back(3),
                    Step::Parent(1),
                    Step::Parent(2),
                    Step::Back(1)
                ]
            )
        );
        for bad in [
            "~",
            "^1",
            "a~b",
            "a^Ò",
            "a~1Ò^",
            "a^~x",
            "a~4294967296",
            "a~-1",
            "Ò~Ò",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
