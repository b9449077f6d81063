//! `cairn serve` watching its worktrees (inotify): a watched capture sees every kind of
//! change a full scan sees, writes through a shared memory map included, and a rollback
//! keeps such an edit for undo.

use std::process::{Child, Command, Stdio};

use camino::Utf8PathBuf;

use crate::serve_commands::cairn;
use crate::support::{Env, Server, stderr};

/// Two copies of one tree: `wt`, registered with the served store and watched, and a
/// mirror that gets every same change but is never watched, opened or read by the server.
/// The mirror's full scan, in a store of its own, is the truth a watched capture must match
/// (reading `wt` itself for it would open its files and change what the watcher saw).
struct Twins<'a> {
    env: &'a Env,
    wt: Utf8PathBuf,
    mirror: Utf8PathBuf,
    steps: std::cell::Cell<usize>,
}

type Counts = (serde_json::Value, serde_json::Value, serde_json::Value);

impl<'a> Twins<'a> {
    fn new(env: &'a Env, make: impl Fn(&Utf8PathBuf)) -> Twins<'a> {
        let twins = Twins {
            env,
            wt: env.path().join("wt"),
            mirror: env.path().join("mirror"),
            steps: std::cell::Cell::new(0),
        };
        make(&twins.wt);
        make(&twins.mirror);
        let out = cairn(env, &["onboard", twins.wt.as_str()]);
        assert!(out.status.success(), "{}", stderr(&out));
        twins
    }

    fn both(&self, change: impl Fn(&Utf8PathBuf)) {
        change(&self.wt);
        change(&self.mirror);
    }

    /// What a full scan, in a store no server watches, says the tree is.
    fn truth(&self) -> Counts {
        let n = self.steps.get();
        self.steps.set(n + 1);
        let copy = self.env.path().join(format!("copy-{n}"));
        let status = Command::new("cp")
            .arg("-a")
            .arg(&self.mirror)
            .arg(&copy)
            .status()
            .unwrap();
        assert!(status.success());
        let reference = self.env.path().join("reference-store");
        let out = self
            .env
            .command()
            .args([
                "--store",
                reference.as_str(),
                "--json",
                "onboard",
                copy.as_str(),
            ])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        std::fs::remove_dir_all(&copy).unwrap();
        (v["tree"].clone(), v["files"].clone(), v["bytes"].clone())
    }

    /// Onboarding a registered worktree again is a snapshot that also reports its counts.
    fn snap(&self) -> Counts {
        let out = cairn(self.env, &["--json", "onboard", self.wt.as_str()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (v["tree"].clone(), v["files"].clone(), v["bytes"].clone())
    }
}

#[test]
fn snapshots_through_the_watching_server_see_every_kind_of_change() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let twins = Twins::new(&env, |wt| {
        for d in ["a", "a/deep", "b", "c"] {
            std::fs::create_dir_all(wt.join(d)).unwrap();
            std::fs::write(wt.join(d).join("f.txt"), format!("{d}\n")).unwrap();
        }
    });
    let _server = Server::start(&env);
    // Twice unchanged: the watcher starts trusting directories.
    assert_eq!(twins.snap(), twins.truth());
    assert_eq!(twins.snap(), twins.truth());
    type Step<'a> = (&'a str, Box<dyn Fn(&Utf8PathBuf) + 'a>);
    let steps: Vec<Step> = vec![
        (
            "same size, new bytes",
            Box::new(|wt| std::fs::write(wt.join("a/deep/f.txt"), "X\n").unwrap()),
        ),
        (
            "chmod +x",
            Box::new(|wt| {
                std::fs::set_permissions(wt.join("b/f.txt"), std::fs::Permissions::from_mode(0o755))
                    .unwrap()
            }),
        ),
        (
            "new nested directory",
            Box::new(|wt| {
                std::fs::create_dir_all(wt.join("c/new/er")).unwrap();
                std::fs::write(wt.join("c/new/er/g.txt"), "g\n").unwrap();
            }),
        ),
        (
            "edit inside the new directory",
            Box::new(|wt| std::fs::write(wt.join("c/new/er/g.txt"), "h\n").unwrap()),
        ),
        (
            "rename a directory",
            Box::new(|wt| std::fs::rename(wt.join("a"), wt.join("renamed")).unwrap()),
        ),
        (
            "edit under the renamed directory",
            Box::new(|wt| std::fs::write(wt.join("renamed/deep/f.txt"), "Y\n").unwrap()),
        ),
        (
            "file becomes a symlink",
            Box::new(|wt| {
                std::fs::remove_file(wt.join("b/f.txt")).unwrap();
                std::os::unix::fs::symlink("../c/f.txt", wt.join("b/f.txt")).unwrap();
            }),
        ),
        (
            "delete a directory",
            Box::new(|wt| std::fs::remove_dir_all(wt.join("c/new")).unwrap()),
        ),
        (
            "a shell appends",
            Box::new(|wt| {
                let ok = Command::new("sh")
                    .arg("-c")
                    .arg("echo more >> renamed/f.txt")
                    .current_dir(wt)
                    .status()
                    .unwrap();
                assert!(ok.success());
            }),
        ),
        (
            "move a file to another directory",
            Box::new(|wt| {
                std::fs::rename(wt.join("renamed/f.txt"), wt.join("c/moved.txt")).unwrap()
            }),
        ),
        (
            "move a directory into another",
            Box::new(|wt| std::fs::rename(wt.join("renamed/deep"), wt.join("c/deep")).unwrap()),
        ),
        (
            "edit after both moves",
            Box::new(|wt| {
                std::fs::write(wt.join("c/moved.txt"), "moved and edited\n").unwrap();
                std::fs::write(wt.join("c/deep/f.txt"), "Z\n").unwrap();
            }),
        ),
        (
            "more events than the queue holds",
            Box::new(|wt| {
                // Over inotify's default queue of 16,384 events: the overflow must not let
                // the edit made among them go unseen.
                let dir = wt.join("b/flood");
                std::fs::create_dir_all(&dir).unwrap();
                for i in 0..9000 {
                    std::fs::write(dir.join(i.to_string()), "").unwrap();
                }
                std::fs::write(wt.join("c/f.txt"), "edited in the flood\n").unwrap();
                std::fs::remove_dir_all(&dir).unwrap();
            }),
        ),
    ];
    for (name, change) in &steps {
        twins.both(change);
        let got = twins.snap();
        assert_eq!(got, twins.truth(), "after: {name}");
        // And nothing is seen twice or missed on the next, quiet snapshot.
        assert_eq!(twins.snap(), got, "quiet after: {name}");
    }
    let (code, status) = {
        let out = cairn(&env, &["--json", "status", twins.wt.as_str()]);
        (
            out.status.code(),
            serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap(),
        )
    };
    assert_eq!(code, Some(0));
    assert_eq!(status["stats"]["files"], 0, "{status}");
}

/// A process that maps a file shared and writes through the map, step by step, told when
/// to go on through its stdin.
struct Mapper {
    child: Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

const MAPPER: &str = r#"
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 0)
for step, tag in enumerate([b"MMA1", b"MMA2", b"MMA3", b"MMA4"]):
    if step:
        sys.stdin.readline()
    if step == 2:
        os.close(fd)  # the map outlives the descriptor
    m[0:4] = tag
    m.flush()
    print("ok", flush=True)
sys.stdin.readline()
"#;

impl Mapper {
    fn start(file: &Utf8PathBuf) -> Mapper {
        let mut child = Command::new("python3")
            .args(["-c", MAPPER, file.as_str()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut m = Mapper { child, out };
        m.wait();
        m
    }

    fn wait(&mut self) {
        use std::io::BufRead;
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert_eq!(line, "ok\n", "the mapping process failed");
    }

    fn next(&mut self) {
        use std::io::Write;
        self.child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(b"go\n")
            .unwrap();
        self.wait();
    }
}

impl Drop for Mapper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_edit_through_a_shared_map_is_seen_by_the_watching_server() {
    let env = Env::new();
    let twins = Twins::new(&env, |wt| {
        std::fs::create_dir_all(wt.join("db")).unwrap();
        std::fs::write(wt.join("db/f.txt"), "data of the database\n").unwrap();
        std::fs::write(wt.join("other.txt"), "o\n").unwrap();
    });
    let _server = Server::start(&env);
    assert_eq!(twins.snap(), twins.truth());
    assert_eq!(twins.snap(), twins.truth());
    // Written through the map while the file is open, again after a capture, after the
    // descriptor is closed, and once more with no event at all.
    let mut mapped = Mapper::start(&twins.wt.join("db/f.txt"));
    let mut mirrored = Mapper::start(&twins.mirror.join("db/f.txt"));
    for step in [
        "open",
        "open after a capture",
        "closed",
        "closed after a capture",
    ] {
        if step != "open" {
            mapped.next();
            mirrored.next();
        }
        let got = twins.snap();
        assert_eq!(got, twins.truth(), "written through the map, {step}");
        assert_eq!(twins.snap(), got, "quiet after: {step}");
    }
}

#[test]
fn a_rollback_keeps_an_edit_made_through_a_shared_map_for_undo() {
    let env = Env::new();
    let wt = env.path().join("w");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::write(wt.join("f.txt"), "first version\n").unwrap();
    let out = cairn(&env, &["--json", "onboard", wt.as_str()]);
    let older: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    std::fs::write(wt.join("f.txt"), "second version\n").unwrap();
    let _server = Server::start(&env);
    for _ in 0..2 {
        let out = cairn(&env, &["--json", "snapshot", wt.as_str()]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let mapper = Mapper::start(&wt.join("f.txt"));
    let out = cairn(&env, &["--json", "snapshot", wt.as_str()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["changed"], true, "the edit through the map: {v}");
    let mut mapper = mapper;
    mapper.next();
    let out = cairn(
        &env,
        &["rollback", wt.as_str(), older["snapshot"].as_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(wt.join("f.txt")).unwrap(),
        "first version\n"
    );
    let out = cairn(&env, &["undo", wt.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(wt.join("f.txt")).unwrap(),
        "MMA2nd version\n",
        "undo brings back the edit made through the map after the last snapshot"
    );
}
