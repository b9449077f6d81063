//! A mount's scope is a worktree's scope: what a capture of a mount takes in, leaves out and
//! reports (`skipped`) is what a capture of a checkout of the same snapshot does, secrets
//! included; and what is done to a file unlinked while open never reaches another path.

use std::io::{Seek, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;

use camino::Utf8Path;

use crate::mount_commands::{kill_mount_server, mount, onboard, project, wait_unmounted};
use crate::support::{Env, stdout};

/// `(path, reason)` of a JSON `skipped` list, sorted.
pub(crate) fn skipped(out: &serde_json::Value) -> Vec<(String, String)> {
    let mut list: Vec<(String, String)> = out["skipped"]
        .as_array()
        .unwrap_or_else(|| panic!("no skipped list: {out}"))
        .iter()
        .map(|s| {
            (
                s["path"].as_str().unwrap().to_owned(),
                s["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    list.sort();
    list
}

fn write(root: &Utf8Path, rel: &str, bytes: &[u8]) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
}

/// The issue's own report: secrets written into a mount were captured, and
/// `.git/info/exclude` was not applied. Now they are left out and reported, as on disk.
#[test]
fn a_mount_captures_no_secret_and_reports_what_it_leaves_out() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let m = env.path().join("m");
    let _guard = mount(&env, &base, &m);

    write(&m, ".env", b"SECRET=1\n");
    write(&m, ".ssh/id_rsa", b"k\n");
    write(&m, "certs/server.pem", b"pem\n");
    write(&m, ".git/info/exclude", b"*.log\n");
    write(&m, "build.log", b"noise\n");
    write(&m, ".GIT", b"x");
    write(&m, "git~1", b"x");
    std::fs::write(
        m.as_std_path()
            .join(std::ffi::OsStr::from_bytes(b"bad\x01name")),
        b"x",
    )
    .unwrap();
    write(&m, "kept.txt", b"kept\n");

    let (code, status) = env.json(&["status", m.as_str()]);
    assert_eq!(code, 0, "{status}");
    let (code, snap) = env.json(&["snapshot", m.as_str()]);
    assert_eq!(code, 0, "{snap}");
    let expected: Vec<(String, String)> = vec![
        (".GIT".into(), "invalid name: a spelling of .git".into()),
        (".env".into(), "denied by pattern .env".into()),
        (".ssh".into(), "denied by pattern .ssh/".into()),
        (
            "bad\u{1}name".into(),
            "invalid name: contains a control character".into(),
        ),
        ("certs/server.pem".into(), "denied by pattern *.pem".into()),
        ("git~1".into(), "invalid name: a spelling of .git".into()),
    ];
    let got = skipped(&snap);
    assert_eq!(got, expected, "{snap}");
    assert_eq!(
        skipped(&status),
        got,
        "status reports what a snapshot skips"
    );
    assert_eq!(snap["added"], 1, "kept.txt only: {snap}");
    let new = snap["snapshot"].as_str().unwrap();
    for secret in [
        ".env",
        ".ssh/id_rsa",
        "certs/server.pem",
        "build.log",
        ".GIT",
        "git~1",
    ] {
        let out = env.cairn(&["show", &format!("{new}:{secret}")]);
        assert_eq!(out.status.code(), Some(2), "{secret} was captured");
    }
    let out = env.cairn(&["show", &format!("{new}:kept.txt")]);
    assert_eq!(stdout(&out), "kept\n");
    // Human status names what it leaves out too.
    let human = stdout(&env.cairn(&["status", m.as_str()]));
    assert!(
        human.contains("skipped .env: denied by pattern .env"),
        "{human}"
    );
}

/// `run` on a mount protects its secrets: a command that writes one has it put back and
/// the run reports the violation.
#[test]
fn run_in_a_mount_puts_back_a_secret_the_command_wrote() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let m = env.path().join("m");
    let _guard = mount(&env, &base, &m);

    let out = env.cairn(&[
        "--json",
        "run",
        m.as_str(),
        "--no-sandbox",
        "--",
        "sh",
        "-c",
        "echo k > id_rsa",
    ]);
    let text = stdout(&out);
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(out.status.code(), Some(1), "{v}");
    let violations = v["violations"].as_array().unwrap();
    assert!(violations.iter().any(|x| x["path"] == "id_rsa"), "{v}");
    assert!(
        !m.join("id_rsa").exists(),
        "the secret the command wrote stays"
    );
}

/// A rollback captures the live state first; on a mount that capture takes no secret.
#[test]
fn a_rollback_of_a_mount_captures_no_secret() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let m = env.path().join("m");
    let _guard = mount(&env, &base, &m);
    write(&m, ".env", b"SECRET=1\n");
    write(&m, "README", b"changed\n");

    let (code, out) = env.json(&["rollback", m.as_str(), &base]);
    assert_eq!(code, 0, "{out}");
    let (_, log) = env.json(&["log", m.as_str()]);
    for entry in log["snapshots"].as_array().unwrap() {
        let id = entry["id"].as_str().unwrap();
        let shown = env.cairn(&["show", &format!("{id}:.env")]);
        assert_eq!(shown.status.code(), Some(2), "snapshot {id} holds .env");
    }
    assert_eq!(
        std::fs::read(m.join(".env")).unwrap(),
        b"SECRET=1\n",
        "left alone"
    );
}

/// A small seeded generator, so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
}

/// The same random writes (secrets, pattern files, names no tree holds among them) into a
/// checkout and a mount of one snapshot: every snapshot of both has the same tree and the
/// same `skipped`.
#[test]
fn a_mount_and_a_checkout_given_the_same_writes_capture_the_same() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let c = env.path().join("c");
    let (code, out) = env.json(&["checkout", &base, c.as_str()]);
    assert_eq!(code, 0, "{out}");
    let m = env.path().join("m");
    let _guard = mount(&env, &base, &m);

    let dirs = [
        "",
        "src",
        "sub",
        "sub/deep",
        ".ssh",
        "node_modules",
        ".git/info",
    ];
    let names = [
        "a.txt",
        "b.rs",
        ".env",
        ".env.prod",
        "id_rsa",
        "key.pem",
        "x.log",
        ".gitignore",
        ".ignore",
        "exclude",
        ".GIT",
        "git~1",
        "c.tmp",
        ".cairndeny",
    ];
    let patterns = [
        "*.log\n",
        "*.tmp\n!keep.tmp\n",
        "sub/\n",
        "node_modules/\n",
        "!.env\n",
        "",
    ];
    let mut rng = Rng(0x5eed_1234_5678_9abc);
    let mut reported = 0;
    for round in 0..12 {
        for _ in 0..8 {
            let dir = rng.pick(&dirs);
            let name = rng.pick(&names);
            let rel = if dir.is_empty() {
                name.to_owned()
            } else {
                format!("{dir}/{name}")
            };
            let bytes = if [".gitignore", ".ignore", "exclude", ".cairndeny"].contains(&name) {
                rng.pick(&patterns).as_bytes().to_vec()
            } else {
                format!("{round} {}\n", rng.next()).into_bytes()
            };
            for root in [&c, &m] {
                write(root, &rel, &bytes);
            }
        }
        if round % 3 == 2 {
            // A name no tree holds, and a removal.
            for root in [&c, &m] {
                let _ = std::fs::write(
                    root.as_std_path()
                        .join(std::ffi::OsStr::from_bytes(b"ctl\x02")),
                    b"x",
                );
                let _ = std::fs::remove_file(root.join("src/a.txt"));
            }
        }
        let (code_c, snap_c) = env.json(&["snapshot", c.as_str()]);
        let (code_m, snap_m) = env.json(&["snapshot", m.as_str()]);
        assert_eq!(
            (code_c, code_m),
            (0, 0),
            "round {round}: {snap_c} / {snap_m}"
        );
        assert_eq!(
            snap_c["tree"], snap_m["tree"],
            "round {round}: trees differ\ncheckout {snap_c}\nmount {snap_m}"
        );
        assert_eq!(
            skipped(&snap_c),
            skipped(&snap_m),
            "round {round}: skipped differ"
        );
        reported += usize::from(!skipped(&snap_c).is_empty());
    }
    assert!(reported > 0, "no round left anything out");
}

/// What a process does to a file unlinked while it holds it open goes nowhere another
/// path can see: not after the mount is attached again, not after its server is killed.
#[test]
fn writes_to_an_unlinked_open_file_never_reach_another_path() {
    let env = Env::new();
    let proj = env.path().join("proj");
    std::fs::create_dir_all(proj.join("d")).unwrap();
    std::fs::write(proj.join("x"), "the root's x\n").unwrap();
    std::fs::write(proj.join("d/x"), "d's x\n").unwrap();
    let base = onboard(&env, &proj);
    let m = env.path().join("m");
    let guard = mount(&env, &base, &m);

    for kill in [false, true] {
        // A new file and a file of the snapshot (copied up by the write).
        std::fs::write(m.join("d/y"), "d's y\n").unwrap();
        std::fs::write(m.join("y"), "the root's y\n").unwrap();
        for name in ["x", "y"] {
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(m.join("d").join(name))
                .unwrap();
            std::fs::remove_file(m.join("d").join(name)).unwrap();
            file.set_permissions(std::fs::Permissions::from_mode(0o700))
                .unwrap();
            file.seek(std::io::SeekFrom::Start(0)).unwrap();
            file.write_all(b"written after the unlink\n").unwrap();
            file.sync_all().unwrap();
        }
        if kill {
            kill_mount_server(&env);
            wait_unmounted(&m);
        } else {
            let out = env.cairn(&["unmount", m.as_str()]);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                crate::support::stderr(&out)
            );
        }
        let (code, again) = env.json(&["mount", m.as_str()]);
        assert_eq!(code, 0, "{again}");
        assert_eq!(
            std::fs::read_to_string(m.join("x")).unwrap(),
            "the root's x\n"
        );
        assert_eq!(
            std::fs::read_to_string(m.join("y")).unwrap(),
            "the root's y\n"
        );
        for name in ["x", "y"] {
            let mode = std::fs::metadata(m.join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o644, "{name} took the unlinked file's mode");
        }
        assert!(!m.join("d/x").exists() && !m.join("d/y").exists());
        std::fs::write(m.join("d/x"), "d's x\n").unwrap();
    }
    drop(guard);
}

/// A name longer than a directory takes is `ENAMETOOLONG` whatever the call, as on disk
/// (the kernel hands a mount names of up to 1,024 bytes).
#[test]
fn a_name_too_long_is_enametoolong_not_enoent() {
    let env = Env::new();
    let proj = env.path().join("proj");
    project(&proj);
    let base = onboard(&env, &proj);
    let m = env.path().join("m");
    let _guard = mount(&env, &base, &m);
    let long = "n".repeat(300);
    let errno = |r: std::io::Result<()>| r.err().and_then(|e| e.raw_os_error());
    let too_long = Some(rustix::io::Errno::NAMETOOLONG.raw_os_error());
    for root in [&proj, &m] {
        let at = root.join(&long);
        assert_eq!(
            errno(std::fs::metadata(&at).map(drop)),
            too_long,
            "stat in {root}"
        );
        assert_eq!(
            errno(std::fs::remove_file(&at)),
            too_long,
            "unlink in {root}"
        );
        assert_eq!(
            errno(std::fs::write(&at, b"x")),
            too_long,
            "create in {root}"
        );
        assert_eq!(errno(std::fs::create_dir(&at)), too_long, "mkdir in {root}");
    }
}
