//! Values of the store's `file_states` table: the per-directory records of the stat cache
//! (checksummed, a zstd frame inside).
#![no_main]

use fs_manager::fuzzing::{decode_dir_record, seal_dir_record};
use libfuzzer_sys::fuzz_target;

fn check_dir_record(bytes: &[u8]) {
    let Some(record) = decode_dir_record(bytes) else {
        return;
    };
    // What a capture writes back reads as what it read. (Not one encoding per record: a
    // cache record is not hashed, and a zstd frame has many encodings of one body.)
    assert!(record.round_trips, "record does not round-trip: {bytes:?}");
    // A listing is what a directory read gives: single names, each once, in byte order
    // (lookups binary-search it; a capture joins the names to paths).
    for pair in record.names.windows(2) {
        assert!(
            pair[0] < pair[1],
            "listing not strictly ascending: {pair:?}"
        );
    }
    for name in &record.names {
        assert!(
            !name.is_empty()
                && name.as_slice() != b"."
                && name.as_slice() != b".."
                && !name.contains(&b'/')
                && !name.contains(&0),
            "listing holds {name:?}, not a file name"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    // As stored (the checksum decides), and sealed so the parser behind it is reached.
    check_dir_record(data);
    check_dir_record(&seal_dir_record(data));
});
