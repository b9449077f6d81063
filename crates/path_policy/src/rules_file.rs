//! Reading a pattern file (`.gitignore`, `.ignore`, `.cairndeny`, excludes) that may be
//! hostile: never a FIFO or a device, never more than [`MAX_RULES_FILE`] bytes.

use std::io::Read;
use std::os::fd::AsFd;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// The largest pattern file read, in bytes (git ignores larger ones too).
pub const MAX_RULES_FILE: u64 = 100 << 20;

/// What a pattern file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RulesFile {
    /// There is none.
    Missing,
    /// Its bytes.
    Read(Vec<u8>),
    /// It is there but was not read: its patterns do not apply.
    Refused(RulesRefusal),
}

/// Why a pattern file was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RulesRefusal {
    /// A FIFO, socket, device or directory; or a symlink where links are not followed.
    NotRegular(&'static str),
    /// Over [`MAX_RULES_FILE`] bytes.
    TooLarge(u64),
}

impl RulesRefusal {
    /// The reason as a short kebab-case word, for reports.
    pub fn reason(self) -> &'static str {
        match self {
            RulesRefusal::NotRegular(_) => "ignore-file-not-regular",
            RulesRefusal::TooLarge(_) => "ignore-file-too-large",
        }
    }
}

impl std::fmt::Display for RulesRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RulesRefusal::NotRegular(kind) => write!(f, "not a regular file ({kind})"),
            RulesRefusal::TooLarge(size) => {
                write!(f, "larger than {MAX_RULES_FILE} bytes ({size} bytes)")
            }
        }
    }
}

fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        _ => "special file",
    }
}

/// Reads the pattern file at `path`, following a symlink in its last component only if
/// `follow`. Nothing but a regular file is ever opened (a FIFO would block, a device could
/// act on being opened): it is stat'ed first, opened non-blocking, and its descriptor
/// checked to be that same file; at most [`MAX_RULES_FILE`] bytes are read.
pub fn read_rules_file(path: &Path, follow: bool) -> std::io::Result<RulesFile> {
    read_rules_file_at(rustix::fs::CWD, path, follow)
}

/// [`read_rules_file`] of `path` taken from the directory `dir` (a relative `path` is
/// resolved there): reads a pattern file whose absolute path is longer than the system
/// takes, through a handle of its directory.
pub fn read_rules_file_at(dir: impl AsFd, path: &Path, follow: bool) -> std::io::Result<RulesFile> {
    let dir = dir.as_fd();
    let first = rustix::fs::statat(
        dir,
        path,
        if follow {
            AtFlags::empty()
        } else {
            AtFlags::SYMLINK_NOFOLLOW
        },
    );
    let first = match first {
        Ok(st) => st,
        Err(Errno::NOENT | Errno::NOTDIR) => return Ok(RulesFile::Missing),
        Err(e) => return Err(e.into()),
    };
    let kind = FileType::from_raw_mode(first.st_mode);
    if kind != FileType::RegularFile {
        return Ok(RulesFile::Refused(RulesRefusal::NotRegular(kind_name(
            kind,
        ))));
    }
    let mut flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let fd = match rustix::fs::openat(dir, path, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT | Errno::NOTDIR) => return Ok(RulesFile::Missing),
        // Replaced by a symlink since the stat.
        Err(Errno::LOOP) if !follow => {
            return Ok(RulesFile::Refused(RulesRefusal::NotRegular("symlink")));
        }
        Err(e) => return Err(e.into()),
    };
    // The file opened may not be the one stat'ed: judge what the descriptor holds.
    let st = rustix::fs::fstat(&fd)?;
    let kind = FileType::from_raw_mode(st.st_mode);
    if kind != FileType::RegularFile {
        return Ok(RulesFile::Refused(RulesRefusal::NotRegular(kind_name(
            kind,
        ))));
    }
    let size = u64::try_from(st.st_size).unwrap_or(0);
    if size > MAX_RULES_FILE {
        return Ok(RulesFile::Refused(RulesRefusal::TooLarge(size)));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    // One byte past the limit tells a file that grew beyond it.
    std::fs::File::from(fd)
        .take(MAX_RULES_FILE + 1)
        .read_to_end(&mut bytes)?;
    let read = bytes.len() as u64;
    if read > MAX_RULES_FILE {
        return Ok(RulesFile::Refused(RulesRefusal::TooLarge(read)));
    }
    Ok(RulesFile::Read(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rules");
        std::fs::write(&file, "*.log\n").unwrap();
        assert_eq!(
            read_rules_file(&file, false).unwrap(),
            RulesFile::Read(b"*.log\n".to_vec())
        );
        assert_eq!(
            read_rules_file(&dir.path().join("none"), false).unwrap(),
            RulesFile::Missing
        );
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(
            read_rules_file(&link, false).unwrap(),
            RulesFile::Refused(RulesRefusal::NotRegular("symlink"))
        );
        assert_eq!(
            read_rules_file(&link, true).unwrap(),
            RulesFile::Read(b"*.log\n".to_vec())
        );
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert_eq!(
            read_rules_file(&zero, true).unwrap(),
            RulesFile::Refused(RulesRefusal::NotRegular("character device"))
        );
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        assert_eq!(
            read_rules_file(&fifo, true).unwrap(),
            RulesFile::Refused(RulesRefusal::NotRegular("fifo"))
        );
        let large = dir.path().join("large");
        std::fs::write(&large, "*.log\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&large)
            .unwrap()
            .set_len(MAX_RULES_FILE + 1)
            .unwrap();
        assert_eq!(
            read_rules_file(&large, false).unwrap(),
            RulesFile::Refused(RulesRefusal::TooLarge(MAX_RULES_FILE + 1))
        );
        assert_eq!(
            read_rules_file(dir.path(), true).unwrap(),
            RulesFile::Refused(RulesRefusal::NotRegular("directory"))
        );
    }
}
