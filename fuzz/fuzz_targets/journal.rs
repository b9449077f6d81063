//! Values of the store's `journals` table: the JSON intent journal `cairn recover` reads
//! to finish an interrupted operation.
#![no_main]

use fs_manager::fuzzing::reencode_journal;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(written) = reencode_journal(data) else {
        return;
    };
    // A journal as an operation writes it reads back as the same journal.
    match reencode_journal(&written) {
        Ok(again) => assert_eq!(again, written),
        Err(e) => panic!("a written journal does not decode: {e}"),
    }
});
