//! `cairn mount` / `unmount` with real FUSE: a mount is ready at once and registered as a
//! worktree; snapshot, status, rollback and undo work on it; its layer survives an unmount
//! and a killed server; `--materialize` leaves an ordinary directory; bad input is refused;
//! real tools (git, make and cc) work inside one.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};

use crate::support::{Env, git, stderr, stdout};

/// Unmounts what a test mounted, whatever happened, so no mount outlives its test.
pub(crate) struct Mounts<'a> {
    pub(crate) env: &'a Env,
    pub(crate) dirs: Vec<Utf8PathBuf>,
}

impl Drop for Mounts<'_> {
    fn drop(&mut self) {
        for d in &self.dirs {
            let _ = self.env.cairn(&["unmount", d.as_str()]);
            let _ = rustix_unmount(d);
        }
    }
}

fn rustix_unmount(dir: &Utf8Path) -> std::io::Result<()> {
    let status = Command::new("umount").args(["-l", dir.as_str()]).output()?;
    let _ = status;
    Ok(())
}

pub(crate) fn is_mounted(dir: &Utf8Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(dir.as_str()))
}

pub(crate) fn project(dir: &Utf8Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("README"), "hello\n").unwrap();
    std::fs::write(dir.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    std::fs::write(dir.join(".gitignore"), "target/\n").unwrap();
    std::fs::write(dir.join("run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("src/lib.rs", dir.join("link")).unwrap();
}

pub(crate) fn onboard(env: &Env, dir: &Utf8Path) -> String {
    let (code, out) = env.json(&["onboard", dir.as_str()]);
    assert_eq!(code, 0, "{out}");
    out["snapshot"].as_str().unwrap().to_owned()
}

pub(crate) fn mount<'a>(env: &'a Env, snap: &str, dir: &Utf8Path) -> Mounts<'a> {
    let (code, out) = env.json(&["mount", snap, dir.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["worktree"], dir.as_str(), "{out}");
    assert_eq!(out["snapshot"], snap, "{out}");
    Mounts {
        env,
        dirs: vec![dir.to_owned()],
    }
}

/// Kills the store's mount server with SIGKILL.
pub(crate) fn kill_mount_server(env: &Env) {
    let pids = String::from_utf8(
        Command::new("pgrep")
            .args([
                "-f",
                "--",
                &format!("--store {} serve --for-mounts", env.store()),
            ])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let pid = pids
        .split_whitespace()
        .next()
        .expect("the mount's server runs");
    assert!(
        Command::new("kill")
            .args(["-KILL", pid])
            .status()
            .unwrap()
            .success()
    );
}

/// Waits until the mount at `m` is gone (its server died).
pub(crate) fn wait_unmounted(m: &Utf8Path) {
    let started = Instant::now();
    // `statfs` always asks the mount's server (a stat may be answered from the kernel's
    // cache of the root's attributes).
    while rustix::fs::statfs(m.as_std_path()).is_ok() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the mount did not die"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_mount_is_a_worktree_that_snapshots_rolls_back_and_survives_an_unmount() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let m = env.path().join("m");
    let _guard = mount(&env, &base, &m);
    assert!(is_mounted(&m));
    assert_eq!(
        std::fs::read_to_string(m.join("README")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_link(m.join("link")).unwrap().to_str(),
        Some("src/lib.rs")
    );
    assert_eq!(
        std::fs::metadata(m.join("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
    let (_, list) = env.json(&["worktree", "list"]);
    let item = list["worktrees"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["path"] == m.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(item["kind"], "mounted");
    assert_eq!(item["live"], true);

    // A reader opened before a write through another handle reads the file as it is now.
    {
        use std::io::{Seek, Write};
        let mut reader = std::fs::File::open(m.join("src/lib.rs")).unwrap();
        let mut writer = std::fs::OpenOptions::new()
            .write(true)
            .open(m.join("src/lib.rs"))
            .unwrap();
        writer.write_all(b"pub fn F() {}\n").unwrap();
        drop(writer);
        let mut now = String::new();
        reader.read_to_string(&mut now).unwrap();
        assert_eq!(now, "pub fn F() {}\n");
        reader.rewind().unwrap();
        std::fs::write(m.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    }

    // A shared writable mapping: what it writes is the file's, once synced.
    let mapped = Command::new("python3")
        .arg("-c")
        .arg(
            "import mmap, sys\nf = open(sys.argv[1], 'r+b')\nm = mmap.mmap(f.fileno(), 0)\nm[0:3] = b'PUB'\nm.flush()\nm.close()\nf.close()",
        )
        .arg(m.join("src/lib.rs").as_str())
        .output()
        .unwrap();
    assert!(
        mapped.status.success(),
        "{}",
        String::from_utf8_lossy(&mapped.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(m.join("src/lib.rs")).unwrap(),
        "PUB fn f() {}\n"
    );
    let shown = stdout(&env.cairn(&["diff", &base, m.as_str()]));
    assert!(
        shown.contains("+PUB fn f() {}"),
        "a capture reads what the mapping wrote: {shown}"
    );
    std::fs::write(m.join("src/lib.rs"), "pub fn f() {}\n").unwrap();

    // Writes land in the layer; a snapshot reads only what changed.
    std::fs::write(m.join("README"), "hello, mount\n").unwrap();
    std::fs::write(m.join("src/new.rs"), "pub fn g() {}\n").unwrap();
    std::fs::create_dir(m.join("target")).unwrap();
    std::fs::write(m.join("target/out.o"), "ignored").unwrap();
    std::fs::remove_file(m.join("link")).unwrap();
    let (code, status) = env.json(&["status", m.as_str()]);
    assert_eq!(code, 0, "{status}");
    let (code, snap) = env.json(&["snapshot", m.as_str(), "-m", "turn 1"]);
    assert_eq!(code, 0, "{snap}");
    assert_eq!(
        (
            snap["added"].as_u64(),
            snap["modified"].as_u64(),
            snap["removed"].as_u64()
        ),
        (Some(1), Some(1), Some(1)),
        "{snap}"
    );
    let turn1 = snap["snapshot"].as_str().unwrap().to_owned();
    let diff = stdout(&env.cairn(&["diff", &base, &turn1, "--name-status"]));
    assert!(!diff.contains("target"), "ignored files stay out: {diff}");

    // A cached name and an open handle across a rollback.
    let mut held = std::fs::File::open(m.join("README")).unwrap();
    assert!(m.join("src/new.rs").exists());
    let rolled = env.cairn(&["rollback", m.as_str(), &base]);
    assert!(rolled.status.success(), "{}", stderr(&rolled));
    assert!(!m.join("src/new.rs").exists(), "the cached name is gone");
    assert_eq!(
        std::fs::read_to_string(m.join("README")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_link(m.join("link")).unwrap().to_str(),
        Some("src/lib.rs")
    );
    let mut old = String::new();
    held.read_to_string(&mut old).unwrap();
    assert_eq!(old, "hello, mount\n", "an open handle keeps what it opened");
    // In use, a mount is not unmounted (as `umount` refuses), and nothing changes.
    let (code, busy) = env.json(&["unmount", m.as_str()]);
    assert_eq!(code, 2, "{busy}");
    assert!(
        busy["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in use"),
        "{busy}"
    );
    assert!(is_mounted(&m));
    drop(held);
    assert_eq!(
        std::fs::read_to_string(m.join("target/out.o")).unwrap(),
        "ignored",
        "rollback leaves ignored files alone"
    );
    let undone = env.cairn(&["undo", m.as_str()]);
    assert!(undone.status.success(), "{}", stderr(&undone));
    assert_eq!(
        std::fs::read_to_string(m.join("src/new.rs")).unwrap(),
        "pub fn g() {}\n"
    );

    // Unmounted, the layer stays; mounted again, nothing is lost.
    std::fs::write(m.join("unsnapshotted"), "keep me").unwrap();
    let out = env.cairn(&["unmount", m.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!is_mounted(&m));
    let (_, list) = env.json(&["worktree", "list"]);
    assert!(list.to_string().contains("\"live\":false"), "{list}");
    let (code, status) = env.json(&["snapshot", m.as_str()]);
    assert_eq!(code, 2, "an unmounted worktree is not captured: {status}");
    assert!(
        status["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cairn mount"),
        "{status}"
    );
    let (code, again) = env.json(&["mount", m.as_str()]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(
        std::fs::read_to_string(m.join("unsnapshotted")).unwrap(),
        "keep me"
    );
    assert_eq!(
        std::fs::read_to_string(m.join("README")).unwrap(),
        "hello, mount\n"
    );

    // Materialized: an ordinary directory with the current files, still a worktree.
    let out = env.cairn(&["unmount", m.as_str(), "--materialize"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!is_mounted(&m));
    assert_eq!(
        std::fs::read_to_string(m.join("unsnapshotted")).unwrap(),
        "keep me"
    );
    assert_eq!(
        std::fs::read_to_string(m.join("target/out.o")).unwrap(),
        "ignored"
    );
    assert_eq!(
        std::fs::metadata(m.join("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
    let (code, snap) = env.json(&["snapshot", m.as_str()]);
    assert_eq!(code, 0, "{snap}");
    assert_eq!(snap["added"], 1, "the unsnapshotted file: {snap}");
    let (_, list) = env.json(&["worktree", "list"]);
    assert!(list.to_string().contains("\"kind\":\"isolated\""), "{list}");
}

#[test]
fn a_killed_server_loses_nothing_written_and_the_next_mount_attaches_the_layer() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let m = env.path().join("m");
    let _guard = mount(&env, &base, &m);
    std::fs::write(m.join("README"), "edited\n").unwrap();
    std::fs::rename(m.join("src"), m.join("source")).unwrap();
    std::fs::write(m.join("source/more.rs"), "x").unwrap();

    kill_mount_server(&env);
    wait_unmounted(&m);

    let (code, again) = env.json(&["mount", m.as_str()]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(
        std::fs::read_to_string(m.join("README")).unwrap(),
        "edited\n"
    );
    assert_eq!(
        std::fs::read_to_string(m.join("source/more.rs")).unwrap(),
        "x"
    );
    assert_eq!(
        std::fs::read_to_string(m.join("source/lib.rs")).unwrap(),
        "pub fn f() {}\n"
    );
    assert!(!m.join("src").exists());
}

#[test]
fn bad_input_to_mount_and_unmount_is_refused_and_read_only_is_read_only() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let m = env.path().join("m");
    let _guard = mount(&env, &base, &m);
    // Not empty, unknown snapshot, not a mount.
    let full = env.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("x"), "mine").unwrap();
    let (code, out) = env.json(&["mount", &base, full.as_str()]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains(full.as_str()),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(full.join("x")).unwrap(), "mine");
    let (code, out) = env.json(&["mount", "0123abc", env.path().join("n").as_str()]);
    assert_eq!(code, 2, "{out}");
    assert!(
        !env.path().join("n").exists(),
        "a mount point made for a failed mount goes"
    );
    let inside = env.store().join("m");
    let (code, out) = env.json(&["mount", &base, inside.as_str()]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("inside the store"),
        "{out}"
    );
    let (code, out) = env.json(&["unmount", proj.as_str()]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a mounted"),
        "{out}"
    );

    // Read-only.
    let ro = env.path().join("ro");
    let (code, out) = env.json(&["mount", &base, ro.as_str(), "--read-only"]);
    assert_eq!(code, 0, "{out}");
    let _ro = Mounts {
        env: &env,
        dirs: vec![ro.clone()],
    };
    let err = std::fs::write(ro.join("README"), "no").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(30), "EROFS: {err}");
    assert_eq!(
        std::fs::read_to_string(ro.join("README")).unwrap(),
        "hello\n"
    );
}

#[test]
fn git_and_a_c_build_inside_a_mount_agree_with_a_checkout() {
    let env = Env::new();
    let proj = env.path().join("proj");
    std::fs::create_dir_all(proj.join("src")).unwrap();
    std::fs::write(
        proj.join("src/add.c"),
        "int add(int a, int b) { return a + b; }\n",
    )
    .unwrap();
    std::fs::write(
        proj.join("src/test.c"),
        "#include <stdio.h>\nint add(int, int);\nint main(void) { if (add(2, 3) != 5) return 1; puts(\"ok\"); return 0; }\n",
    )
    .unwrap();
    std::fs::write(
        proj.join("Makefile"),
        "test: build/test\n\t./build/test\nbuild/test: src/add.c src/test.c\n\tmkdir -p build\n\tcc -o build/test src/add.c src/test.c\n",
    )
    .unwrap();
    std::fs::write(proj.join(".gitignore"), "build/\n").unwrap();
    let base = onboard(&env, &proj);
    let m = env.path().join("m");
    let _guard = mount(&env, &base, &m);
    let c = env.path().join("c");
    let out = env.cairn(&["checkout", &base, c.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));

    for dir in [&m, &c] {
        let made = Command::new("make").current_dir(dir).output().unwrap();
        assert!(
            made.status.success(),
            "{dir}: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        assert!(String::from_utf8_lossy(&made.stdout).contains("ok"));
        git(dir, &["init", "-q"]);
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-qm", "base"]);
        std::fs::write(
            dir.join("src/add.c"),
            "int add(int a, int b) { return b + a; }\n",
        )
        .unwrap();
        std::fs::write(dir.join("NOTES"), "new\n").unwrap();
        std::fs::remove_file(dir.join("Makefile")).unwrap();
    }
    let status = |d: &Utf8Path| git(d, &["status", "--porcelain"]);
    let diff = |d: &Utf8Path| git(d, &["diff"]);
    assert_eq!(status(&m), status(&c));
    assert_eq!(diff(&m), diff(&c));
    assert!(!status(&m).is_empty());
    // The build output and .git stay out of the mount's snapshot.
    let (code, snap) = env.json(&["snapshot", m.as_str()]);
    assert_eq!(code, 0, "{snap}");
    let shown = stdout(&env.cairn(&[
        "diff",
        &base,
        snap["snapshot"].as_str().unwrap(),
        "--name-status",
    ]));
    assert!(
        !shown.contains("build/") && !shown.contains(".git/"),
        "{shown}"
    );
    assert!(
        shown.contains("NOTES") && shown.contains("Makefile"),
        "{shown}"
    );
}

fn link(target: &Utf8Path, at: &Utf8Path) {
    let _ = std::fs::remove_file(at);
    let _ = std::fs::remove_dir_all(at);
    std::os::unix::fs::symlink(target, at).unwrap();
}

pub(crate) fn tree_of(dir: &Utf8Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = Utf8PathBuf::try_from(e.path()).unwrap();
            let t = e.file_type().unwrap();
            let rel = p.strip_prefix(dir).unwrap().to_string();
            if t.is_symlink() {
                out.push((
                    rel,
                    std::fs::read_link(&p)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned()
                        .into_bytes(),
                ));
            } else if t.is_dir() {
                stack.push(p);
            } else {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The rollback cases of the hostile-tree tests that a mount can hold (it has no hard
/// links): links planted in the mount never let a rollback write outside it.
#[test]
fn a_rollback_in_a_mount_never_reaches_outside() {
    type Plant = fn(&Utf8Path, &Utf8Path);
    let cases: Vec<(&str, Plant)> = vec![
        ("final path is a link to an outside file", |m, o| {
            link(&o.join("f"), &m.join("f"))
        }),
        ("leading directory is a link outside", |m, o| {
            link(o, &m.join("d"))
        }),
        ("leading directory is a relative escape", |m, _| {
            link(Utf8Path::new("../../.."), &m.join("d"))
        }),
        ("chain of links ending outside", |m, o| {
            link(o, &m.join("l1"));
            link(Utf8Path::new("l1"), &m.join("d"));
        }),
        ("deep directory is a link outside", |m, o| {
            link(o, &m.join("d/e"))
        }),
        ("directory replaced by a file", |m, _| {
            std::fs::remove_dir_all(m.join("d")).unwrap();
            std::fs::write(m.join("d"), "now a file").unwrap();
        }),
        (
            "file replaced by a directory holding a link outside",
            |m, o| {
                std::fs::remove_file(m.join("f")).unwrap();
                std::fs::create_dir(m.join("f")).unwrap();
                link(o, &m.join("f/escape"));
            },
        ),
        (
            "link to the root itself where a directory belongs",
            |m, _| link(m, &m.join("d")),
        ),
    ];
    let env = Env::new();
    let outside = env.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    for (name, body) in [
        ("canary.txt", "must never change"),
        ("f", "outside f"),
        ("x", "outside x"),
    ] {
        std::fs::write(outside.join(name), body).unwrap();
    }
    let proj = env.path().join("proj");
    std::fs::create_dir_all(proj.join("d/e")).unwrap();
    std::fs::write(proj.join("f"), "inside f").unwrap();
    std::fs::write(proj.join("d/x"), "inside x").unwrap();
    std::fs::write(proj.join("d/e/y"), "deep y").unwrap();
    let base = onboard(&env, &proj);
    let canary = tree_of(&outside);
    for (i, (name, plant)) in cases.into_iter().enumerate() {
        let m = env.path().join(format!("m{i}"));
        let _guard = mount(&env, &base, &m);
        plant(&m, &outside);
        let out = env.cairn(&["rollback", m.as_str(), &base]);
        assert_eq!(tree_of(&outside), canary, "{name}: the outside changed");
        if out.status.success() {
            assert_eq!(
                tree_of(&m),
                tree_of(&proj),
                "{name}: the mount differs from the snapshot"
            );
        } else {
            assert!(
                stderr(&out).contains(m.as_str()),
                "{name}: {}",
                stderr(&out)
            );
        }
    }
}

#[test]
fn without_fuse_a_mount_is_a_clear_error_that_suggests_checkout() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let empty = env.path().join("not-fuse");
    std::fs::write(&empty, "").unwrap();
    let m = env.path().join("m");
    // In a mount namespace of its own, /dev/fuse is an ordinary empty file.
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg(format!(
            "mount --bind {empty} /dev/fuse && exec {cairn} --json --store {store} mount {base} {m}",
            cairn = env!("CARGO_BIN_EXE_cairn"),
            store = env.store(),
        ))
        .current_dir(env.path())
        .env("HOME", env.path().join("home").as_str())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("fuse_unavailable") && text.contains("checkout"),
        "{text}"
    );
    assert!(!is_mounted(&m));
    let (_, list) = env.json(&["worktree", "list"]);
    assert!(
        !list.to_string().contains("\"mounted\""),
        "nothing registered: {list}"
    );
}

/// The snapshot a layer applies to stays in the store while the layer does, even when
/// nothing else reaches it any more.
#[test]
fn gc_keeps_what_a_mounts_layer_applies_to() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let other = env.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("unrelated"), "another project").unwrap();
    let elsewhere = onboard(&env, &other);
    let m = env.path().join("m");
    let _guard = mount(&env, &base, &m);
    // The mount now shows an unrelated snapshot; only its layer still starts from base.
    let out = env.cairn(&["rollback", m.as_str(), &elsewhere]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.cairn(&["unmount", m.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    for w in [&proj, &other] {
        let out = env.cairn(&["worktree", "remove", w.as_str()]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let (code, gc) = env.json(&["gc", "--prune-ops", "0"]);
    assert_eq!(code, 0, "{gc}");
    let (code, again) = env.json(&["mount", m.as_str()]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(
        std::fs::read_to_string(m.join("unrelated")).unwrap(),
        "another project"
    );
    assert!(!m.join("README").exists());
    let out = env.cairn(&["fsck"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Checkpoints, rewind, redo and discard on a mount, as on any worktree.
#[test]
fn checkpoints_rewind_redo_and_discard_work_in_a_mount() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let m = env.path().join("m");
    let _guard = mount(&env, &base, &m);
    let ok = |args: &[&str]| {
        let out = env.cairn(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    ok(&["checkpoint", m.as_str(), "--name", "start"]);
    std::fs::write(m.join("README"), "turn 1\n").unwrap();
    ok(&["checkpoint", m.as_str(), "--name", "one"]);
    std::fs::write(m.join("README"), "turn 2\n").unwrap();
    std::fs::write(m.join("extra"), "x").unwrap();
    ok(&["rewind", m.as_str(), "--to", "one"]);
    assert_eq!(
        std::fs::read_to_string(m.join("README")).unwrap(),
        "turn 1\n"
    );
    assert!(!m.join("extra").exists());
    ok(&["undo", m.as_str()]);
    assert_eq!(
        std::fs::read_to_string(m.join("README")).unwrap(),
        "turn 2\n"
    );
    ok(&["redo", m.as_str()]);
    assert_eq!(
        std::fs::read_to_string(m.join("README")).unwrap(),
        "turn 1\n"
    );
    ok(&["discard", m.as_str(), "--yes"]);
    assert_eq!(
        std::fs::read_to_string(m.join("README")).unwrap(),
        "hello\n"
    );
    let (_, status) = env.json(&["status", m.as_str()]);
    assert_eq!(status["stats"]["files"], 0, "{status}");

    // Removed, a mounted worktree is unmounted and its layer goes.
    let layers = env.store().join("mounts");
    let count = || {
        std::fs::read_dir(&layers)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_dir())
            .count()
    };
    assert_eq!(count(), 1);
    ok(&["worktree", "remove", m.as_str()]);
    assert!(!is_mounted(&m));
    assert_eq!(count(), 0, "the layer is gone");
    let (_, list) = env.json(&["worktree", "list"]);
    assert!(!list.to_string().contains(m.as_str()), "{list}");
}

/// SIGTERM to the server holding mounts unmounts them cleanly (no dead mount left), and
/// the next mount brings the layer back.
#[test]
fn sigterm_to_the_server_unmounts_cleanly() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let mut server = env
        .command()
        .args(["--store", env.store().as_str(), "serve"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let socket = cairn_client::Client::socket_of(&env.store());
    let started = Instant::now();
    while cairn_client::Client::connect(&socket).is_err() {
        assert!(started.elapsed() < Duration::from_secs(20), "no server");
        std::thread::sleep(Duration::from_millis(20));
    }
    let m = env.path().join("m");
    let _guard = mount(&env, &base, &m);
    std::fs::write(m.join("written"), "before the signal").unwrap();
    assert!(
        Command::new("kill")
            .args(["-TERM", &server.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    assert!(server.wait().unwrap().success());
    assert!(!is_mounted(&m), "unmounted, not left dead");
    assert!(
        std::fs::read_dir(&m).unwrap().next().is_none(),
        "the mount point is empty again"
    );
    // Gone since (a reboot cleared it, say): made again by the next mount.
    std::fs::remove_dir(&m).unwrap();
    let (code, again) = env.json(&["mount", m.as_str()]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(
        std::fs::read_to_string(m.join("written")).unwrap(),
        "before the signal"
    );
}
