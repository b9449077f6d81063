//! What a sandbox grant may name. A grant is opened once, without following a symlink
//! anywhere on its path, and that handle is what is checked and what Landlock is given, so
//! nothing swapped in between a check and its use is ever granted. Pseudo file systems
//! (`/proc`, `/sys`, `/dev`, cgroups, ...) are never granted, found by what the handle is
//! (`statfs` magic, the mount table), not only by name; system directories and the user's
//! credentials are [`sensitive`]: a person grants them only by naming them.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// A path that can never be granted, or that could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GrantError {
    /// Not an absolute path of plain names.
    #[error("{}: a grant needs an absolute path without `.` or `..`", path.display())]
    NotAbsolute {
        /// The path.
        path: PathBuf,
    },
    /// A symlink on the way (the path itself, or a directory above it).
    #[error("{}: a symlink is on its way, which a grant never follows; grant the path it resolves to", path.display())]
    Symlink {
        /// The path.
        path: PathBuf,
    },
    /// The path does not exist.
    #[error("{}: no such file or directory", path.display())]
    NotFound {
        /// The path.
        path: PathBuf,
    },
    /// On, or holding, a pseudo file system.
    #[error("{}: {what}, which is never granted", path.display())]
    Pseudo {
        /// The path.
        path: PathBuf,
        /// What it is, e.g. `on a pseudo file system (proc)`.
        what: String,
    },
    /// The file system failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// A grant held open: the handle Landlock is given, and the path it was opened by.
#[derive(Debug)]
pub struct OpenGrant {
    /// `O_PATH` handle of the granted file or directory.
    pub fd: OwnedFd,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// The path it was opened by.
    pub path: PathBuf,
}

/// Pseudo file systems, by `statfs` magic (linux/magic.h).
const PSEUDO_MAGIC: &[(u32, &str)] = &[
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x1cd1, "devpts"),
    (0x0027_e0eb, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x7363_6673, "securityfs"),
    (0xcafe_4a11, "bpf"),
    (0x6165_676c, "pstore"),
    (0x6265_6570, "configfs"),
    (0x6573_5543, "fusectl"),
    (0x1980_0202, "mqueue"),
    (0x9584_58f6, "hugetlbfs"),
    (0xde5e_81e4, "efivarfs"),
    (0x4249_4e4d, "binfmt_misc"),
    (0x0187, "autofs"),
    (0xf97c_ff8c, "selinuxfs"),
    (0x6e73_6673, "nsfs"),
    (0x6759_6969, "rpc_pipefs"),
];
/// tmpfs and ramfs: devtmpfs is one of them, told apart only by the mount table.
const TMPFS_MAGIC: u32 = 0x0102_1994;
const RAMFS_MAGIC: u32 = 0x8584_58f6;

/// Where the kernel mounts its pseudo file systems: never granted, nor anything beneath.
const PSEUDO_ROOTS: &[&str] = &["/proc", "/sys", "/dev"];

/// The pseudo file system a `statfs` magic and device name, if it is one.
fn pseudo_of(magic: u32, dev: u64) -> Option<&'static str> {
    if let Some((_, name)) = PSEUDO_MAGIC.iter().find(|(m, _)| *m == magic) {
        return Some(name);
    }
    ((magic == TMPFS_MAGIC || magic == RAMFS_MAGIC)
        && mount_type(dev).as_deref() == Some("devtmpfs"))
    .then_some("devtmpfs")
}

/// The name of the pseudo file system mounted at `path` (whose device is `dev`), if it is
/// one.
pub fn pseudo_filesystem(path: &Path, dev: u64) -> Option<&'static str> {
    let st = rustix::fs::statfs(path).ok()?;
    // The field's type differs between architectures; the magic is its low 32 bits.
    #[allow(clippy::unnecessary_cast)]
    pseudo_of(st.f_type as u32, dev)
}

/// The name of the pseudo file system the handle `fd` is on, if it is one.
pub fn pseudo_filesystem_of(fd: impl AsFd) -> Option<&'static str> {
    let st = rustix::fs::fstatfs(&fd).ok()?;
    let dev = rustix::fs::fstat(&fd).ok()?.st_dev;
    #[allow(clippy::unnecessary_cast)]
    pseudo_of(st.f_type as u32, dev)
}

/// `/proc/self/mountinfo`, if it can be read.
fn mount_table() -> Option<String> {
    use std::io::Read;
    let mut table = Vec::new();
    std::fs::File::open("/proc/self/mountinfo")
        .ok()?
        .take(16 << 20)
        .read_to_end(&mut table)
        .ok()?;
    Some(String::from_utf8_lossy(&table).into_owned())
}

/// The mount table: (mount point, file-system type).
fn mounts() -> Vec<(PathBuf, String)> {
    let table = mount_table().unwrap_or_default();
    table
        .lines()
        .filter_map(|line| {
            let point = line.split(' ').nth(4)?;
            let fs_type = line.split(" - ").nth(1)?.split(' ').next()?;
            Some((unescape(point), fs_type.to_owned()))
        })
        .collect()
}

/// A mount point as mountinfo writes it (space, tab, newline and backslash in octal).
fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|o| bytes[i] == b'\\' && o.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(o) => {
                out.push(o.iter().fold(0u8, |n, b| n.wrapping_mul(8) + (b - b'0')));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(OsStr::from_bytes(&out))
}

/// The file-system type of the mount of device `dev`, from the mount table.
fn mount_type(dev: u64) -> Option<String> {
    let wanted = format!("{}:{}", rustix::fs::major(dev), rustix::fs::minor(dev));
    mount_table()?.lines().find_map(|line| {
        let mut fields = line.split(' ');
        if fields.nth(2)? != wanted {
            return None;
        }
        let mut rest = line.split(" - ").nth(1)?.split(' ');
        rest.next().map(str::to_owned)
    })
}

fn is_pseudo_type(fs_type: &str) -> bool {
    fs_type == "devtmpfs" || PSEUDO_MAGIC.iter().any(|(_, name)| *name == fs_type)
}

/// True if `path` is absolute and made of plain names only.
fn plain_absolute(path: &Path) -> bool {
    path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        && !path.as_os_str().as_bytes().windows(2).any(|w| w == b"//")
}

/// Opens `path` as an `O_PATH` handle, following no symlink on the way: `openat2` with
/// `RESOLVE_NO_SYMLINKS`, else one `openat(O_NOFOLLOW)` per component.
fn open_no_symlinks(path: &Path) -> Result<OwnedFd, Errno> {
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    match rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        flags,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Err(Errno::NOSYS | Errno::PERM) => {}
        other => return other,
    }
    let mut dir = rustix::fs::open("/", flags | OFlags::DIRECTORY, Mode::empty())?;
    for name in path.components().filter_map(|c| match c {
        Component::Normal(n) => Some(n),
        _ => None,
    }) {
        let next = rustix::fs::openat(&dir, name, flags | OFlags::NOFOLLOW, Mode::empty())?;
        // O_PATH | O_NOFOLLOW opens a symlink itself rather than failing.
        if FileType::from_raw_mode(rustix::fs::fstat(&next)?.st_mode) == FileType::Symlink {
            return Err(Errno::LOOP);
        }
        dir = next;
    }
    Ok(dir)
}

/// Opens the grant `path` once, refusing a symlink anywhere on it and a pseudo file system
/// it is on, lies under (by name) or holds (a mount beneath it). The handle is what a rule
/// must be given: the path may point elsewhere a moment later.
pub fn open_grant(path: &Path) -> Result<OpenGrant, GrantError> {
    if !plain_absolute(path) {
        return Err(GrantError::NotAbsolute {
            path: path.to_owned(),
        });
    }
    let pseudo = |what: String| {
        Err(GrantError::Pseudo {
            path: path.to_owned(),
            what,
        })
    };
    if let Some(root) = PSEUDO_ROOTS.iter().find(|r| path.starts_with(r)) {
        return pseudo(format!("under {root}"));
    }
    let fd = open_no_symlinks(path).map_err(|e| match e {
        Errno::LOOP => GrantError::Symlink {
            path: path.to_owned(),
        },
        Errno::NOENT => GrantError::NotFound {
            path: path.to_owned(),
        },
        e => GrantError::Io {
            path: path.to_owned(),
            source: e.into(),
        },
    })?;
    if let Some(fs) = pseudo_filesystem_of(&fd) {
        return pseudo(format!("on a pseudo file system ({fs})"));
    }
    if let Some((point, fs)) = mounts()
        .into_iter()
        .find(|(point, fs)| point.starts_with(path) && is_pseudo_type(fs))
    {
        return pseudo(format!(
            "holds a pseudo file system ({fs}) mounted at {}",
            point.display()
        ));
    }
    let st = rustix::fs::fstat(&fd).map_err(|e| GrantError::Io {
        path: path.to_owned(),
        source: e.into(),
    })?;
    Ok(OpenGrant {
        is_dir: FileType::from_raw_mode(st.st_mode) == FileType::Directory,
        fd,
        path: path.to_owned(),
    })
}

/// Why a grant of a path needs a person to name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sensitive {
    /// The system directory or credentials the grant is, lies in or holds.
    pub what: PathBuf,
    /// `a system directory` or `the user's credentials`.
    pub kind: &'static str,
}

impl std::fmt::Display for Sensitive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.what.display(), self.kind)
    }
}

/// System directories: sensitive, and everything beneath them.
pub const SYSTEM_DIRS: &[&str] = &[
    "/etc", "/usr", "/bin", "/sbin", "/boot", "/lib", "/lib32", "/lib64", "/libx32", "/var",
    "/root", "/opt", "/run", "/snap", "/efi",
];

/// Directories holding every user's home: sensitive themselves, not what lies beneath.
const HOMES: &[&str] = &["/home"];

/// Credentials in a home directory, relative to it.
pub const CREDENTIALS: &[&str] = &[
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".gnupg",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".password-store",
    ".local/share/keyrings",
    ".terraform.d",
];

/// Whether granting `path` (absolute, canonical) opens a system directory or the user's
/// credentials (those of `home`, the user's home directory): the path is one, lies beneath
/// one, or holds one. Such a grant needs a person to name it.
pub fn sensitive(path: &Path, home: Option<&Path>) -> Option<Sensitive> {
    let system = SYSTEM_DIRS
        .iter()
        .map(Path::new)
        .find(|d| path.starts_with(d) || d.starts_with(path))
        .or_else(|| HOMES.iter().map(Path::new).find(|d| d.starts_with(path)));
    if let Some(d) = system {
        return Some(Sensitive {
            what: d.to_owned(),
            kind: "a system directory",
        });
    }
    let home = home?;
    if home.starts_with(path) {
        return Some(Sensitive {
            what: home.to_owned(),
            kind: "the user's home, with their credentials",
        });
    }
    CREDENTIALS
        .iter()
        .map(|c| home.join(c))
        .find(|c| path.starts_with(c) || c.starts_with(path))
        .map(|what| Sensitive {
            what,
            kind: "the user's credentials",
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pseudo_file_systems_are_never_granted_by_name_handle_or_mount() {
        for path in ["/proc", "/proc/sys/kernel", "/sys", "/dev", "/dev/shm"] {
            assert!(
                matches!(open_grant(Path::new(path)), Err(GrantError::Pseudo { .. })),
                "{path}"
            );
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        let grant = open_grant(&real).expect("a plain directory");
        assert!(grant.is_dir);
        // A symlink to /proc, or a symlink on the way, is refused as a symlink.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/proc", &link).expect("symlink");
        assert!(matches!(open_grant(&link), Err(GrantError::Symlink { .. })));
        let through = dir.path().join("through");
        std::os::unix::fs::symlink(&real, &through).expect("symlink");
        std::fs::create_dir(real.join("sub")).expect("mkdir");
        assert!(matches!(
            open_grant(&through.join("sub")),
            Err(GrantError::Symlink { .. })
        ));
        assert!(matches!(
            open_grant(&real.join("../real")),
            Err(GrantError::NotAbsolute { .. })
        ));
        assert!(matches!(
            open_grant(&dir.path().join("missing")),
            Err(GrantError::NotFound { .. })
        ));
        // What the handle is: /proc's own handle is refused whatever its name.
        let proc_fd = open_no_symlinks(Path::new("/proc/sys")).expect("/proc/sys");
        assert_eq!(pseudo_filesystem_of(&proc_fd), Some("proc"));
    }

    #[test]
    fn system_directories_and_credentials_are_sensitive_in_every_direction() {
        let home = Path::new("/home/me");
        let s = |p: &str| sensitive(Path::new(p), Some(home)).map(|s| s.what);
        assert_eq!(s("/etc"), Some("/etc".into()));
        assert_eq!(s("/usr/bin"), Some("/usr".into()));
        assert_eq!(s("/var/tmp/x"), Some("/var".into()));
        assert_eq!(s("/home"), Some("/home".into()));
        assert_eq!(s("/home/me"), Some("/home/me".into()));
        assert_eq!(s("/home/me/.ssh"), Some("/home/me/.ssh".into()));
        assert_eq!(s("/home/me/.ssh/keys"), Some("/home/me/.ssh".into()));
        assert_eq!(
            s("/home/me/.config"),
            Some("/home/me/.config/gcloud".into())
        );
        assert_eq!(s("/home/me/work/cache"), None);
        assert_eq!(s("/srv/cache"), None);
        assert_eq!(s("/tmp/x"), None);
        assert_eq!(s("/etcetera"), None);
    }

    #[test]
    fn mount_points_are_read_as_the_kernel_escapes_them() {
        assert_eq!(unescape("/a\\040b\\134c"), PathBuf::from("/a b\\c"));
        assert_eq!(unescape("/plain"), PathBuf::from("/plain"));
        assert_eq!(unescape("/end\\04"), PathBuf::from("/end\\04"));
    }
}
