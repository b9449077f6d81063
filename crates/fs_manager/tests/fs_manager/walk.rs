//! Hostile trees for the scope walk: ignore files that are not files, paths longer than a
//! tree or the system takes, pseudo file systems, files that never hold still, the file
//! system root. Every capture finishes, captures the rest, and says what it left out.

use std::collections::BTreeMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};
use fs_manager::{CaptureOptions, Skipped, WorktreeOnboardOptions};

use crate::support::*;

/// How long a capture of a small tree may take before it counts as hung.
const HUNG: Duration = Duration::from_secs(60);

/// Runs `f` on its own thread and fails if it does not finish within [`HUNG`]. Meanwhile
/// `fifos` are opened for writing, so a reader stuck on one is released and the thread
/// can end.
fn finishes<T: Send>(what: &str, fifos: &[PathBuf], f: impl FnOnce() -> T + Send) -> T {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        let done = &done;
        s.spawn(move || {
            let out = f();
            done.store(true, Ordering::SeqCst);
            let _ = tx.send(out);
        });
        match rx.recv_timeout(HUNG) {
            Ok(out) => out,
            Err(_) => {
                while !done.load(Ordering::SeqCst) {
                    for fifo in fifos {
                        let _ = std::fs::OpenOptions::new()
                            .write(true)
                            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
                            .open(fifo);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                panic!("{what} did not finish within {HUNG:?}");
            }
        }
    })
}

fn mkfifo(path: &Utf8Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path.as_std_path(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

fn reason_of(skipped: &[Skipped], path: &str) -> Option<String> {
    skipped
        .iter()
        .find(|s| s.path == path.as_bytes())
        .map(|s| s.reason.to_string())
}

fn threads(n: usize) -> CaptureOptions<'static> {
    CaptureOptions {
        threads: n,
        ..CaptureOptions::default()
    }
}

/// A FIFO where an ignore file belongs would block the walk for ever (and hold the worktree
/// meanwhile): it is reported and its rules are not read, the rest captured, by onboard,
/// by a snapshot that walks again and by one that trusts its cache.
#[test]
fn ignore_files_that_are_fifos_are_reported_not_waited_on() {
    for kind in [
        ".gitignore",
        "sub/.ignore",
        ".cairndeny",
        ".git/info/exclude",
        "sub/.git/info/exclude",
    ] {
        let env = Env::new();
        let root = env.path("w");
        write_tree(
            &root,
            &[
                ("a.txt", file("a")),
                ("sub/b.txt", file("b")),
                ("x.log", file("log")),
            ],
        );
        std::fs::create_dir_all(root.join(".git/info")).unwrap();
        let fifo = root.join(kind);
        mkfifo(&fifo);
        let fifos = [fifo.clone().into_std_path_buf()];
        let expected = [b"a.txt".to_vec(), b"sub/b.txt".to_vec(), b"x.log".to_vec()];

        let onboarded = finishes(&format!("onboard with a FIFO {kind}"), &fifos, || {
            env.worktrees
                .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        })
        .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(
            reason_of(&onboarded.skipped, kind).as_deref(),
            Some("ignore-file-not-regular"),
            "{kind}: {:?}",
            onboarded.skipped
        );
        let files = snapshot_files(&env.store, onboarded.snapshot);
        assert_eq!(
            files.keys().cloned().collect::<Vec<_>>(),
            expected,
            "{kind}"
        );

        for (step, n) in [("walked", 1), ("cached", 0)] {
            if step == "cached" {
                settle();
            }
            std::fs::write(root.join("a.txt"), step).unwrap();
            let snap = finishes(
                &format!("snapshot ({step}) with a FIFO {kind}"),
                &fifos,
                || env.worktrees.snapshot(&env.store, &root, &threads(n)),
            )
            .unwrap_or_else(|e| panic!("{kind} {step}: {e}"));
            assert_eq!(
                reason_of(&snap.skipped, kind).as_deref(),
                Some("ignore-file-not-regular"),
                "{kind} {step}: {:?}",
                snap.skipped
            );
            let files = snapshot_files(&env.store, snap.snapshot);
            assert_eq!(
                files.keys().cloned().collect::<Vec<_>>(),
                expected,
                "{kind} {step}"
            );
            assert_eq!(files[&b"a.txt".to_vec()], file(step), "{kind} {step}");
        }
    }
}

/// An ignore file that is a link to `/dev/zero` would be read until memory runs out. A
/// link in the tree is captured as a link; no rules are read through it.
#[test]
fn ignore_files_linked_to_dev_zero_are_not_read() {
    let env = Env::new();
    let root = env.path("w");
    let zero = Node::Link(b"/dev/zero".to_vec());
    write_tree(
        &root,
        &[
            ("a.txt", file("a")),
            ("x.log", file("log")),
            (".gitignore", zero.clone()),
            ("sub/.ignore", zero.clone()),
            ("sub/y.log", file("log")),
            (".cairndeny", zero.clone()),
            (".git/info/exclude", zero.clone()),
        ],
    );
    for n in [1, 0] {
        let out = finishes("onboard with ignore files linked to /dev/zero", &[], || {
            env.worktrees.onboard(
                &env.store,
                &root,
                &WorktreeOnboardOptions {
                    capture: threads(n),
                    ..WorktreeOnboardOptions::default()
                },
            )
        })
        .unwrap();
        let files = snapshot_files(&env.store, out.snapshot);
        for link in [".gitignore", "sub/.ignore", ".cairndeny"] {
            assert_eq!(files.get(link.as_bytes()), Some(&zero), "{link}");
        }
        for f in ["a.txt", "x.log", "sub/y.log"] {
            assert!(files.contains_key(f.as_bytes()), "{f} captured");
        }
        assert_eq!(
            reason_of(&out.skipped, ".git/info/exclude").as_deref(),
            Some("ignore-file-not-regular"),
            "{:?}",
            out.skipped
        );
    }
}

/// Git reads no ignore file over 100 MiB; neither does the walk (nor does it read one to
/// find out: the file is sparse).
#[test]
fn ignore_files_over_the_size_limit_are_not_read() {
    let env = Env::new();
    let root = env.path("w");
    write_tree(
        &root,
        &[
            ("a.txt", file("a")),
            ("x.log", file("log")),
            ("y.tmp", file("tmp")),
            (".gitignore", file("*.log\n")),
            (".git/info/exclude", file("*.tmp\n")),
        ],
    );
    for f in [".gitignore", ".git/info/exclude"] {
        std::fs::File::options()
            .write(true)
            .open(root.join(f))
            .unwrap()
            .set_len(path_policy::MAX_RULES_FILE + 1)
            .unwrap();
    }
    let out = finishes("onboard with huge ignore files", &[], || {
        env.worktrees.onboard(
            &env.store,
            &root,
            &WorktreeOnboardOptions {
                // The huge .gitignore itself is left out too, so nothing reads it whole.
                max_file_size: Some(1 << 20),
                ..WorktreeOnboardOptions::default()
            },
        )
    })
    .unwrap();
    let files = snapshot_files(&env.store, out.snapshot);
    assert_eq!(keys(&files), ["a.txt", "x.log", "y.tmp"]);
    assert_eq!(
        reason_of(&out.skipped, ".git/info/exclude").as_deref(),
        Some("ignore-file-too-large"),
        "{:?}",
        out.skipped
    );
    assert!(
        reason_of(&out.skipped, ".gitignore").is_some_and(|r| r.contains("size cap")),
        "{:?}",
        out.skipped
    );
}

/// Makes `levels` nested directories named `name` under `base` (through directory
/// descriptors: the whole path may be longer than the system takes) with a file `f` in the
/// deepest; returns the file's path from `base`.
fn deep_dirs(base: &Utf8Path, name: &str, levels: usize) -> String {
    use rustix::fs::{Mode, OFlags};
    std::fs::create_dir_all(base).unwrap();
    let mut fd = rustix::fs::open(
        base.as_std_path(),
        OFlags::DIRECTORY | OFlags::RDONLY,
        Mode::empty(),
    )
    .unwrap();
    let mut rel = Vec::new();
    for _ in 0..levels {
        rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o755)).unwrap();
        fd = rustix::fs::openat(&fd, name, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty())
            .unwrap();
        rel.push(name);
    }
    let f = rustix::fs::openat(
        &fd,
        "f",
        OFlags::CREATE | OFlags::WRONLY,
        Mode::from_raw_mode(0o644),
    )
    .unwrap();
    rustix::io::write(&f, b"deep").unwrap();
    rel.push("f");
    rel.join("/")
}

fn path_too_long_above(skipped: &[Skipped], deep: &str) -> bool {
    skipped.iter().any(|s| {
        s.reason.to_string() == "path-too-long"
            && deep.as_bytes().starts_with(&s.path)
            && deep.as_bytes().get(s.path.len()) == Some(&b'/')
    })
}

/// A path over the tree limit (4096 bytes) is left out as `path-too-long`; one within it
/// that is too long for the system under a long root (`PATH_MAX`) is captured through
/// directory handles, walked and cached alike; the rest is captured either way.
#[test]
fn paths_over_the_tree_limit_are_left_out_and_paths_past_path_max_captured() {
    let env = Env::new();
    let long_root = {
        let segment = "r".repeat(200);
        env.path(&format!("{segment}/{segment}/{segment}/w"))
    };
    let name = "d".repeat(200);
    // 21 levels: a 4.2 KB path from the root, which no tree holds.
    let short_root = env.path("w");
    // 18 levels: 3.6 KB from the root, over 4 KB from `/`.
    let cases: [(&Utf8PathBuf, usize, bool); 2] =
        [(&short_root, 21, false), (&long_root, 18, true)];
    for (root, levels, fits_a_tree) in cases {
        write_tree(root, &[("a.txt", file("a")), ("s/b.txt", file("b"))]);
        let deep = deep_dirs(root, &name, levels);
        assert!(root.as_str().len() + 1 + deep.len() > 4096);
        let out = finishes("onboard of a deep tree", &[], || {
            env.worktrees
                .onboard(&env.store, root, &WorktreeOnboardOptions::default())
        })
        .unwrap_or_else(|e| panic!("{root}: {e}"));
        let check = |skipped: &[Skipped], files: &BTreeMap<Vec<u8>, Node>, step: &str| {
            let reasons: Vec<_> = skipped.iter().map(|s| (s.path.len(), &s.reason)).collect();
            if fits_a_tree {
                assert!(skipped.is_empty(), "{step}: {reasons:?}");
                assert_eq!(files.get(deep.as_bytes()), Some(&file("deep")), "{step}");
            } else {
                assert!(path_too_long_above(skipped, &deep), "{step}: {reasons:?}");
            }
            assert!(
                files.keys().all(|p| p.len() <= path_policy::MAX_PATH_LEN),
                "{levels} levels"
            );
        };
        let files = snapshot_files(&env.store, out.snapshot);
        assert!(files.contains_key(&b"a.txt"[..]) && files.contains_key(&b"s/b.txt"[..]));
        check(&out.skipped, &files, "onboard");

        for (step, n) in [("walked", 1), ("cached", 0)] {
            if step == "cached" {
                settle();
            }
            std::fs::write(root.join("a.txt"), step).unwrap();
            let snap = env
                .worktrees
                .snapshot(&env.store, root, &threads(n))
                .unwrap_or_else(|e| panic!("{root} {step}: {e}"));
            let files = snapshot_files(&env.store, snap.snapshot);
            check(&snap.skipped, &files, step);
            assert_eq!(files[&b"a.txt"[..]], file(step));
        }
    }
}

/// Unmounts on drop.
struct Mounted(Utf8PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.0.as_str())
            .status();
    }
}

fn mount(args: &[&str], at: &Utf8Path) -> Option<Mounted> {
    let out = std::process::Command::new("mount")
        .args(args)
        .arg(at.as_str())
        .output()
        .ok()?;
    if out.status.success() {
        Some(Mounted(at.to_owned()))
    } else {
        println!(
            "skipped: cannot mount {args:?} at {at}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        None
    }
}

/// A proc mounted inside the tree is never entered (it holds files that block, lie about
/// their size or never end): it is reported as a pseudo file system.
#[test]
fn pseudo_file_systems_inside_the_tree_are_not_entered() {
    let env = Env::new();
    let root = env.path("w");
    write_tree(&root, &[("a.txt", file("a")), ("s/b.txt", file("b"))]);
    std::fs::create_dir_all(root.join("s/p")).unwrap();
    let Some(_proc) = mount(&["-t", "proc", "proc"], &root.join("s/p")) else {
        return;
    };
    // A proc file bind-mounted over a file of the tree: its size says 0, it holds more.
    write_tree(&root, &[("s/v", file(""))]);
    let Some(_file) = mount(&["--bind", "/proc/version"], &root.join("s/v")) else {
        return;
    };
    let out = finishes("onboard with a proc inside", &[], || {
        env.worktrees
            .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
    })
    .unwrap();
    for at in ["s/p", "s/v"] {
        assert_eq!(
            reason_of(&out.skipped, at).as_deref(),
            Some("pseudo-filesystem"),
            "{at}: {:?}",
            out.skipped
        );
    }
    let files = snapshot_files(&env.store, out.snapshot);
    assert_eq!(keys(&files), ["a.txt", "s/b.txt"]);
    for n in [1, 0] {
        settle();
        std::fs::write(root.join("a.txt"), format!("{n}")).unwrap();
        let snap = finishes("snapshot with a proc inside", &[], || {
            env.worktrees.snapshot(&env.store, &root, &threads(n))
        })
        .unwrap();
        assert_eq!(
            reason_of(&snap.skipped, "s/p").as_deref(),
            Some("pseudo-filesystem")
        );
    }
}

/// The process's peak resident memory, in bytes, after resetting it.
fn reset_peak_memory() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak_memory() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("a number");
    kb * 1024
}

/// Grows the file to `to` bytes (sparse) when hashing starts, after the walk saw it small.
struct GrowAtHashing {
    path: Utf8PathBuf,
    to: u64,
}

impl fs_manager::Progress for GrowAtHashing {
    fn start(&self, what: &str, _files: u64, _bytes: u64) {
        if what == "hashing" {
            let f = std::fs::File::options()
                .write(true)
                .open(&self.path)
                .unwrap();
            f.set_len(self.to).unwrap();
        }
    }
}

/// A file that grows between the walk and the read, and keeps growing while it is read, is
/// read no further than its size says (streamed if that is large) and captured as read:
/// memory stays bounded.
#[test]
fn a_file_growing_while_read_is_captured_bounded() {
    const GROWN: u64 = 1 << 30;
    let env = Env::new();
    let root = env.path("w");
    write_tree(&root, &[("a.txt", file("a")), ("grows", file("small"))]);
    let grows = root.join("grows");
    let progress = GrowAtHashing {
        path: grows.clone(),
        to: GROWN,
    };
    let stop = AtomicBool::new(false);
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            use std::io::Write;
            let mut f = std::fs::File::options().append(true).open(&grows).unwrap();
            while !stop.load(Ordering::SeqCst) {
                f.write_all(&[b'x'; 4096]).unwrap();
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        reset_peak_memory();
        let before = peak_memory();
        let out = env.worktrees.onboard(
            &env.store,
            &root,
            &WorktreeOnboardOptions {
                capture: CaptureOptions {
                    progress: &progress,
                    ..CaptureOptions::default()
                },
                ..WorktreeOnboardOptions::default()
            },
        );
        let peak = peak_memory();
        stop.store(true, Ordering::SeqCst);
        let out = out.unwrap();
        assert!(
            peak.saturating_sub(before) < GROWN / 2,
            "reading a {GROWN}-byte file took {} bytes of memory",
            peak - before
        );
        out
    });
    let final_size = std::fs::metadata(&grows).unwrap().len();
    let reader = env.store.reader().unwrap();
    let tree = reader
        .tree(reader.snapshot(out.snapshot).unwrap().tree)
        .unwrap();
    let entry = tree.get(b"grows").expect("captured");
    assert!(
        entry.size >= GROWN && entry.size <= final_size,
        "captured {} bytes of a file of {final_size}",
        entry.size
    );
}

/// Onboarding `/` would walk every file system there is: refused, naming it. It holds
/// every store's folder, so that refuses it first, before anything is read.
#[test]
fn the_file_system_root_is_refused() {
    let env = Env::new();
    let err = finishes("onboard of /", &[], || {
        env.worktrees.onboard(
            &env.store,
            Utf8Path::new("/"),
            &WorktreeOnboardOptions::default(),
        )
    })
    .unwrap_err();
    assert!(
        matches!(
            err,
            fs_manager::CaptureError::StoreOverlap(fs_manager::StoreOverlap {
                overlap: fs_manager::Overlap::HoldsTheStore,
                ..
            })
        ),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("/: "), "{err}");
    let err = finishes("checkpoint of /", &[], || {
        env.worktrees.checkpoint(
            &env.store,
            Utf8Path::new("/"),
            &fs_manager::WorktreeCheckpointOptions::default(),
        )
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("/: "), "{err}");
    assert!(fs_manager::list_worktrees(&env.store).unwrap().is_empty());
}

/// A snapshot holding a path within the tree limit but too long for the system under a
/// long destination (`PATH_MAX`): checkout writes it and rollback restores it, through
/// directory handles, and the next capture finds it where they put it.
#[test]
fn paths_past_path_max_are_written_restored_and_captured_again() {
    let env = Env::new();
    let name = "d".repeat(200);
    let src = env.path("src");
    write_tree(&src, &[("a.txt", file("a"))]);
    // 19 levels: a 3.8 KB path.
    let deep = deep_dirs(&src, &name, 19);
    let snap = env
        .worktrees
        .onboard(&env.store, &src, &WorktreeOnboardOptions::default())
        .unwrap()
        .snapshot;
    assert!(snapshot_files(&env.store, snap).contains_key(deep.as_bytes()));

    let long = env.path(&format!("{}/{}", "r".repeat(200), "r".repeat(200)));
    std::fs::create_dir_all(&long).unwrap();
    let dest = long.join("dest");
    assert!(dest.as_str().len() + 1 + deep.len() > 4095);
    env.worktrees
        .checkout(
            &env.store,
            snap,
            &dest,
            &fs_manager::WorktreeCheckoutOptions::default(),
        )
        .unwrap();
    assert_eq!(read_deep(&dest, &deep), b"deep");
    let again = env
        .worktrees
        .snapshot(&env.store, &dest, &CaptureOptions::default())
        .unwrap();
    assert!(
        !again.changed && again.skipped.is_empty(),
        "{:?}",
        again.skipped
    );

    let w = long.join("w");
    write_tree(&w, &[("b.txt", file("b"))]);
    env.worktrees
        .onboard(&env.store, &w, &WorktreeOnboardOptions::default())
        .unwrap();
    let out = env
        .worktrees
        .rollback(
            &env.store,
            &w,
            snap,
            &fs_manager::WorktreeRollbackOptions::default(),
        )
        .unwrap();
    assert!(out.skipped.is_empty(), "{:?}", out.skipped);
    assert_eq!(read_deep(&w, &deep), b"deep");
    assert!(!w.join("b.txt").exists());
    let snap_after = env
        .worktrees
        .snapshot(&env.store, &w, &CaptureOptions::default())
        .unwrap();
    assert!(!snap_after.changed);
    assert!(snap_after.skipped.is_empty(), "{:?}", snap_after.skipped);
    assert_eq!(
        snapshot_files(&env.store, snap_after.snapshot).get(deep.as_bytes()),
        Some(&file("deep"))
    );
}

/// The content of the file at `rel` under `base`, read through directory descriptors.
fn read_deep(base: &Utf8Path, rel: &str) -> Vec<u8> {
    use rustix::fs::{Mode, OFlags};
    let mut fd = rustix::fs::open(
        base.as_std_path(),
        OFlags::DIRECTORY | OFlags::RDONLY,
        Mode::empty(),
    )
    .unwrap();
    let (dirs, name) = rel.rsplit_once('/').unwrap();
    for dir in dirs.split('/') {
        fd = rustix::fs::openat(&fd, dir, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty())
            .unwrap();
    }
    let f = rustix::fs::openat(&fd, name, OFlags::RDONLY, Mode::empty()).unwrap();
    let mut buf = vec![0u8; 64];
    let n = rustix::io::read(&f, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// The walk reads the rules itself now: a linked worktree's `.git` file leads to the
/// exclude file of its common git directory, which governs that directory only.
#[test]
fn a_linked_git_directorys_exclude_file_applies() {
    let env = Env::new();
    let root = env.path("w");
    let common = env.path("repo.git");
    write_tree(
        &common,
        &[
            ("info/exclude", file("*.tmp\n")),
            ("worktrees/sub/commondir", file("../..\n")),
        ],
    );
    write_tree(
        &root,
        &[
            ("x.tmp", file("kept")),
            ("sub/y.tmp", file("excluded")),
            ("sub/z.txt", file("kept")),
            (
                "sub/.git",
                file(&format!("gitdir: {}\n", common.join("worktrees/sub"))),
            ),
        ],
    );
    for n in [1, 0] {
        let out = env
            .worktrees
            .onboard(
                &env.store,
                &root,
                &WorktreeOnboardOptions {
                    capture: threads(n),
                    ..WorktreeOnboardOptions::default()
                },
            )
            .unwrap();
        let files = snapshot_files(&env.store, out.snapshot);
        assert_eq!(keys(&files), ["sub/z.txt", "x.tmp"], "{n} threads");
    }
}
