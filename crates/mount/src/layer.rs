//! A mount's layer on disk: `upper/N` holds the content of every file written since the
//! mount's base, and `journal` the names: one JSON record per line, appended as the
//! change happens and replayed on attach, which then writes it again as the difference from
//! its base alone (so it grows with what differs, not with the history). A line cut short by
//! a crash is the end of the journal (the change it described had not been answered yet).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use camino::{Utf8Path, Utf8PathBuf};
use cas::TreeId;
use serde::{Deserialize, Serialize};

use crate::path::MountPath;

/// One change of names; paths are from the mount's root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Record {
    /// The snapshot tree everything else applies to (always the first record).
    Base { tree: Option<TreeId> },
    /// A file whose content is `upper/N`.
    File {
        path: MountPath,
        upper: u64,
        perm: u16,
    },
    /// A new directory.
    Dir { path: MountPath, perm: u16 },
    /// A directory whose content is a stored tree (one moved from elsewhere; written by
    /// compaction).
    Tree {
        path: MountPath,
        tree: TreeId,
        size: u64,
        perm: u16,
        /// A graft's top, moved (see [`crate::Graft`]): never captured where it is now.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        graft: bool,
    },
    /// A file whose content is a stored blob (written by compaction).
    Blob {
        path: MountPath,
        blob: cas::BlobId,
        size: u64,
        perm: u16,
    },
    /// A new symlink.
    Link { path: MountPath, target: Vec<u8> },
    /// A name removed.
    Remove { path: MountPath },
    /// A name moved (over whatever was at `to`).
    Rename { from: MountPath, to: MountPath },
    /// Permission bits changed.
    Perm { path: MountPath, perm: u16 },
    /// A FIFO, socket or device node (`mode`: its type and permission bits).
    Special {
        path: MountPath,
        mode: u32,
        rdev: u32,
    },
    /// Another name for the file at `to` (a hard link).
    HardLink { path: MountPath, to: MountPath },
    /// Owner and group changed.
    Owner { path: MountPath, uid: u32, gid: u32 },
    /// Access and modification times set.
    Times {
        path: MountPath,
        atime: Stamp,
        mtime: Stamp,
    },
}

/// A point in time as a journal keeps it: seconds from the epoch (before it: negative) and
/// nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stamp {
    pub secs: i64,
    pub nanos: u32,
}

impl From<SystemTime> for Stamp {
    fn from(t: SystemTime) -> Stamp {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Stamp {
                secs: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                nanos: d.subsec_nanos(),
            },
            Err(e) => {
                // `before` is how far before the epoch: whole seconds down, nanoseconds up.
                let before = e.duration();
                let mut secs = -i64::try_from(before.as_secs()).unwrap_or(i64::MAX);
                let mut nanos = before.subsec_nanos();
                if nanos > 0 {
                    secs -= 1;
                    nanos = 1_000_000_000 - nanos;
                }
                Stamp { secs, nanos }
            }
        }
    }
}

impl From<Stamp> for SystemTime {
    fn from(s: Stamp) -> SystemTime {
        let nanos = Duration::from_nanos(u64::from(s.nanos.min(999_999_999)));
        if s.secs >= 0 {
            UNIX_EPOCH + Duration::from_secs(s.secs.unsigned_abs()) + nanos
        } else {
            UNIX_EPOCH - Duration::from_secs(s.secs.unsigned_abs()) + nanos
        }
    }
}

/// The layer folder of one mount.
pub(crate) struct Layer {
    dir: Utf8PathBuf,
    journal: File,
}

impl Layer {
    /// Opens (creating) the layer at `dir`, giving back its records.
    pub(crate) fn open(dir: &Utf8Path) -> std::io::Result<(Layer, Vec<Record>)> {
        std::fs::create_dir_all(dir.join("upper"))?;
        let path = dir.join("journal");
        let (records, whole) = match File::open(&path) {
            Ok(f) => read_records(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), true),
            Err(e) => return Err(e),
        };
        let journal = File::options().create(true).append(true).open(&path)?;
        let mut layer = Layer {
            dir: dir.to_owned(),
            journal,
        };
        if !whole {
            // Appending after a cut line would join the next record to it.
            layer.rewrite(&records)?;
        }
        Ok((layer, records))
    }

    /// Where upper file `n` lives.
    pub(crate) fn upper(&self, n: u64) -> Utf8PathBuf {
        self.dir.join("upper").join(n.to_string())
    }

    /// Appends `record` (not synced: [`Layer::sync`] on `fsync`).
    pub(crate) fn append(&mut self, record: &Record) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.journal.write_all(&line)
    }

    /// Makes every record so far durable.
    pub(crate) fn sync(&self) -> std::io::Result<()> {
        self.journal.sync_data()
    }

    /// Replaces the journal with `records`, atomically.
    pub(crate) fn rewrite(&mut self, records: &[Record]) -> std::io::Result<()> {
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
        for r in records {
            serde_json::to_writer(&mut tmp, r).map_err(std::io::Error::other)?;
            tmp.write_all(b"\n")?;
        }
        tmp.as_file().sync_data()?;
        let path = self.dir.join("journal");
        tmp.persist(&path).map_err(|e| e.error)?;
        File::open(&self.dir)?.sync_all()?;
        self.journal = File::options().append(true).open(&path)?;
        Ok(())
    }

    /// Upper files no record names (left by a crash between writing one and its record).
    pub(crate) fn remove_unnamed(&self, named: &std::collections::HashSet<u64>) {
        let Ok(entries) = std::fs::read_dir(self.dir.join("upper")) else {
            return;
        };
        for e in entries.flatten() {
            let n = e.file_name().to_str().and_then(|s| s.parse::<u64>().ok());
            if n.is_some_and(|n| !named.contains(&n)) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// The records, and whether every line was one.
fn read_records(f: File) -> (Vec<Record>, bool) {
    let mut out = Vec::new();
    for line in BufReader::new(f).split(b'\n') {
        let Ok(line) = line else {
            return (out, false);
        };
        match serde_json::from_slice(&line) {
            Ok(r) => out.push(r),
            // A record cut short by a crash: nothing after it was answered.
            Err(_) => return (out, false),
        }
    }
    (out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_cut_short_by_a_crash_ends_the_journal_and_later_records_still_read() {
        let tmp = tempfile::tempdir().expect("a temporary folder");
        let dir = Utf8Path::from_path(tmp.path()).expect("utf-8");
        let first = Record::Base { tree: None };
        let second = Record::Dir {
            path: MountPath::from(b"a".to_vec()),
            perm: 0o755,
        };
        let mut text = serde_json::to_vec(&first).expect("encodes");
        text.push(b'\n');
        text.extend(serde_json::to_vec(&second).expect("encodes"));
        text.push(b'\n');
        text.extend_from_slice(br#"{"file":{"path":[98],"up"#);
        std::fs::write(dir.join("journal"), text).expect("written");

        let (mut layer, records) = Layer::open(dir).expect("opens");
        assert_eq!(records, vec![first.clone(), second.clone()]);
        let third = Record::Remove {
            path: MountPath::from(b"a".to_vec()),
        };
        layer.append(&third).expect("appended");
        drop(layer);
        let (_, records) = Layer::open(dir).expect("opens again");
        assert_eq!(records, vec![first, second, third]);
    }

    #[test]
    fn stamps_keep_times_before_and_after_the_epoch_to_the_nanosecond() {
        for (secs, nanos) in [
            (0, 0),
            (1, 5),
            (-1, 999_999_999),
            (-1, 1),
            (4_294_967_296, 7),
        ] {
            let stamp = Stamp { secs, nanos };
            let time = SystemTime::from(stamp);
            assert_eq!(Stamp::from(time), stamp, "{secs} s {nanos} ns");
        }
        let before = UNIX_EPOCH - Duration::new(2, 250_000_000);
        assert_eq!(
            Stamp::from(before),
            Stamp {
                secs: -3,
                nanos: 750_000_000
            }
        );
    }
}
