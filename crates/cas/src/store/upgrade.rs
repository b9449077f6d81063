//! Format 1 → 2. Format 1 kept the records of the layers above in tables of its own, typed
//! by the store; format 2 keeps them, byte for byte, in side tables their owners declare.
//! The move is one transaction: a crash leaves a format 1 store, opened again the same way.

use redb::{ReadableTable, TableDefinition, TableHandle};

use super::contain::open_held;
use super::error::{StorageFailure, StorageResult};
use super::side::{JOURNALS, SideDef, SideTable, sequence_key};
use super::tables::{FORMAT_VERSION_KEY, META};

/// Where format 1's worktree registry went (owned by `fs_manager`).
pub const FORMAT_1_WORKTREES: SideTable = SideTable::new("fs.worktrees");
/// Where format 1's op log went (owned by `fs_manager`); keys are sequence numbers.
pub const FORMAT_1_OPLOG: SideTable = SideTable::new("fs.oplog");
/// Where format 1's stat cache went (owned by `fs_manager`).
pub const FORMAT_1_FILE_STATES: SideTable = SideTable::new("fs.file_states");
/// Where format 1's exported git ids went (owned by `merge_back`).
pub const FORMAT_1_GIT_OIDS: SideTable = SideTable::keyed_by_object("git.oids");

const WORKTREES: TableDefinition<&str, &[u8]> = TableDefinition::new("worktrees");
const OPLOG: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("oplog");
const FILE_STATES: TableDefinition<(&str, &[u8]), &[u8]> = TableDefinition::new("file_states");
const GIT_OIDS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("git_oids");
const FORMAT_1_JOURNALS: TableDefinition<&str, &[u8]> = TableDefinition::new("journals");

/// Moves a format 1 store's records into side tables and marks it format 2, in `txn` (the
/// next open marks it format 3, whose records format 2's are).
pub(crate) fn from_format_1(txn: &redb::WriteTransaction) -> Result<(), StorageFailure> {
    let present: Vec<String> = txn
        .list_tables()
        .storage()?
        .map(|t| t.name().to_owned())
        .collect();
    let has = |name: &str| present.iter().any(|p| p == name);
    if has(WORKTREES.name()) {
        copy_keyed(txn, WORKTREES, FORMAT_1_WORKTREES)?;
    }
    if has(FORMAT_1_JOURNALS.name()) {
        copy_keyed(txn, FORMAT_1_JOURNALS, JOURNALS)?;
    }
    if has(OPLOG.name()) {
        let mut to = open_held(txn, SideDef::new(&FORMAT_1_OPLOG.table_name())).storage()?;
        let from = txn.open_table(OPLOG).storage()?;
        for item in from.iter().storage()? {
            let (k, v) = item.storage()?;
            let (root, seq) = k.value();
            to.insert((root, &sequence_key(seq)[..]), v.value())
                .storage()?;
        }
        drop(from);
        txn.delete_table(OPLOG).storage()?;
    }
    if has(FILE_STATES.name()) {
        let mut to = open_held(txn, SideDef::new(&FORMAT_1_FILE_STATES.table_name())).storage()?;
        let from = txn.open_table(FILE_STATES).storage()?;
        for item in from.iter().storage()? {
            let (k, v) = item.storage()?;
            to.insert(k.value(), v.value()).storage()?;
        }
        drop(from);
        txn.delete_table(FILE_STATES).storage()?;
    }
    if has(GIT_OIDS.name()) {
        let mut to = open_held(txn, SideDef::new(&FORMAT_1_GIT_OIDS.table_name())).storage()?;
        let from = txn.open_table(GIT_OIDS).storage()?;
        for item in from.iter().storage()? {
            let (k, v) = item.storage()?;
            to.insert(("", &k.value()[..]), v.value()).storage()?;
        }
        drop(from);
        txn.delete_table(GIT_OIDS).storage()?;
    }
    let mut meta = open_held(txn, META).storage()?;
    meta.insert(FORMAT_VERSION_KEY, 2).storage()?;
    Ok(())
}

/// Copies a table keyed by a string into side table `to`, key `""` in each scope, and
/// deletes it.
fn copy_keyed(
    txn: &redb::WriteTransaction,
    from_def: TableDefinition<&str, &[u8]>,
    to: SideTable,
) -> Result<(), StorageFailure> {
    let mut to = open_held(txn, SideDef::new(&to.table_name())).storage()?;
    let from = txn.open_table(from_def).storage()?;
    for item in from.iter().storage()? {
        let (k, v) = item.storage()?;
        to.insert((k.value(), &[][..]), v.value()).storage()?;
    }
    drop(from);
    txn.delete_table(from_def).storage()?;
    Ok(())
}
