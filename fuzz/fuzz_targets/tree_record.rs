//! Values of the store's `trees` table: a codec byte, then the tree encoding, raw or
//! zstd-compressed, checked against the id it is stored under.
#![no_main]

use std::io::Read;

use cas::{TREE_CONTEXT, Tree, TreeId, fuzzing};
use libfuzzer_sys::fuzz_target;

/// Decompressed bytes beyond this are not followed. A few KiB of zstd expand to tens of
/// MiB (the reader decompresses a record whole before checking its hash): the fuzzer
/// breeds such inputs, and spends its time in zstd rather than in cairn's code.
const ORACLE_LIMIT: u64 = 1 << 20;

/// The encoding a record holds, by an independent reading of the record format.
enum Oracle {
    Encoding(Vec<u8>),
    Invalid,
    TooLarge,
}

fn oracle(value: &[u8]) -> Oracle {
    let Some((&codec, body)) = value.split_first() else {
        return Oracle::Invalid;
    };
    match codec {
        0 => Oracle::Encoding(body.to_vec()),
        1 => {
            let mut out = Vec::new();
            let read = zstd::stream::Decoder::new(body)
                .and_then(|d| d.take(ORACLE_LIMIT + 1).read_to_end(&mut out));
            match read {
                _ if out.len() as u64 > ORACLE_LIMIT => Oracle::TooLarge,
                Ok(_) => Oracle::Encoding(out),
                Err(_) => Oracle::Invalid,
            }
        }
        _ => Oracle::Invalid,
    }
}

fuzz_target!(|value: &[u8]| {
    let encoding = match oracle(value) {
        Oracle::Encoding(encoding) => encoding,
        Oracle::TooLarge => return,
        // Not a record: the reader must refuse it cleanly.
        Oracle::Invalid => {
            let read = fuzzing::decode_tree_record(TreeId::from_bytes([0; 32]), value);
            assert!(read.is_err());
            return;
        }
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
