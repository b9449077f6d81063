//! Where attestations live: two side tables the store owns ([`ATTESTATIONS`], the records
//! by tree, and [`ATTESTATION_SIGNATURES`]), written in the same transaction as the output
//! blobs they name. A store that has never recorded a check lacks both, and reads them as
//! empty: they need no format upgrade (`docs/design.md`, "Side tables"). `gc` keeps a record
//! (and its output blobs and signatures) while a live snapshot has its tree as root, and
//! drops it with the last one (`mark`); `fsck` checks each record against its id, its tree
//! and its blobs.

use super::batch::WriteBatch;
use super::error::StorageFailure;
use super::owner::Problem;
use super::reader::Reader;
use super::side::{ScopedEntry, SideTable};
use crate::attestation::{Attestation, decode_attestation};
use crate::id::{AttestationId, TreeId};
use crate::object::ObjectError;

/// Attestations by tree: scope the tree's id (64 hex), key the attestation's id (32 bytes),
/// value its canonical encoding (`docs/format.md`). The one place attestations are kept:
/// finding a tree's is reading its scope.
pub const ATTESTATIONS: SideTable = SideTable::new("cas.attestations");

/// Signatures of attestations: scope the attestation's id (64 hex), key the signing key's
/// fingerprint (`SHA256:…`, UTF-8), value the signature as its signer armored it (for
/// `verify --sign`, OpenSSH's SSHSIG). The store does not read them; they go with their
/// attestation.
pub const ATTESTATION_SIGNATURES: SideTable = SideTable::new("cas.attestation-signatures");

/// An attestation record that is not what its key says.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttestationReadError {
    /// Its bytes do not decode, or do not hash to its id, or name another tree.
    #[error("attestation {id} (of tree {tree}) is corrupt: {source}")]
    Corrupt {
        /// The attestation.
        id: AttestationId,
        /// The tree it is filed under.
        tree: TreeId,
        /// What is wrong.
        source: ObjectError,
    },
    /// The database failed.
    #[error(transparent)]
    Storage(#[from] StorageFailure),
}

impl WriteBatch {
    /// Records `attestation` under its tree; its output blobs must be stored or in the batch.
    pub fn add_attestation(&mut self, attestation: &Attestation) -> AttestationId {
        let id = attestation.id();
        self.put_side(
            ATTESTATIONS,
            &attestation.tree.to_hex(),
            id.as_bytes(),
            attestation.encode(),
        );
        id
    }

    /// Records `signature` of attestation `id` by the key of `fingerprint`.
    pub fn add_attestation_signature(
        &mut self,
        id: AttestationId,
        fingerprint: &str,
        signature: Vec<u8>,
    ) {
        self.put_side(
            ATTESTATION_SIGNATURES,
            &id.to_hex(),
            fingerprint.as_bytes(),
            signature,
        );
    }
}

fn decode(
    tree: TreeId,
    key: &[u8],
    value: &[u8],
) -> Result<(AttestationId, Attestation), AttestationReadError> {
    let id =
        AttestationId::from_bytes(key.try_into().map_err(|_| AttestationReadError::Corrupt {
            id: AttestationId::from_bytes([0; 32]),
            tree,
            source: ObjectError::InvalidField {
                field: "key (not 32 bytes)",
            },
        })?);
    let corrupt = |source| AttestationReadError::Corrupt { id, tree, source };
    let attestation = decode_attestation(id, value).map_err(corrupt)?;
    if attestation.tree != tree {
        return Err(corrupt(ObjectError::InvalidField {
            field: "tree (filed under another)",
        }));
    }
    Ok((id, attestation))
}

impl Reader {
    /// The attestations of `tree`, each checked against its id, in no particular order.
    pub fn attestations(
        &self,
        tree: TreeId,
    ) -> Result<Vec<(AttestationId, Attestation)>, AttestationReadError> {
        self.side_scope(ATTESTATIONS, &tree.to_hex())?
            .into_iter()
            .map(|(k, v)| decode(tree, &k, &v))
            .collect()
    }

    /// The signatures of attestation `id`: (the signing key's fingerprint, the armored
    /// signature), by fingerprint.
    pub fn attestation_signatures(
        &self,
        id: AttestationId,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageFailure> {
        Ok(self
            .side_scope(ATTESTATION_SIGNATURES, &id.to_hex())?
            .into_iter()
            .map(|(k, v)| (String::from_utf8_lossy(&k).into_owned(), v))
            .collect())
    }

    /// Every attestation record as it is filed: (its tree as filed, its key, its value).
    /// For `gc` and `fsck`, which must see records that do not decode too.
    pub(super) fn attestation_records(&self) -> Result<Vec<ScopedEntry>, StorageFailure> {
        self.side_entries(ATTESTATIONS)
    }
}

/// What `fsck` finds wrong with the attestation records: one that does not decode, hash to
/// its id or belong to the tree it is filed under; a tree or output blob it names that is
/// missing; a signature of no recorded attestation. Returns how many records it checked.
pub(super) fn check(reader: &Reader, problems: &mut Vec<Problem>) -> Result<u64, StorageFailure> {
    let mut checked = 0;
    let mut ids = std::collections::HashSet::new();
    for (scope, key, value) in reader.attestation_records()? {
        checked += 1;
        let Ok(tree) = scope.parse::<TreeId>() else {
            problems.push(Problem::new(
                "attestation",
                hex(&key),
                format!("filed under '{scope}', which is not a tree id"),
            ));
            continue;
        };
        let (id, attestation) = match decode(tree, &key, &value) {
            Ok(found) => found,
            Err(e) => {
                problems.push(Problem::new("attestation", hex(&key), e));
                continue;
            }
        };
        ids.insert(id);
        if !reader.has_tree(tree)? && reader.promised(tree.into())?.is_none() {
            problems.push(Problem::new(
                "attestation",
                id,
                format!("its tree {tree} is missing"),
            ));
        }
        for (stream, output) in [
            ("stdout", attestation.stdout),
            ("stderr", attestation.stderr),
        ] {
            if !reader.has_blob(output.blob)? {
                problems.push(Problem::new(
                    "attestation",
                    id,
                    format!("its {stream} blob {} is missing", output.blob),
                ));
            }
        }
    }
    for (scope, key, _) in reader.side_entries(ATTESTATION_SIGNATURES)? {
        checked += 1;
        let known = scope
            .parse::<AttestationId>()
            .is_ok_and(|id| ids.contains(&id));
        if !known {
            problems.push(Problem::new(
                "signature",
                format!("{scope} {}", String::from_utf8_lossy(&key)),
                "signs no recorded attestation",
            ));
        }
    }
    Ok(checked)
}

fn hex(bytes: &[u8]) -> String {
    crate::id::hex_encode(bytes)
}
