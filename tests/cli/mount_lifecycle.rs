//! A mount's life under attack, with real FUSE: two `mount`s of one directory at once, an
//! `unmount --materialize` with a writer at work or a server killed half way, `--read-only`
//! kept across attaches, and a failed mount taking away exactly the parents it made.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};

use crate::mount_commands::{Mounts, is_mounted, onboard, project, tree_of};
use crate::support::{Env, Server, stderr, stdout};

/// Runs `cmd`, failing the test if it has not exited within `secs` (a server that hangs).
fn within(mut cmd: Command, secs: u64) -> Output {
    let shown = format!("{cmd:?}");
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            panic!("{shown} did not answer within {secs} s");
        }
    }
}

/// `cairn --json ARGS…` against the env's store, within `secs`.
fn json_within(env: &Env, args: &[&str], secs: u64) -> (i32, serde_json::Value) {
    let mut cmd = env.command();
    cmd.args(["--json", "--store", env.store().as_str()])
        .args(args);
    let out = within(cmd, secs);
    let text = stdout(&out);
    let value = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not one JSON object ({e}): {text:?} {}",
            stderr(&out)
        )
    });
    (out.status.code().unwrap_or(-1), value)
}

/// How many mounts sit on `dir` (two mounted one over the other count two).
fn mounts_at(dir: &Utf8Path) -> usize {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.split(' ').nth(4) == Some(dir.as_str()))
        .count()
}

/// The registry's entry for `dir`.
fn listed(env: &Env, dir: &Utf8Path) -> serde_json::Value {
    let (code, list) = json_within(env, &["worktree", "list"], 60);
    assert_eq!(code, 0, "{list}");
    list["worktrees"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["path"] == dir.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("{dir} is not registered: {list}"))
}

/// SIGTERM to the server, which must then stop within `secs`.
fn stop_within(mut server: Server, secs: u64) {
    let status =
        crate::support::terminate(&mut server.child, Duration::from_secs(secs), "cairn serve");
    assert!(status.success(), "cairn serve: {status}");
}

fn kill(signal: &str, pid: u32) {
    assert!(
        Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
}

/// Names beside or inside `dir` that a materialize left behind.
fn leftovers(dir: &Utf8Path) -> Vec<String> {
    let mut found = Vec::new();
    for d in [dir.parent().unwrap(), dir] {
        if let Ok(entries) = std::fs::read_dir(d) {
            for e in entries {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                if name.starts_with(".cairn-materialize") {
                    found.push(format!("{d}/{name}"));
                }
            }
        }
    }
    found
}

/// Two `mount SNAP DIR` of one directory at once, many times, against one server: one
/// mounts it (once, not twice over), the other gets exit 2 naming the directory; two
/// `mount DIR` at once attach it once. Afterwards the server still answers `worktree
/// list` and `unmount`, and stops on SIGTERM.
#[test]
fn two_mounts_of_one_directory_at_once_mount_it_once_and_the_server_keeps_answering() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    // Made before the server, so it goes after it: a hung server is killed first.
    let mut guard = Mounts {
        env: &env,
        dirs: Vec::new(),
    };
    let server = Server::start(&env);
    for i in 0..12 {
        let dir = env.path().join(format!("m{i}"));
        guard.dirs.push(dir.clone());
        let both = |args: &[&str]| {
            std::thread::scope(|s| {
                let a = s.spawn(|| json_within(&env, args, 60));
                let b = s.spawn(|| json_within(&env, args, 60));
                [a.join().unwrap(), b.join().unwrap()]
            })
        };
        let results = both(&["mount", &base, dir.as_str()]);
        assert_eq!(
            results.iter().filter(|(code, _)| *code == 0).count(),
            1,
            "one of them mounts it: {results:?}"
        );
        let (code, lost) = results.iter().find(|(code, _)| *code != 0).unwrap();
        assert_eq!(*code, 2, "{lost}");
        assert!(
            lost["error"]["message"]
                .as_str()
                .unwrap()
                .contains(dir.as_str()),
            "{lost}"
        );
        assert_eq!(mounts_at(&dir), 1, "mounted once, not twice over");
        assert_eq!(
            std::fs::read_to_string(dir.join("README")).unwrap(),
            "hello\n"
        );

        let (code, out) = json_within(&env, &["unmount", dir.as_str()], 60);
        assert_eq!(code, 0, "{out}");
        assert_eq!(mounts_at(&dir), 0);
        for (code, out) in both(&["mount", dir.as_str()]) {
            assert_eq!(code, 0, "{out}");
        }
        assert_eq!(mounts_at(&dir), 1, "attached once");
    }
    for dir in &guard.dirs {
        assert_eq!(listed(&env, dir)["live"], true);
        let (code, out) = json_within(&env, &["unmount", dir.as_str()], 60);
        assert_eq!(code, 0, "{out}");
        assert!(!is_mounted(dir));
    }
    stop_within(server, 60);
}

/// `unmount --materialize` while a writer is at work either refuses as `unmount` does
/// (exit 2, `mount_busy`, the mount live, registered and writable as before) or finishes
/// (an ordinary directory holding every write that succeeded); never a half state.
#[test]
fn materialize_with_a_writer_at_work_refuses_or_finishes_never_half() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let mut guard = Mounts {
        env: &env,
        dirs: Vec::new(),
    };
    let mount = |dir: &Utf8Path| {
        let (code, out) = json_within(&env, &["mount", &base, dir.as_str()], 60);
        assert_eq!(code, 0, "{out}");
    };
    let refused_and_unchanged = |dir: &Utf8Path, out: &serde_json::Value| {
        assert_eq!(out["error"]["code"], "mount_busy", "{out}");
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .contains(dir.as_str()),
            "{out}"
        );
        assert!(is_mounted(dir));
        let entry = listed(&env, dir);
        assert_eq!(
            (&entry["kind"], &entry["live"]),
            (&"mounted".into(), &true.into()),
            "{entry}"
        );
        assert_eq!(leftovers(dir), Vec::<String>::new());
    };

    // A file held open for writing.
    let held_dir = env.path().join("held");
    mount(&held_dir);
    guard.dirs.push(held_dir.clone());
    let mut held = std::fs::OpenOptions::new()
        .append(true)
        .open(held_dir.join("README"))
        .unwrap();
    let (code, out) = json_within(&env, &["unmount", held_dir.as_str(), "--materialize"], 60);
    assert_eq!(code, 2, "{out}");
    refused_and_unchanged(&held_dir, &out);
    held.write_all(b"still writable\n").unwrap();
    drop(held);
    assert_eq!(
        std::fs::read_to_string(held_dir.join("README")).unwrap(),
        "hello\nstill writable\n"
    );

    // A working directory inside.
    let mut inside = Command::new("sleep")
        .arg("60")
        .current_dir(&held_dir)
        .spawn()
        .unwrap();
    let (code, out) = json_within(&env, &["unmount", held_dir.as_str(), "--materialize"], 60);
    let _ = inside.kill();
    let _ = inside.wait();
    assert_eq!(code, 2, "{out}");
    refused_and_unchanged(&held_dir, &out);
    std::fs::write(held_dir.join("after"), "written after the refusal").unwrap();
    let (code, out) = json_within(&env, &["unmount", held_dir.as_str(), "--materialize"], 60);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        std::fs::read_to_string(held_dir.join("after")).unwrap(),
        "written after the refusal"
    );

    // A writer opening, appending and closing in a loop.
    for round in 0..5 {
        let dir = env.path().join(format!("loop{round}"));
        mount(&dir);
        guard.dirs.push(dir.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (stop, log) = (stop.clone(), dir.join("log"));
            std::thread::spawn(move || {
                let mut written = Vec::new();
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let appended = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&log)
                        .and_then(|mut f| f.write_all(format!("line {i}\n").as_bytes()));
                    if appended.is_ok() {
                        written.push(i);
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                written
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        let (code, out) = json_within(&env, &["unmount", dir.as_str(), "--materialize"], 120);
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Relaxed);
        let written = writer.join().unwrap();
        assert_eq!(leftovers(&dir), Vec::<String>::new(), "{out}");
        match code {
            0 => {
                assert_eq!(out["materialized"], true, "{out}");
                assert!(!is_mounted(&dir));
                assert_eq!(listed(&env, &dir)["kind"], "isolated");
                let (code, again) = json_within(&env, &["mount", dir.as_str()], 60);
                assert_eq!(code, 2, "an ordinary directory now: {again}");
            }
            2 => refused_and_unchanged(&dir, &out),
            _ => panic!("round {round}: neither refused nor finished: {out}"),
        }
        let log = std::fs::read_to_string(dir.join("log")).unwrap();
        let lines: std::collections::HashSet<&str> = log.lines().collect();
        let lost: Vec<_> = written
            .iter()
            .filter(|i| !lines.contains(format!("line {i}").as_str()))
            .collect();
        assert!(
            lost.is_empty(),
            "round {round}: appends that succeeded are missing: {lost:?}"
        );
    }
}

/// The marker a materialize keeps beside the layer, if any.
fn marker(env: &Env) -> Option<String> {
    std::fs::read_dir(env.store().join("mounts"))
        .ok()?
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().ends_with(".materialize"))
        .and_then(|e| std::fs::read_to_string(e.path()).ok())
}

/// The server is SIGKILLed during `unmount --materialize`: while the copy is made, or
/// (stopped first, so the moment is certain) once it is whole. The server goes at once
/// (no thread of it stuck on its own mount), and a plain `unmount DIR` or `mount DIR` then
/// finds the directory either still a mount with every file, or an ordinary directory
/// with every file; nothing of the attempt is left.
#[test]
fn a_server_killed_during_materialize_leaves_what_a_plain_mount_or_unmount_recovers() {
    for round in 0..6u64 {
        let env = Env::new();
        let proj = env.path().join("proj");
        let mut expected = BTreeMap::new();
        // Enough files that the copy takes a while.
        for d in 0..30 {
            std::fs::create_dir_all(proj.join(format!("d{d}"))).unwrap();
            for f in 0..40 {
                let rel = format!("d{d}/f{f}");
                let content = format!("round {round}, file {d}/{f}\n").repeat(20);
                std::fs::write(proj.join(&rel), &content).unwrap();
                expected.insert(rel, content.into_bytes());
            }
        }
        let base = onboard(&env, &proj);
        let server = Server::start(&env);
        let m = env.path().join("m");
        let (code, out) = json_within(&env, &["mount", &base, m.as_str()], 60);
        assert_eq!(code, 0, "{out}");
        std::fs::write(m.join("written in the mount"), "layer\n").unwrap();
        expected.insert("written in the mount".into(), b"layer\n".to_vec());

        let mut materialize = env
            .command()
            .args([
                "--store",
                env.store().as_str(),
                "unmount",
                m.as_str(),
                "--materialize",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = server.child.id();
        let whole = round % 2 == 1;
        if whole {
            let started = Instant::now();
            while marker(&env).as_deref() != Some("copied\n")
                && materialize.try_wait().unwrap().is_none()
                && started.elapsed() < Duration::from_secs(120)
            {
                std::thread::sleep(Duration::from_micros(200));
            }
            kill("-STOP", pid);
        } else {
            std::thread::sleep(Duration::from_millis(100 + 100 * round));
        }
        let stage = marker(&env);
        kill("-KILL", pid);
        let mut server = server;
        let started = Instant::now();
        while server.child.try_wait().unwrap().is_none() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "round {round}: the killed server did not go (a thread stuck on its own mount?)"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let finished_before = materialize.wait().unwrap().success();

        let verb = if (round / 2) % 2 == 0 {
            "unmount"
        } else {
            "mount"
        };
        let (code, out) = json_within(&env, &[verb, m.as_str()], 60);
        let entry = listed(&env, &m);
        eprintln!(
            "round {round}: killed {} (marker {stage:?}), then `{verb}`: {} ({code} {out})",
            if finished_before {
                "after it finished"
            } else if whole {
                "with the copy whole"
            } else {
                "while copying"
            },
            entry["kind"]
        );
        match entry["kind"].as_str() {
            Some("isolated") if finished_before => {
                assert_eq!(code, 2, "an ordinary directory already: {out}");
            }
            Some("isolated") => {
                if verb == "unmount" {
                    assert_eq!((code, &out["materialized"]), (0, &true.into()), "{out}");
                } else {
                    assert_eq!(code, 2, "{out}");
                    assert!(out.to_string().contains("finished"), "{out}");
                }
                assert!(!is_mounted(&m));
            }
            Some("mounted") => {
                assert_eq!(code, 0, "round {round}, {verb}: {out}");
                if verb == "unmount" {
                    let (code, out) = json_within(&env, &["mount", m.as_str()], 60);
                    assert_eq!(code, 0, "{out}");
                }
                assert!(is_mounted(&m));
            }
            _ => panic!("round {round}: {entry}"),
        }
        assert_eq!(
            tree_of(&m),
            expected.clone().into_iter().collect::<Vec<_>>(),
            "round {round} ({}, then {verb}): every file, nothing else",
            entry["kind"]
        );
        if entry["kind"] == "mounted" {
            let (code, out) = json_within(&env, &["unmount", m.as_str()], 60);
            assert_eq!(code, 0, "{out}");
            assert!(
                std::fs::read_dir(&m).unwrap().next().is_none(),
                "round {round}: the covered directory holds nothing of the copy"
            );
        } else {
            let layers: Vec<_> = std::fs::read_dir(env.store().join("mounts"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n != "serve.log")
                .collect();
            assert!(
                layers.is_empty(),
                "round {round}: the layer goes: {layers:?}"
            );
        }
        assert_eq!(marker(&env), None, "round {round}");
        assert_eq!(leftovers(&m), Vec::<String>::new(), "round {round}");
    }
}

/// `mount --read-only` is kept in the worktree's record: attached again after an unmount,
/// or after the server was killed, the mount still refuses writes; `worktree list` says so.
#[test]
fn read_only_is_kept_when_the_mount_is_attached_again() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let server = Server::start(&env);
    let (ro, rw) = (env.path().join("ro"), env.path().join("rw"));
    let _guard = Mounts {
        env: &env,
        dirs: vec![ro.clone(), rw.clone()],
    };
    let attach = |args: &[&str], read_only: bool| {
        let (code, out) = json_within(&env, args, 60);
        assert_eq!(code, 0, "{out}");
        assert_eq!(out["read_only"], read_only, "{args:?}: {out}");
    };
    let refuses_writes = |when: &str| {
        let err = std::fs::write(ro.join("README"), "no").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(30), "{when}: EROFS ({err})");
        assert_eq!(
            std::fs::read_to_string(ro.join("README")).unwrap(),
            "hello\n"
        );
        std::fs::write(rw.join("README"), format!("{when}\n")).unwrap();
    };
    attach(&["mount", &base, ro.as_str(), "--read-only"], true);
    attach(&["mount", &base, rw.as_str()], false);
    refuses_writes("first mount");
    assert_eq!(listed(&env, &ro)["read_only"], true);
    assert_eq!(listed(&env, &rw)["read_only"], false);
    let list = stdout(&within(
        {
            let mut cmd = env.command();
            cmd.args(["--store", env.store().as_str(), "worktree", "list"]);
            cmd
        },
        60,
    ));
    let line = |dir: &Utf8Path| {
        list.lines()
            .find(|l| l.starts_with(&format!("{dir}\t")))
            .unwrap_or_else(|| panic!("{list}"))
            .to_owned()
    };
    assert!(line(&ro).ends_with("\tlive\tread-only"), "{list}");
    assert!(line(&rw).ends_with("\tlive"), "{list}");

    // Attached again, still live: says so.
    attach(&["mount", ro.as_str()], true);

    // After an unmount.
    for dir in [&ro, &rw] {
        let (code, out) = json_within(&env, &["unmount", dir.as_str()], 60);
        assert_eq!(code, 0, "{out}");
    }
    attach(&["mount", ro.as_str()], true);
    attach(&["mount", rw.as_str()], false);
    refuses_writes("after an unmount");

    // After the server was killed.
    kill("-KILL", server.child.id());
    let started = Instant::now();
    // A listing asks the dead server (a stat may be answered from the kernel's cache).
    while std::fs::read_dir(&ro).is_ok() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the mount did not die"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(server);
    attach(&["mount", ro.as_str()], true);
    attach(&["mount", rw.as_str()], false);
    refuses_writes("after a killed server");
    assert_eq!(listed(&env, &ro)["read_only"], true);
}

/// A mount that fails into `a/b/c/d` takes away the directories it made for it, and only
/// those: never one that was there before.
#[test]
fn a_failed_mount_takes_away_exactly_the_parents_it_made() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let a = env.path().join("a");
    std::fs::create_dir(&a).unwrap();
    std::fs::write(a.join("mine"), "kept").unwrap();
    let empty = env.path().join("empty");
    std::fs::create_dir(&empty).unwrap();

    let fails = |snap: &str, dir: &Utf8PathBuf, says: &str| {
        let (code, out) = json_within(&env, &["mount", snap, dir.as_str()], 60);
        assert_eq!(code, 2, "{out}");
        assert!(
            out["error"]["message"].as_str().unwrap().contains(says),
            "{out}"
        );
    };
    fails("0123abc", &a.join("b/c/d"), "0123abc");
    assert_eq!(std::fs::read_to_string(a.join("mine")).unwrap(), "kept");
    assert!(!a.join("b").exists(), "the parents it made go");
    fails("0123abc", &env.path().join("x/y/z"), "0123abc");
    assert!(!env.path().join("x").exists());
    fails("0123abc", &empty.join("p/q"), "0123abc");
    assert!(empty.is_dir(), "an empty directory that was there stays");
    assert!(!empty.join("p").exists());
    // Refused after the parents were made: inside the store.
    fails(&base, &env.store().join("s/t"), "inside the store");
    assert!(!env.store().join("s").exists());
    assert!(env.store().is_dir());
    let (_, list) = json_within(&env, &["worktree", "list"], 60);
    assert!(
        !list.to_string().contains("mounted"),
        "nothing registered: {list}"
    );
}

/// The pid of the `serve --for-mounts` a `mount` started for `env`'s store, if one runs.
fn mount_server(env: &Env) -> Option<u32> {
    let out = Command::new("pgrep")
        .args([
            "-f",
            "--",
            &format!("--store {} serve --for-mounts", env.store()),
        ])
        .output()
        .unwrap();
    stdout(&out)
        .split_whitespace()
        .next()
        .map(|p| p.parse().unwrap())
}

/// Whether process `pid` holds `/dev/fuse` open.
fn holds_dev_fuse(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.flatten().any(|fd| {
                std::fs::read_link(fd.path()).is_ok_and(|t| t == Utf8Path::new("/dev/fuse"))
            })
        })
        .unwrap_or(false)
}

/// Waits up to `secs` for the mount server `pid` to exit; fails naming `what` if it does
/// not (telling whether it still holds `/dev/fuse`), after killing it so that it lets the
/// store go for the tests after.
fn assert_server_stops(pid: u32, secs: u64, what: &str) {
    let started = Instant::now();
    // A zombie (exited, not yet reaped by its parent, which is gone) counts as stopped.
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| !r.trim_start().starts_with('Z'))
        })
    };
    while alive() {
        if started.elapsed() > Duration::from_secs(secs) {
            let fuse = holds_dev_fuse(pid);
            kill("-KILL", pid);
            panic!(
                "{what}: the mount server {pid} still runs {secs} s later{}",
                if fuse { ", holding /dev/fuse" } else { "" }
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A mount unmounted from outside (`umount -l`, as `fusermount3 -uz` does) ends its
/// session on its own: the mount is no longer live, and the server started for it stops
/// and lets go of `/dev/fuse`, the layer and the store. So does a mount whose unmount came
/// while a file in it was open (the session ends once the file is closed). What is
/// mounted on the directory since is left alone, and nothing unmounts a path twice.
#[test]
fn a_mount_unmounted_from_outside_lets_its_server_stop() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let m = env.path().join("m");
    for round in 0..3 {
        let (code, out) = json_within(&env, &["mount", &base, m.as_str()], 60);
        assert_eq!(code, 0, "{out}");
        let _guard = Mounts {
            env: &env,
            dirs: vec![m.clone()],
        };
        let pid = mount_server(&env).expect("the mount's server runs");
        assert!(holds_dev_fuse(pid));
        std::fs::write(m.join("written"), format!("round {round}")).unwrap();
        // Round 1: a file held open across the lazy unmount, closed a little later.
        let held = (round == 1).then(|| std::fs::File::open(m.join("README")).unwrap());
        let out = Command::new("umount")
            .args(["-l", m.as_str()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(!is_mounted(&m));
        if let Some(held) = held {
            std::thread::sleep(Duration::from_millis(300));
            drop(held);
        }
        // Round 2: something else mounted there at once, which the server's letting go of
        // its ended mount must leave alone.
        let other = round == 2;
        if other {
            let out = Command::new("mount")
                .args(["-t", "tmpfs", "other", m.as_str()])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", stderr(&out));
        }
        assert_server_stops(pid, 5, &format!("round {round}: umount -l"));
        if other {
            let fstype = std::fs::read_to_string("/proc/self/mountinfo")
                .unwrap()
                .lines()
                .filter(|l| l.split(' ').nth(4) == Some(m.as_str()))
                .map(|l| l.split(" - ").nth(1).unwrap_or("").to_owned())
                .collect::<Vec<_>>();
            assert!(
                fstype.len() == 1 && fstype[0].starts_with("tmpfs other"),
                "what was mounted there since is left alone: {fstype:?}"
            );
            let out = Command::new("umount").arg(m.as_str()).output().unwrap();
            assert!(out.status.success(), "{}", stderr(&out));
        }
        // Nothing written was lost: the next mount attaches the layer.
        let (code, again) = json_within(&env, &["mount", m.as_str()], 60);
        assert_eq!(code, 0, "{again}");
        assert_eq!(
            std::fs::read_to_string(m.join("written")).unwrap(),
            format!("round {round}")
        );
        let (code, out) = json_within(&env, &["unmount", m.as_str()], 60);
        assert_eq!(code, 0, "{out}");
        let pid = mount_server(&env);
        if let Some(pid) = pid {
            assert_server_stops(pid, 5, &format!("round {round}: unmount"));
        }
        // The worktree is removed so that the next round mounts a snapshot afresh.
        let (code, out) = json_within(&env, &["worktree", "remove", m.as_str()], 60);
        assert_eq!(code, 0, "{out}");
    }
    // No unmount of a path that is no mount any more (fuser's own, at a session's end).
    let log = std::fs::read_to_string(env.store().join("mounts/serve.log")).unwrap();
    assert!(!log.contains("Unmount failed"), "{log}");
}

/// A `mount` that reaches a server just as it decided to stop (it had nothing left; its
/// socket not yet gone) is refused there and served by the next server, which `mount`
/// starts: it used to be taken by the stopping server, which then served it with its
/// socket gone, out of every command's reach and never stopping. The moment is widened
/// by the server's test pause.
#[test]
fn a_mount_sent_to_a_stopping_server_is_served_by_the_next() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let m = env.path().join("m");
    let paused = |args: &[&str], secs: u64| {
        let mut cmd = env.command();
        cmd.env("CAIRN_TEST_SERVE_STOP_PAUSE_MS", "1500")
            .args(["--json", "--store", env.store().as_str()])
            .args(args);
        let out = within(cmd, secs);
        let value: serde_json::Value = serde_json::from_str(stdout(&out).trim())
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", stderr(&out)));
        (out.status.code().unwrap_or(-1), value)
    };
    let (code, out) = paused(&["mount", &base, m.as_str()], 60);
    assert_eq!(code, 0, "{out}");
    let _guard = Mounts {
        env: &env,
        dirs: vec![m.clone()],
    };
    let first = mount_server(&env).expect("the mount's server runs");
    let (code, out) = paused(&["unmount", m.as_str()], 60);
    assert_eq!(code, 0, "{out}");
    // The server has decided to stop by now, and keeps its socket for the pause.
    std::thread::sleep(Duration::from_millis(500));
    let socket = env.store().join("serve.sock");
    assert!(socket.exists());
    let (code, out) = paused(&["mount", m.as_str()], 60);
    assert_eq!(code, 0, "{out}");
    // The stopping server goes; another serves the mount.
    assert_server_stops(first, 10, "the stopping server");
    assert_eq!(
        std::fs::read_to_string(m.join("README")).unwrap(),
        "hello\n"
    );
    let second = mount_server(&env).expect("a server serves the mount");
    // Reached by the next command, the mount is unmounted, and its server stops.
    let (code, out) = paused(&["unmount", m.as_str()], 30);
    assert_eq!(code, 0, "{out}");
    assert!(!is_mounted(&m));
    assert_server_stops(second, 10, "after the last unmount");
}

/// A `mount` whose command is killed (kill -9) at any moment leaves either no mount or a
/// mount that `unmount` reaches; either way the server started for it stops afterwards
/// (one that got no request within its first 10 seconds too).
#[test]
fn a_mount_whose_command_is_killed_lets_its_server_stop() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    for (round, delay) in [5u64, 60, 250].into_iter().enumerate() {
        let m = env.path().join(format!("m{round}"));
        let _guard = Mounts {
            env: &env,
            dirs: vec![m.clone()],
        };
        let mut child = env
            .command()
            .args(["--store", env.store().as_str(), "mount", &base, m.as_str()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        kill("-KILL", child.id());
        let _ = child.wait();
        // Whatever the server made of it, an unmount reaches it.
        let (code, out) = json_within(&env, &["unmount", m.as_str()], 60);
        assert!(
            code == 0
                || out["error"]["code"] == "not_a_mount"
                || (out["error"]["code"] == "invalid_path" && !m.exists()),
            "round {round}: {out}"
        );
        assert!(!is_mounted(&m), "round {round}");
        if let Some(pid) = mount_server(&env) {
            assert_server_stops(pid, 15, &format!("round {round}: killed after {delay} ms"));
        }
    }
}

/// A server told to stop (SIGTERM) while a process works in one of its mounts (its
/// working directory there) stops within seconds: it used to wait, its mount detached,
/// for that process to leave, holding the store meanwhile.
#[test]
fn a_server_stops_on_sigterm_with_a_mount_in_use() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let m = env.path().join("m");
    let (code, out) = json_within(&env, &["mount", &base, m.as_str()], 60);
    assert_eq!(code, 0, "{out}");
    let _guard = Mounts {
        env: &env,
        dirs: vec![m.clone()],
    };
    std::fs::write(m.join("written"), "kept").unwrap();
    let pid = mount_server(&env).expect("the mount's server runs");
    let mut inside = Command::new("sleep")
        .arg("60")
        .current_dir(m.as_std_path())
        .spawn()
        .unwrap();
    kill("-TERM", pid);
    let stopped = std::panic::catch_unwind(|| assert_server_stops(pid, 10, "SIGTERM"));
    let _ = inside.kill();
    let _ = inside.wait();
    if let Err(e) = stopped {
        std::panic::resume_unwind(e);
    }
    // What was written is there when it is mounted again.
    let (code, out) = json_within(&env, &["mount", m.as_str()], 60);
    assert_eq!(code, 0, "{out}");
    assert_eq!(std::fs::read_to_string(m.join("written")).unwrap(), "kept");
}
