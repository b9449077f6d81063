//! `fsck`: every object and reference of the store verified.

use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

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
    /// Objects the store lacks but knows a remote holds (a partial history's parents, the
    /// files of a lazily mounted snapshot not read yet); left out when none: the store is
    /// whole.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub promised: u64,
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

impl Engine {
    /// `cairn fsck`: every object and reference verified.
    pub fn fsck(&self, _call: &Call, _options: FsckOptions) -> Result<FsckOutcome, Error> {
        let store = self.store(Access::Read)?;
        let registry = fs_manager::Registry {
            store: Some(store.root().to_owned()),
            ..fs_manager::Registry::default()
        };
        let layers = crate::deps::keep::LayerRecords::default();
        let owners: [&dyn cas::SideOwner; 3] = [&registry, &remote::RemotesOwner, &layers];
        let mut out = store.fsck(&cas::StoreFsckOptions::default(), &owners)?;
        let copies = crate::deps::stored_trees(&store.reader()?)?;
        for p in fs_manager::layer_copies::check(&store, &copies)? {
            out.problems.push(cas::Problem::new(
                "dependency layer copy",
                &p.key,
                p.message,
            ));
        }
        out.problems.extend(signature_problems(&store.reader()?)?);
        let promised = promised_count(&store.reader()?)?;
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
                promised,
            },
            message,
        })
    }
}

/// How many objects the store knows only as promised by a remote.
fn promised_count(reader: &cas::Reader) -> Result<u64, Error> {
    let mut n = 0;
    for (key, _) in reader.side_scope(cas::PROMISED, "")? {
        let Ok(bytes) = <[u8; 32]>::try_from(key.as_slice()) else {
            continue;
        };
        let id = cas::ObjectId::from_bytes(bytes);
        let here = reader.has_blob(id.as_blob())?
            || reader.has_tree(id.as_tree())?
            || reader.has_snapshot(id.as_snapshot())?;
        n += u64::from(!here);
    }
    Ok(n)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Verify every object and reference of the store.
    Fsck(FsckOptions) -> FsckOutcome = "fsck" via fsck [Route];
}

impl VerbSpec for verbs::Fsck {
    const READS_ONLY: bool = true;

    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        outcome.message.as_deref()
    }

    const REFUSED: Option<&'static str> = Some(
        "A negative answer, nothing changed: problems found (`problems`); `message` says why.",
    );

    const EXAMPLE: Option<&'static str> = Some(r#"{}"#);
}
