//! Values of the `fs.worktrees` and `fs.oplog` side tables: JSON registry records and op-log
//! entries.
#![no_main]

use fs_manager::fuzzing::{decode_op_record, decode_worktree_record};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(record) = decode_worktree_record(data) {
        // What the store writes back reads as the same record, and writes identically.
        let written = serde_json::to_vec(&record).expect("a record encodes");
        let again = decode_worktree_record(&written).expect("a written record decodes");
        assert_eq!(again, record);
        assert_eq!(serde_json::to_vec(&again).expect("encodes"), written);
        let snapshots: Vec<_> = record.snapshots().collect();
        assert_eq!(
            snapshots.len(),
            usize::from(record.head.is_some())
                + record.checkpoints.len()
                + usize::from(record.task.is_some())
        );
    }
    if let Ok(op) = decode_op_record(data) {
        let written = serde_json::to_vec(&op).expect("an op encodes");
        let again = decode_op_record(&written).expect("a written op decodes");
        assert_eq!(again, op);
        assert_eq!(serde_json::to_vec(&again).expect("encodes"), written);
        assert_eq!(op.is_change(), op.before != op.after);
    }
});
