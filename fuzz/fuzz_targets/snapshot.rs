//! Snapshot encodings (`docs/format.md`): what `cairn serve` accepts in object uploads
//! and what every stored snapshot decodes through.
#![no_main]

use std::collections::HashSet;

use cas::{SNAPSHOT_CONTEXT, Snapshot, SnapshotId, fuzzing};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let id = SnapshotId::from_bytes(
        *blake3::Hasher::new_derive_key(SNAPSHOT_CONTEXT)
            .update(data)
            .finalize()
            .as_bytes(),
    );
    let decoded = Snapshot::decode(data);
    // The store's reader decodes exactly as the canonical decoder does, and refuses bytes
    // under another id.
    let stored = fuzzing::decode_snapshot_record(id, data);
    assert_eq!(decoded.is_ok(), stored.is_ok());
    let mut other = *id.as_bytes();
    other[0] ^= 1;
    assert!(fuzzing::decode_snapshot_record(SnapshotId::from_bytes(other), data).is_err());

    let Ok(snap) = decoded else {
        return;
    };
    assert_eq!(stored.ok().as_ref(), Some(&snap));
    assert_eq!(
        snap.encode(),
        data,
        "decoding accepted a non-canonical encoding"
    );
    assert_eq!(snap.id(), id);
    let unique: HashSet<_> = snap.parents.iter().collect();
    assert_eq!(unique.len(), snap.parents.len(), "a parent appears twice");
    for key in snap.labels.keys() {
        assert!(
            cas::validate_label_key(key).is_ok(),
            "invalid label key {key:?}"
        );
    }
});
