//! Values of the store's `trees` table: a codec byte, then the tree encoding, raw or
//! zstd-compressed, checked against the id it is stored under.
#![no_main]

use std::io::Read;

use cas::{TREE_CONTEXT, Tree, TreeId, fuzzing};
use libfuzzer_sys::fuzz_target;

/// Decompressed bytes beyond this are not followed by the oracle.
const ORACLE_LIMIT: u64 = 16 << 20;

/// The encoding a record holds, by an independent reading of the record format.
fn oracle(value: &[u8]) -> Option<Vec<u8>> {
    let (&codec, body) = value.split_first()?;
    match codec {
        0 => Some(body.to_vec()),
        1 => {
            let mut out = Vec::new();
            zstd::stream::Decoder::new(body)
                .ok()?
                .take(ORACLE_LIMIT + 1)
                .read_to_end(&mut out)
                .ok()?;
            (out.len() as u64 <= ORACLE_LIMIT).then_some(out)
        }
        _ => None,
    }
}

fuzz_target!(|value: &[u8]| {
    let Some(encoding) = oracle(value) else {
        // Not a record the oracle can follow: the reader must still refuse it cleanly.
        assert!(fuzzing::decode_tree_record(TreeId::from_bytes([0; 32]), value).is_err());
        return;
    };
    let id = TreeId::from_bytes(
        *blake3::Hasher::new_derive_key(TREE_CONTEXT)
            .update(&encoding)
            .finalize()
            .as_bytes(),
    );
    let read = fuzzing::decode_tree_record(id, value);
    match (Tree::decode(&encoding), &read) {
        (Ok(tree), Ok(back)) => assert_eq!(&tree, back),
        (Err(_), Err(_)) => {}
        (expected, got) => panic!("record read {got:?}, its encoding decodes to {expected:?}"),
    }
    let mut other = *id.as_bytes();
    other[31] ^= 0x80;
    assert!(
        fuzzing::decode_tree_record(TreeId::from_bytes(other), value).is_err(),
        "a record was read under an id it does not hash to"
    );
});
