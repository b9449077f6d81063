//! Format 1 → 2. Format 1 kept the records of the layers above in tables of its own, typed
//! by the store; format 2 keeps them, byte for byte, in side tables their owners declare.
//! The store names none of them: each owner declares where its format 1 table went
//! ([`Format1Table`]), and whoever opens a store passes every owner's declarations
//! ([`OpenOptions::format_1_tables`](crate::OpenOptions::format_1_tables)). A format 1 store
//! holding a table no declaration claims is not touched (the open is refused, naming it), so
//! nothing is left behind. The move is one transaction: a crash leaves a format 1 store,
//! opened again the same way.

use redb::{ReadableTable, TableDefinition, TableHandle};

use super::contain::open_held;
use super::error::{StorageFailure, StorageResult};
use super::side::{JOURNALS, SideDef, SideTable, is_side, sequence_key};
use super::tables::{BLOBS, FORMAT_VERSION_KEY, META, REFS, SEGMENTS, SNAPSHOTS, TREES};

/// How format 1 keyed one of its tables of a layer above, and so how its entries become
/// (scope, key) entries of a side table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format1Keys {
    /// A `&str` key: it becomes the scope, with the empty key.
    Scope,
    /// A `(&str, u64)` key: the scope, and the number as a [`sequence_key`].
    Sequence,
    /// A `(&str, &[u8])` key, kept as it is.
    ScopedBytes,
    /// A 32-byte object id: scope `""`, key the id.
    Object,
}

/// A table format 1 kept for a layer above, and the side table its owner keeps those
/// records in since format 2. Declared by the owner, next to its [`SideTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format1Table {
    /// The table's name in a format 1 database.
    pub name: &'static str,
    /// How it was keyed.
    pub keys: Format1Keys,
    /// Where its records go.
    pub now: SideTable,
}

/// Why a format 1 store could not be upgraded.
#[derive(Debug)]
pub(crate) enum UpgradeError {
    /// It holds a table that no declaration given to open claims.
    Unclaimed(String),
    /// The database failed.
    Storage(StorageFailure),
}

impl From<StorageFailure> for UpgradeError {
    fn from(e: StorageFailure) -> UpgradeError {
        UpgradeError::Storage(e)
    }
}

/// Format 1's intent journals, which the store shares out itself ([`JOURNALS`]).
const FORMAT_1_JOURNALS: TableDefinition<&str, &[u8]> = TableDefinition::new("journals");

/// Moves a format 1 store's records into the side tables `tables` declare and marks it
/// format 2, in `txn` (the next open marks it format 3, whose records format 2's are).
pub(crate) fn from_format_1(
    txn: &redb::WriteTransaction,
    tables: &[Format1Table],
) -> Result<(), UpgradeError> {
    let present: Vec<String> = txn
        .list_tables()
        .storage()?
        .map(|t| t.name().to_owned())
        .collect();
    let own = [
        META.name(),
        BLOBS.name(),
        SEGMENTS.name(),
        TREES.name(),
        SNAPSHOTS.name(),
        REFS.name(),
        FORMAT_1_JOURNALS.name(),
    ];
    let claimed =
        |name: &str| own.contains(&name) || is_side(name) || tables.iter().any(|t| t.name == name);
    if let Some(unclaimed) = present.iter().find(|p| !claimed(p)) {
        return Err(UpgradeError::Unclaimed(unclaimed.clone()));
    }
    let has = |name: &str| present.iter().any(|p| p == name);
    if has(FORMAT_1_JOURNALS.name()) {
        copy_keyed(txn, FORMAT_1_JOURNALS, JOURNALS)?;
    }
    for table in tables.iter().filter(|t| has(t.name)) {
        match table.keys {
            Format1Keys::Scope => copy_keyed(txn, TableDefinition::new(table.name), table.now)?,
            Format1Keys::Sequence => {
                let def: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new(table.name);
                let mut to = open_held(txn, SideDef::new(&table.now.table_name())).storage()?;
                let from = txn.open_table(def).storage()?;
                for item in from.iter().storage()? {
                    let (k, v) = item.storage()?;
                    let (root, seq) = k.value();
                    to.insert((root, &sequence_key(seq)[..]), v.value())
                        .storage()?;
                }
                drop(from);
                txn.delete_table(def).storage()?;
            }
            Format1Keys::ScopedBytes => {
                let def: TableDefinition<(&str, &[u8]), &[u8]> = TableDefinition::new(table.name);
                let mut to = open_held(txn, SideDef::new(&table.now.table_name())).storage()?;
                let from = txn.open_table(def).storage()?;
                for item in from.iter().storage()? {
                    let (k, v) = item.storage()?;
                    to.insert(k.value(), v.value()).storage()?;
                }
                drop(from);
                txn.delete_table(def).storage()?;
            }
            Format1Keys::Object => {
                let def: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new(table.name);
                let mut to = open_held(txn, SideDef::new(&table.now.table_name())).storage()?;
                let from = txn.open_table(def).storage()?;
                for item in from.iter().storage()? {
                    let (k, v) = item.storage()?;
                    to.insert(("", &k.value()[..]), v.value()).storage()?;
                }
                drop(from);
                txn.delete_table(def).storage()?;
            }
        }
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
