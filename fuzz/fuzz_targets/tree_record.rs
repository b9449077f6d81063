//! Values of the store's `trees` table: a codec byte, then the tree encoding, raw or
//! zstd-compressed, or (codec 2) where in the blob log its compressed encoding is, checked
//! against the id it is stored under. For codec 2 the input is the record, then the log.
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

fn unzstd(frame: &[u8]) -> Oracle {
    let mut out = Vec::new();
    let read = zstd::stream::Decoder::new(frame)
        .and_then(|d| d.take(ORACLE_LIMIT + 1).read_to_end(&mut out));
    match read {
        _ if out.len() as u64 > ORACLE_LIMIT => Oracle::TooLarge,
        Ok(_) => Oracle::Encoding(out),
        Err(_) => Oracle::Invalid,
    }
}

/// One LEB128 varint off the front, as the record format has it (shortest form, in a u64).
fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        let bits = u64::from(b & 0x7f);
        if i == 9 && (b & 0x80 != 0 || bits > 1) {
            return None;
        }
        v |= bits << (7 * i);
        if b & 0x80 == 0 {
            return if b == 0 && i > 0 { None } else { Some(v) };
        }
    }
    None
}

/// Splits the input into the record and the blob log it points into.
fn split(input: &[u8]) -> (&[u8], &[u8]) {
    if input.first() != Some(&2) {
        return (input, &[]);
    }
    let mut rest = &input[1..];
    let _ = varint(&mut rest).and_then(|_| varint(&mut rest));
    input.split_at(input.len() - rest.len())
}

fn oracle(value: &[u8], log: &[u8]) -> Oracle {
    let Some((&codec, mut body)) = value.split_first() else {
        return Oracle::Invalid;
    };
    match codec {
        0 => Oracle::Encoding(body.to_vec()),
        1 => unzstd(body),
        2 => {
            let (Some(offset), Some(len)) = (varint(&mut body), varint(&mut body)) else {
                return Oracle::Invalid;
            };
            if len > u64::from(u32::MAX) || !body.is_empty() {
                return Oracle::Invalid;
            }
            match usize::try_from(offset)
                .ok()
                .and_then(|o| log.get(o..o.checked_add(len as usize)?))
            {
                Some(frame) => unzstd(frame),
                None => Oracle::Invalid,
            }
        }
        _ => Oracle::Invalid,
    }
}

fuzz_target!(|input: &[u8]| {
    let (value, log) = split(input);
    let encoding = match oracle(value, log) {
        Oracle::Encoding(encoding) => encoding,
        Oracle::TooLarge => return,
        // Not a record: the reader must refuse it cleanly.
        Oracle::Invalid => {
            let read = fuzzing::decode_tree_record(TreeId::from_bytes([0; 32]), value, log);
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
    let read = fuzzing::decode_tree_record(id, value, log);
    match (Tree::decode(&encoding), &read) {
        (Ok(tree), Ok(back)) => assert_eq!(&tree, back),
        (Err(_), Err(_)) => {}
        (expected, got) => panic!("record read {got:?}, its encoding decodes to {expected:?}"),
    }
    let mut other = *id.as_bytes();
    other[31] ^= 0x80;
    assert!(
        fuzzing::decode_tree_record(TreeId::from_bytes(other), value, log).is_err(),
        "a record was read under an id it does not hash to"
    );
});
