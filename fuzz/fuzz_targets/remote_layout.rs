//! A remote's pack indexes and packs, as a hostile or damaged remote could hand them over:
//! decoded without a panic, and only into entries that lie inside a pack. The checksum and
//! pack id are made right here, so the fuzzer reaches the parsing behind them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use remote::layout::{decode_index, decode_pack};

fuzz_target!(|data: &[u8]| {
    // An index whose trailing checksum is right, naming the pack its bytes 8..40 name.
    let mut index = data.to_vec();
    let check = blake3::hash(&index);
    index.extend_from_slice(check.as_bytes());
    let pack = match data.get(8..40) {
        Some(id) => blake3::Hash::from_bytes(id.try_into().expect("32 bytes")).to_hex().to_string(),
        None => "0".repeat(64),
    };
    if let Ok(entries) = decode_index(&index, &pack) {
        assert_eq!(index.len(), 8 + 32 + 4 + entries.len() * 54 + 32);
        for e in entries {
            assert!(e.offset >= 8 + 46);
        }
    }
    // Any damage to the checksum is refused.
    if let Some(last) = index.last_mut() {
        *last ^= 1;
        assert!(decode_index(&index, &pack).is_err());
    }

    // A pack named by its own hash: every entry's payload lies inside it, in order.
    let id = blake3::hash(data).to_hex().to_string();
    if let Ok(entries) = decode_pack(data, &id) {
        let mut end = 8;
        for (e, payload) in entries {
            assert_eq!(e.offset as usize, end + 46);
            assert_eq!(payload.len(), e.len as usize);
            end = e.offset as usize + payload.len();
        }
        assert_eq!(end, data.len());
    }
});
