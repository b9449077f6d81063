//! `POST /v1/objects/put` of `cairn serve`: the JSON body, and the verification of every
//! object in it (id from its bytes; trees and snapshots decoded under the tree rules).
#![no_main]

use cairn_client::Object;
use cas::{BlobId, ObjectId, ObjectKind, SNAPSHOT_CONTEXT, Snapshot, TREE_CONTEXT, Tree};
use cas::{VerifiedObject, VerifyError, verify_object};
use libfuzzer_sys::fuzz_target;

/// The request body, as the server reads it.
#[derive(serde::Deserialize)]
struct Objects {
    objects: Vec<Object>,
}

fn kind_of(kind: cairn_client::WireObjectKind) -> ObjectKind {
    match kind {
        cairn_client::WireObjectKind::Blob => ObjectKind::Blob,
        cairn_client::WireObjectKind::Tree => ObjectKind::Tree,
        cairn_client::WireObjectKind::Snapshot => ObjectKind::Snapshot,
    }
}

/// The id of `data` as `kind`, and whether it is a valid object of that kind, computed
/// without the verifier.
fn oracle(kind: ObjectKind, data: &[u8]) -> (ObjectId, bool) {
    let derived = |context| {
        ObjectId::from_bytes(
            *blake3::Hasher::new_derive_key(context)
                .update(data)
                .finalize()
                .as_bytes(),
        )
    };
    match kind {
        ObjectKind::Blob => (BlobId::of(data).into(), true),
        ObjectKind::Tree => (derived(TREE_CONTEXT), Tree::decode(data).is_ok()),
        ObjectKind::Snapshot => (derived(SNAPSHOT_CONTEXT), Snapshot::decode(data).is_ok()),
    }
}

fn check(kind: ObjectKind, claimed: ObjectId, data: &[u8]) {
    let (actual, valid) = oracle(kind, data);
    match verify_object(kind, claimed, data) {
        Ok(object) => {
            // Accepted: exactly the object its bytes are, under the id it claimed.
            assert!(valid && actual == claimed);
            assert_eq!(object.id(), claimed);
            match (kind, &object) {
                (ObjectKind::Blob, VerifiedObject::Blob(b)) => {
                    assert_eq!(b.size(), data.len() as u64)
                }
                (ObjectKind::Tree, VerifiedObject::Tree(t)) => assert_eq!(t.encode(), data),
                (ObjectKind::Snapshot, VerifiedObject::Snapshot(s)) => {
                    assert_eq!(s.encode(), data)
                }
                _ => panic!("verified as another kind"),
            }
        }
        Err(VerifyError::Invalid { kind: k, id, .. }) => {
            assert!(!valid && k == kind && id == claimed)
        }
        Err(VerifyError::HashMismatch {
            kind: k,
            claimed: c,
            actual: a,
        }) => assert!(valid && k == kind && c == claimed && a == actual && a != claimed),
        Err(e) => panic!("unexpected refusal {e}"),
    }
}

fuzz_target!(|data: &[u8]| {
    // The body as a client sends it.
    if let Ok(body) = serde_json::from_slice::<Objects>(data) {
        for o in &body.objects {
            // An id that is not 64 hex digits is refused before the bytes are looked at.
            if let Ok(claimed) = o.id.parse::<ObjectId>() {
                check(kind_of(o.kind), claimed, &o.data);
            }
        }
    }
    // The raw object bytes, claimed under their own id and under another.
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    let kind = match selector % 3 {
        0 => ObjectKind::Blob,
        1 => ObjectKind::Tree,
        _ => ObjectKind::Snapshot,
    };
    let (id, _) = oracle(kind, bytes);
    check(kind, id, bytes);
    let mut other = *id.as_bytes();
    other[usize::from(selector) % 32] ^= 1;
    check(kind, ObjectId::from_bytes(other), bytes);
});
