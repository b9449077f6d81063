//! Side tables: records that layers above the store own (the worktree registry, op logs,
//! stat caches, git ids), kept in the store's database so they commit in the same
//! transaction as the objects they name. The store does not read their values; it orders
//! their keys and applies a batch's changes in order. What the records keep alive, their
//! owners say (`owner`).

use std::collections::HashMap;

use redb::{ReadableTable, TableDefinition, TableHandle};

use super::contain::{Held, open_held};
use super::error::{StorageFailure, StorageResult, WriteError};

/// The redb definition every side table has: (scope, key) → value. A scope is what the
/// owner groups entries by (a worktree root, or `""`); keys sort bytewise within it.
pub(crate) type SideDef<'a> = TableDefinition<'a, (&'static str, &'static [u8]), &'static [u8]>;

/// Prefixes of side tables' names in the database. A table keyed by object has its
/// entries dropped by `gc` with the object its key names, whichever layer owns it.
const PLAIN_PREFIX: &str = "side/";
const BY_OBJECT_PREFIX: &str = "side-by-object/";

/// A table that a layer above the store owns. Declare it once, as a constant, in the
/// layer that owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SideTable {
    name: &'static str,
    by_object: bool,
}

impl SideTable {
    /// A table called `name` (unique in the store; by convention `owner.what`).
    pub const fn new(name: &'static str) -> SideTable {
        SideTable {
            name,
            by_object: false,
        }
    }

    /// A table whose entries are about objects: scope `""`, key an object id. `gc` drops
    /// an entry with its object.
    pub const fn keyed_by_object(name: &'static str) -> SideTable {
        SideTable {
            name,
            by_object: true,
        }
    }

    /// Its name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Its name in the database.
    pub(crate) fn table_name(&self) -> String {
        let prefix = if self.by_object {
            BY_OBJECT_PREFIX
        } else {
            PLAIN_PREFIX
        };
        format!("{prefix}{}", self.name)
    }
}

/// Directory → the intent journal of an operation on its files that has not finished. The
/// one side table two layers share (`fs_manager`'s operations and `merge_back`'s
/// `merge --checkout`): a directory has at most one operation under way, whichever layer
/// runs it. Values start with a JSON object whose `op` names the operation. While any
/// entry exists, `gc` refuses to run.
pub const JOURNALS: SideTable = SideTable::new("journals");

/// Objects this store does not hold but knows to be on a remote: scope `""`, key the
/// object id, value the remote's name. A snapshot fetched without its history names
/// parents recorded here; reference checks, `fsck` and `gc` count them as present
/// elsewhere rather than missing. An entry goes when its object is stored.
pub const PROMISED: SideTable = SideTable::new("cas.promised");

/// Snapshots `gc` removed under a size budget although a snapshot it kept names them as
/// parents: scope `""`, key the snapshot id, empty value. History ends there: `log` stops,
/// `fsck` and `gc` do not count them as missing. `gc` rewrites the table each run.
pub const PRUNED: SideTable = SideTable::new("cas.pruned");

/// True if the database table `name` is a side table.
pub(crate) fn is_side(name: &str) -> bool {
    name.starts_with(PLAIN_PREFIX) || is_by_object(name)
}

/// True if the database table `name` is a side table keyed by object.
pub(crate) fn is_by_object(name: &str) -> bool {
    name.starts_with(BY_OBJECT_PREFIX)
}

/// The range of keys of `scope`: `(scope, [])` up to, not including, the first key of
/// the next possible scope (`scope` followed by NUL).
pub(crate) fn scope_bounds(scope: &str) -> (String, String) {
    (scope.to_owned(), format!("{scope}\0"))
}

/// An entry of a scope: its key and value.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// An entry of a side table: its scope, key and value.
pub type ScopedEntry = (String, Vec<u8>, Vec<u8>);

/// A side table open in a write transaction.
type WriteTable<'t> = Held<redb::Table<'t, (&'static str, &'static [u8]), &'static [u8]>>;

/// An entry of a side table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SideKey {
    /// Its table.
    pub table: SideTable,
    /// Its scope.
    pub scope: String,
    /// Its key in the scope.
    pub key: Vec<u8>,
}

/// A side entry's new value, or `None` to delete it.
pub type Rewrite = (SideKey, Option<Vec<u8>>);

/// One change to a side table, in a [`WriteBatch`](crate::WriteBatch).
#[derive(Debug, Clone)]
pub(crate) enum SideOp {
    Put(SideKey, Vec<u8>),
    Remove(SideKey),
    ClearScope(SideTable, String),
    /// Stored under the scope's next sequence number (8 bytes, big-endian; from 1).
    Append(SideTable, String, Vec<u8>),
}

impl SideOp {
    pub(crate) fn table_and_scope(&self) -> (SideTable, &str) {
        match self {
            SideOp::Put(k, _) | SideOp::Remove(k) => (k.table, &k.scope),
            SideOp::ClearScope(t, s) | SideOp::Append(t, s, _) => (*t, s),
        }
    }
}

/// The key an appended entry got: its sequence number, big-endian.
pub fn sequence_key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

/// The sequence number of an appended entry's key; `None` if it is not 8 bytes.
pub fn sequence_of(key: &[u8]) -> Option<u64> {
    key.try_into().ok().map(u64::from_be_bytes)
}

pub(crate) type SideReadTable = redb::ReadOnlyTable<(&'static str, &'static [u8]), &'static [u8]>;

/// The side tables of a read transaction, by name (plain and keyed by object apart, so a
/// lookup by [`SideTable`] allocates nothing).
#[derive(Default)]
pub(crate) struct SideTables {
    plain: HashMap<String, SideReadTable>,
    by_object: HashMap<String, SideReadTable>,
}

impl SideTables {
    /// Every side table there is in `txn`'s view (one not yet written is absent, and reads
    /// as empty).
    pub(crate) fn open(txn: &redb::ReadTransaction) -> Result<SideTables, StorageFailure> {
        let names: Vec<String> = txn
            .list_tables()
            .storage()?
            .map(|t| t.name().to_owned())
            .collect();
        let mut out = SideTables::default();
        for name in names {
            let (map, bare) = if let Some(bare) = name.strip_prefix(PLAIN_PREFIX) {
                (&mut out.plain, bare)
            } else if let Some(bare) = name.strip_prefix(BY_OBJECT_PREFIX) {
                (&mut out.by_object, bare)
            } else {
                continue;
            };
            let table = txn.open_table(SideDef::new(&name)).storage()?;
            map.insert(bare.to_owned(), table);
        }
        Ok(out)
    }

    pub(crate) fn get(&self, table: SideTable) -> Option<&SideReadTable> {
        if table.by_object {
            self.by_object.get(table.name)
        } else {
            self.plain.get(table.name)
        }
    }
}

/// The last entry of `scope` in table `t`, by key.
pub(crate) fn last_in_scope(
    t: &impl ReadableTable<(&'static str, &'static [u8]), &'static [u8]>,
    scope: &str,
) -> Result<Option<KeyValue>, StorageFailure> {
    let (low, high) = scope_bounds(scope);
    let last = t
        .range::<(&str, &[u8])>((low.as_str(), &[][..])..(high.as_str(), &[][..]))
        .storage()?
        .next_back()
        .transpose()
        .storage()?;
    Ok(last.map(|(k, v)| (k.value().1.to_vec(), v.value().to_vec())))
}

/// Applies `ops` in order in `txn`; the sequence numbers appends get go to `appended`.
pub(crate) fn apply(
    txn: &redb::WriteTransaction,
    ops: &[SideOp],
    appended: &mut Vec<u64>,
) -> Result<(), WriteError> {
    let mut open: HashMap<SideTable, WriteTable<'_>> = HashMap::new();
    for op in ops {
        let (table, scope) = op.table_and_scope();
        let t = match open.entry(table) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(open_held(txn, SideDef::new(&table.table_name())).storage()?)
            }
        };
        match op {
            SideOp::Put(k, value) => {
                t.insert((k.scope.as_str(), k.key.as_slice()), value.as_slice())
                    .storage()?;
            }
            SideOp::Remove(k) => {
                t.remove((k.scope.as_str(), k.key.as_slice())).storage()?;
            }
            SideOp::ClearScope(_, _) => {
                let (low, high) = scope_bounds(scope);
                t.retain_in::<(&str, &[u8]), _>(
                    (low.as_str(), &[][..])..(high.as_str(), &[][..]),
                    |_, _| false,
                )
                .storage()?;
            }
            SideOp::Append(_, _, value) => {
                let last = last_in_scope(&**t, scope)?.map(|(k, _)| sequence_of(&k));
                let next = match last {
                    None => 1,
                    Some(Some(seq)) => seq + 1,
                    Some(None) => {
                        return Err(WriteError::NotASequence {
                            table: table.name(),
                            scope: scope.to_owned(),
                        });
                    }
                };
                t.insert((scope, &sequence_key(next)[..]), value.as_slice())
                    .storage()?;
                appended.push(next);
            }
        }
    }
    Ok(())
}

/// Drops, from every side table keyed by object, the entries of `objects`.
pub(crate) fn drop_with_objects(
    txn: &redb::WriteTransaction,
    objects: &[[u8; 32]],
) -> Result<(), StorageFailure> {
    let names: Vec<String> = txn
        .list_tables()
        .storage()?
        .map(|t| t.name().to_owned())
        .filter(|n| is_by_object(n))
        .collect();
    for name in names {
        let mut t = open_held(txn, SideDef::new(&name)).storage()?;
        for id in objects {
            t.remove(("", &id[..])).storage()?;
        }
    }
    Ok(())
}

/// Removes `entries`.
pub(crate) fn drop_entries(
    txn: &redb::WriteTransaction,
    entries: &[SideKey],
) -> Result<(), StorageFailure> {
    for entry in entries {
        let mut t = open_held(txn, SideDef::new(&entry.table.table_name())).storage()?;
        t.remove((entry.scope.as_str(), entry.key.as_slice()))
            .storage()?;
    }
    Ok(())
}

/// Sets each entry to its new value, or removes it (`None`).
pub(crate) fn rewrite_entries(
    txn: &redb::WriteTransaction,
    entries: &[Rewrite],
) -> Result<(), StorageFailure> {
    for (entry, value) in entries {
        let mut t = open_held(txn, SideDef::new(&entry.table.table_name())).storage()?;
        let key = (entry.scope.as_str(), entry.key.as_slice());
        match value {
            Some(v) => {
                t.insert(key, v.as_slice()).storage()?;
            }
            None => {
                t.remove(key).storage()?;
            }
        }
    }
    Ok(())
}
