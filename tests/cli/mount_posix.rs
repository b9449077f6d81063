//! What a directory keeps, a mount keeps in its layer: FIFOs, sockets and devices, hard
//! links, owners and groups, access and modification times. They survive an unmount, a
//! killed server and the journal's compaction; a snapshot holds what a tree can (each name
//! of a hard link as a file) and reports the rest in `skipped`, as a capture on disk does.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use camino::{Utf8Path, Utf8PathBuf};

use crate::mount_commands::{Mounts, kill_mount_server, mount, onboard, project, wait_unmounted};
use crate::mount_scope::skipped;
use crate::support::{Env, stdout};

const NOBODY: u32 = 65534;
const ATIME: u64 = 1_000_000_000;
const MTIME: u64 = 1_500_000_000;

fn at(secs: u64, nanos: u32) -> SystemTime {
    UNIX_EPOCH + Duration::new(secs, nanos)
}

/// The same changes made in `dir`, a mount or a checkout.
fn change(dir: &Utf8Path) {
    let made = Command::new("mkfifo")
        .arg(dir.join("pipe").as_str())
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo in {dir}");
    std::fs::hard_link(dir.join("README"), dir.join("hard")).unwrap();
    std::fs::write(dir.join("hard"), "through the other name\n").unwrap();
    std::os::unix::fs::chown(dir.join("src/lib.rs"), Some(NOBODY), Some(NOBODY)).unwrap();
    let file = std::fs::File::options()
        .write(true)
        .open(dir.join("run.sh"))
        .unwrap();
    file.set_times(
        std::fs::FileTimes::new()
            .set_accessed(at(ATIME, 250))
            .set_modified(at(MTIME, 750)),
    )
    .unwrap();
}

/// What [`change`] did is there, as it left it.
fn assert_kept(m: &Utf8Path, when: &str) {
    let pipe = std::fs::symlink_metadata(m.join("pipe")).unwrap();
    assert!(pipe.file_type().is_fifo(), "{when}: pipe is a FIFO");
    let (readme, hard) = (
        std::fs::metadata(m.join("README")).unwrap(),
        std::fs::metadata(m.join("hard")).unwrap(),
    );
    assert_eq!(readme.ino(), hard.ino(), "{when}: one file, two names");
    assert_eq!(readme.nlink(), 2, "{when}");
    assert_eq!(
        std::fs::read_to_string(m.join("README")).unwrap(),
        "through the other name\n",
        "{when}"
    );
    let lib = std::fs::metadata(m.join("src/lib.rs")).unwrap();
    assert_eq!((lib.uid(), lib.gid()), (NOBODY, NOBODY), "{when}: owner");
    let run = std::fs::metadata(m.join("run.sh")).unwrap();
    assert_eq!(run.accessed().unwrap(), at(ATIME, 250), "{when}: atime");
    assert_eq!(run.modified().unwrap(), at(MTIME, 750), "{when}: mtime");
    let src = std::fs::metadata(m.join("src")).unwrap();
    assert_eq!(src.nlink(), 2, "{when}: a directory with no subdirectory");
    let subdirs = std::fs::read_dir(m)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_dir())
        .count() as u64;
    assert!(subdirs >= 1);
    let root = std::fs::metadata(m).unwrap();
    assert_eq!(root.nlink(), 2 + subdirs, "{when}: the root's links");
}

/// A mount of a small project's snapshot (its id, where, its guard), when this runs as
/// root: these tests give files to other users and act as them.
fn mounted_as_root(env: &Env) -> Option<(String, Utf8PathBuf, Mounts<'_>)> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: giving files to other users takes root");
        return None;
    }
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(env, &proj);
    let m = env.path().join("m");
    let guard = mount(env, &base, &m);
    Some((base, m, guard))
}

#[test]
fn fifos_hard_links_owners_and_times_stay_in_the_layer_and_snapshots_report_them_as_on_disk() {
    let env = Env::new();
    let Some((base, m, _guard)) = mounted_as_root(&env) else {
        return;
    };
    change(&m);
    assert_kept(&m, "as written");

    // A snapshot holds each name of the hard link and reports the FIFO, as on disk.
    let (code, snap) = env.json(&["snapshot", m.as_str()]);
    assert_eq!(code, 0, "{snap}");
    let id = snap["snapshot"].as_str().unwrap().to_owned();
    for name in ["README", "hard"] {
        let shown = env.cairn(&["show", &format!("{id}:{name}")]);
        assert_eq!(stdout(&shown), "through the other name\n", "{name}");
    }
    let checkout = env.path().join("checkout");
    let (code, out) = env.json(&["checkout", &base, checkout.as_str()]);
    assert_eq!(code, 0, "{out}");
    change(&checkout);
    let (code, on_disk) = env.json(&["snapshot", checkout.as_str()]);
    assert_eq!(code, 0, "{on_disk}");
    assert_eq!(skipped(&snap), skipped(&on_disk));
    assert_eq!(
        skipped(&snap),
        vec![(
            "pipe".to_owned(),
            "fifo (not a file, directory or symlink)".to_owned()
        )]
    );
    assert_eq!(snap["tree"], on_disk["tree"], "{snap}\n{on_disk}");

    // A killed server: the journal as written is replayed.
    kill_mount_server(&env);
    wait_unmounted(&m);
    let (code, out) = env.json(&["mount", m.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_kept(&m, "after kill -9");

    // Attached again from the journal compacted on the last attach.
    let (code, out) = env.json(&["unmount", m.as_str()]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = env.json(&["mount", m.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_kept(&m, "after a compaction");

    // Materialized: the directory left behind keeps them all.
    let copy = env.path().join("copy");
    let _copy = mount(&env, &base, &copy);
    change(&copy);
    let (code, out) = env.json(&["unmount", copy.as_str(), "--materialize"]);
    assert_eq!(code, 0, "{out}");
    assert!(!crate::mount_commands::is_mounted(&copy));
    assert_kept(&copy, "materialized");

    // One name of the hard link goes: the other keeps the file, with one link.
    std::fs::remove_file(m.join("README")).unwrap();
    assert_eq!(std::fs::metadata(m.join("hard")).unwrap().nlink(), 1);
    let (code, out) = env.json(&["unmount", m.as_str()]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = env.json(&["mount", m.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert!(!m.join("README").exists());
    assert_eq!(
        std::fs::read_to_string(m.join("hard")).unwrap(),
        "through the other name\n"
    );
}

/// Made in a directory with the set-group-ID bit, a node takes the directory's group, and
/// a new directory the bit, as on disk; another user reaches a mount served by root as
/// the modes allow.
#[test]
fn a_setgid_directory_passes_its_group_down_and_other_users_are_checked_by_mode() {
    let env = Env::new();
    let Some((_, m, _guard)) = mounted_as_root(&env) else {
        return;
    };
    let shared = m.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::os::unix::fs::chown(&shared, None, Some(NOBODY)).unwrap();
    std::fs::set_permissions(
        &shared,
        std::os::unix::fs::PermissionsExt::from_mode(0o2777),
    )
    .unwrap();
    std::fs::write(shared.join("f"), "x").unwrap();
    std::fs::create_dir(shared.join("d")).unwrap();
    assert_eq!(std::fs::metadata(shared.join("f")).unwrap().gid(), NOBODY);
    let d = std::fs::metadata(shared.join("d")).unwrap();
    assert_eq!(d.gid(), NOBODY);
    assert_eq!(
        d.mode() & 0o2000,
        0o2000,
        "the bit goes down to a directory"
    );

    // `nobody` may write into the shared directory, not into the root's own.
    let as_nobody = |script: &str| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args(["sh", "-c", script])
            .current_dir(m.as_std_path())
            .output()
            .unwrap()
    };
    let wrote = as_nobody("echo hi > shared/by-nobody");
    assert!(wrote.status.success(), "{wrote:?}");
    let by = std::fs::metadata(shared.join("by-nobody")).unwrap();
    assert_eq!((by.uid(), by.gid()), (NOBODY, NOBODY));
    let refused = as_nobody("echo hi > not-yours");
    assert!(!refused.status.success(), "{refused:?}");
    assert!(!m.join("not-yours").exists());
    let read = as_nobody("cat README");
    assert_eq!(String::from_utf8_lossy(&read.stdout), "hello\n", "{read:?}");
}

/// A layer attached read-only (`mount DIR --read-only` after changes) shows every change it
/// holds, and keeps them for the next read-write attach: its replay once refused to make
/// directories, links and the rest (EROFS), and the journal written again without them lost
/// them for good.
#[test]
fn a_layer_attached_read_only_keeps_every_change() {
    let env = Env::new();
    let Some((_, m, _guard)) = mounted_as_root(&env) else {
        return;
    };
    change(&m);
    std::fs::create_dir(m.join("made")).unwrap();
    std::os::unix::fs::symlink("README", m.join("made/to-readme")).unwrap();
    let (code, out) = env.json(&["unmount", m.as_str()]);
    assert_eq!(code, 0, "{out}");

    let (code, out) = env.json(&["mount", m.as_str(), "--read-only"]);
    assert_eq!(code, 0, "{out}");
    assert_kept(&m, "attached read-only");
    assert!(m.join("made").is_dir());
    assert_eq!(
        std::fs::read_link(m.join("made/to-readme")).unwrap(),
        Path::new("README")
    );
    let (code, out) = env.json(&["unmount", m.as_str()]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = env.json(&["mount", m.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_kept(&m, "attached again");
    assert!(m.join("made/to-readme").symlink_metadata().is_ok());
}

/// A mount under a folder ~3,000 bytes long serves, takes and materializes a file ~2,000
/// bytes deep, whose absolute path no call by path takes (`unmount --materialize` copied
/// by path and failed on it).
#[test]
fn a_mount_under_a_deep_folder_materializes_paths_past_path_max() {
    use crate::support::{deep_folder, deep_path, read_beneath, write_beneath};
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let rel = deep_path(2000);
    write_beneath(&proj, &rel, b"deep bytes\n");
    let base = onboard(&env, &proj);
    let m = deep_folder(&env.path().join("a"), 3000, 'm');
    std::fs::remove_dir(&m).unwrap();
    let _guard = mount(&env, &base, &m);
    assert!(m.as_str().len() + 1 + rel.len() > 4096, "beyond PATH_MAX");
    assert_eq!(read_beneath(&m, &rel).unwrap(), b"deep bytes\n");
    let made = rel.replace("file.txt", "made.txt");
    write_beneath(&m, &made, b"made in the mount\n");

    let (code, out) = env.json(&["unmount", m.as_str(), "--materialize"]);
    assert_eq!(code, 0, "{out}");
    assert!(!crate::mount_commands::is_mounted(&m));
    assert_eq!(read_beneath(&m, &rel).unwrap(), b"deep bytes\n");
    assert_eq!(read_beneath(&m, &made).unwrap(), b"made in the mount\n");
    let (code, out) = env.json(&["status", m.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["added"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(out["added"][0]["path"], made.as_str(), "{out}");
}
