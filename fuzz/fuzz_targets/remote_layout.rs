//! A remote's pack indexes and packs, layout versions 1 to 3, as a hostile or damaged
//! remote could hand them over: decoded without a panic, and only into entries that lie
//! inside a pack, a group frame's members inside a frame, a chunk list as long as its
//! blob has chunks; a frame's payload is checked against its members as a fetch checks
//! it, and a chunk list decoded as a fetch decodes it. The checksum and pack id are made right
//! here, so the fuzzer reaches the parsing behind them.
#![no_main]

use cas::{FrameMember, MAX_FRAME_BYTES, ObjectKind};
use libfuzzer_sys::fuzz_target;
use remote::layout::{
    Encoding, PackEntry, chunk_list_len, decode_chunk_list, decode_index, decode_pack,
};

/// Every entry lies after the magic and the first entry's header; a frame's member is a
/// blob inside a frame no larger than a store's; a whole object starts at 0.
fn check(e: &PackEntry, first_offset: u64) {
    assert!(e.offset >= first_offset);
    if e.encoding == Encoding::Frame {
        assert_eq!(e.kind, ObjectKind::Blob);
        assert!(u64::from(e.len) <= MAX_FRAME_BYTES);
        assert!(u64::from(e.start) + e.size <= MAX_FRAME_BYTES);
    } else {
        assert_eq!(e.start, 0);
    }
    if e.encoding == Encoding::Chunks {
        assert_eq!(e.kind, ObjectKind::Blob);
        assert_eq!(chunk_list_len(e.size), Some(u64::from(e.len)));
    }
}

fuzz_target!(|data: &[u8]| {
    // An index whose trailing checksum is right, naming the pack its bytes 8..40 name.
    let mut index = data.to_vec();
    let check_sum = blake3::hash(&index);
    index.extend_from_slice(check_sum.as_bytes());
    let pack = match data.get(8..40) {
        Some(id) => blake3::Hash::from_bytes(id.try_into().expect("32 bytes")).to_hex().to_string(),
        None => "0".repeat(64),
    };
    if let Ok(entries) = decode_index(&index, &pack) {
        let (entry_len, first_offset) = match &index[..8] {
            b"CAIRNIX1" => (54, 8 + 46),
            _ => (58, 8 + 9 + 45),
        };
        assert_eq!(index.len(), 8 + 32 + 4 + entries.len() * entry_len + 32);
        for e in &entries {
            check(e, first_offset);
        }
    }
    // Any damage to the checksum is refused.
    if let Some(last) = index.last_mut() {
        *last ^= 1;
        assert!(decode_index(&index, &pack).is_err());
    }

    // A pack named by its own hash: every payload lies inside it, in order, one after
    // the other (a frame's members share theirs); a frame's payload goes through the
    // check a fetch makes, which refuses or accepts it without a panic.
    let id = blake3::hash(data).to_hex().to_string();
    if let Ok(entries) = decode_pack(data, &id) {
        let mut end = 8;
        let mut frame: Vec<FrameMember> = Vec::new();
        for (n, (e, payload)) in entries.iter().enumerate() {
            check(e, 0);
            assert_eq!(payload.len(), e.len as usize);
            let shared = n > 0 && entries[n - 1].0.offset == e.offset;
            if !shared {
                assert!(e.offset as usize > end);
                end = e.offset as usize + payload.len();
            }
            if e.encoding == Encoding::Frame {
                frame.push(FrameMember {
                    id: e.id.as_blob(),
                    start: e.start,
                    size: e.size as u32,
                });
                let last_member = entries.get(n + 1).is_none_or(|(next, _)| next.offset != e.offset);
                if last_member {
                    let _ = cas::verify_frame(payload.to_vec(), std::mem::take(&mut frame));
                }
            }
            if e.encoding == Encoding::Chunks {
                let chunks = decode_chunk_list(e.id, e.size, payload).expect("checked");
                assert_eq!(chunks.len() * 32, payload.len());
            }
        }
        assert_eq!(end, data.len());
    }
});
