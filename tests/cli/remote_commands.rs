//! Remotes end to end: machines (separate stores, and where the engine tests can have
//! them, separate network namespaces) sharing snapshots through a remote. The same
//! scenarios run on a `file://` remote here and on real S3 engines in `remote_engines.rs`.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

use camino::{Utf8Path, Utf8PathBuf};
use serde_json::Value;

use crate::support::stderr;

/// Where the machines' remote is, and what they need to reach it.
pub struct RemoteTarget {
    /// `s3://...` or `file://...`.
    pub url: String,
    /// The S3 endpoint.
    pub endpoint: Option<String>,
    /// Environment of every cairn run (credentials).
    pub env: Vec<(String, String)>,
    /// True if the engine enforces conditional writes (refs can be updated there).
    pub conditional: bool,
}

/// One machine: its own store and directory, its commands run where `prefix` says (e.g.
/// `ip netns exec NS`).
pub struct Machine {
    pub name: String,
    pub dir: Utf8PathBuf,
    pub prefix: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl Machine {
    pub fn new(root: &Utf8Path, name: &str, prefix: Vec<String>, target: &RemoteTarget) -> Machine {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("home")).unwrap();
        Machine {
            name: name.to_owned(),
            dir,
            prefix,
            env: target.env.clone(),
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let cairn = env!("CARGO_BIN_EXE_cairn");
        let mut cmd = match self.prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(cairn);
                c
            }
            None => Command::new(cairn),
        };
        cmd.current_dir(&self.dir)
            .env_remove("CAIRN_STORE")
            .env_remove("RUST_LOG")
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env("HOME", self.dir.join("home").as_str())
            .env("NO_COLOR", "1")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .arg("--store")
            .arg(self.dir.join("store").as_str())
            .args(args);
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// `--json` output and exit code.
    pub fn json(&self, args: &[&str]) -> (i32, Value) {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.run(&all);
        let text = String::from_utf8_lossy(&out.stdout);
        let value = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
            panic!(
                "{}: cairn {args:?}: not one JSON object ({e}): {text:?}\n{}",
                self.name,
                stderr(&out)
            )
        });
        (out.status.code().unwrap_or(-1), value)
    }

    /// Runs `args`, which must succeed; its JSON.
    pub fn ok(&self, args: &[&str]) -> Value {
        let (code, v) = self.json(args);
        assert_eq!(code, 0, "{}: cairn {args:?}: {v}", self.name);
        v
    }

    pub fn add_remote(&self, target: &RemoteTarget) -> Value {
        let mut args = vec!["remote", "add", "origin", target.url.as_str()];
        if let Some(e) = &target.endpoint {
            args.extend(["--endpoint", e.as_str()]);
        }
        self.ok(&args)
    }
}

/// Every file under `dir`: relative path → (mode, content or link target).
pub fn tree_of(dir: &Utf8Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let path = Utf8PathBuf::try_from(entry.path()).unwrap();
            let rel = path.strip_prefix(dir).unwrap().to_string();
            if rel == ".cairn" || rel.starts_with(".git") {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(
                    rel,
                    (0o120000, target.into_os_string().into_encoded_bytes()),
                );
            } else {
                out.insert(
                    rel,
                    (
                        meta.permissions().mode() & 0o100,
                        std::fs::read(&path).unwrap(),
                    ),
                );
            }
        }
    }
    out
}

/// A project with nested directories, an executable, a symlink and a file big enough to
/// be chunked.
pub fn project(dir: &Utf8Path) {
    std::fs::create_dir_all(dir.join("src/deep/er")).unwrap();
    std::fs::write(dir.join("README.md"), "a project\n").unwrap();
    std::fs::write(dir.join("src/lib.rs"), "pub fn f() {}\n".repeat(200)).unwrap();
    std::fs::write(dir.join("src/deep/er/data.txt"), "deep\n").unwrap();
    let big: Vec<u8> = (0..2_500_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(dir.join("big.bin"), big).unwrap();
    std::fs::write(dir.join("run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("src/lib.rs", dir.join("link")).unwrap();
}

pub fn id_of(v: &Value, field: &str) -> String {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("no {field} in {v}"))
        .to_owned()
}

/// Machine A onboards a project and pushes it; B checks it out by id and gets the same
/// bytes; B changes it and moves `main@origin`; A pulls and gets B's change.
pub fn two_machines(target: &RemoteTarget, a: &Machine, b: &Machine) {
    let proj = a.dir.join("proj");
    project(&proj);
    let s1 = id_of(&a.ok(&["onboard", proj.as_str()]), "snapshot");
    let added = a.add_remote(target);
    assert_eq!(
        added["remotes"][0]["conditional_writes"], target.conditional,
        "{added}"
    );
    a.ok(&["ref", "set", "main", &s1]);

    let pushed = a.json(&["push"]);
    if target.conditional {
        assert_eq!(pushed.0, 0, "{}", pushed.1);
        assert_eq!(pushed.1["refs"][0]["name"], "main@origin", "{}", pushed.1);
    } else {
        // The objects go; the ref is refused, naming the remote.
        assert_eq!(pushed.0, 3, "{}", pushed.1);
        assert!(
            pushed.1["error"]["message"]
                .as_str()
                .unwrap()
                .contains("origin")
        );
        a.ok(&["push", &s1]);
    }
    let again = a.ok(&["push", &s1]);
    assert_eq!(again["objects_sent"], 0, "nothing is sent twice: {again}");
    assert_eq!(again["bytes_sent"], 0, "{again}");
    assert!(again["objects_present"].as_u64() >= Some(1), "{again}");

    // B: by id, with nothing but the remote.
    b.add_remote(target);
    let out = b.dir.join("work");
    let checkout = b.ok(&["checkout", &s1, out.as_str()]);
    assert_eq!(checkout["snapshot"], s1.as_str());
    assert_eq!(
        tree_of(&out),
        tree_of(&proj),
        "B's checkout is A's project, byte for byte"
    );
    b.ok(&["fsck"]);

    // B's change goes back.
    std::fs::write(out.join("src/lib.rs"), "pub fn g() {}\n").unwrap();
    std::fs::write(out.join("NEW.txt"), "from B\n").unwrap();
    let s2 = id_of(
        &b.ok(&["snapshot", out.as_str(), "-m", "B's change"]),
        "snapshot",
    );
    let (code, set) = b.json(&["ref", "set", "main@origin", &s2, "--expect", &s1]);
    if target.conditional {
        assert_eq!(code, 0, "{set}");
        let pushed_b = b.ok(&["push", &s2]);
        assert_eq!(pushed_b["objects_sent"], 0, "ref set pushed it: {pushed_b}");
    } else {
        assert_eq!(code, 3, "{set}");
        assert!(
            set["error"]["message"].as_str().unwrap().contains("origin"),
            "{set}"
        );
        let pushed_b = b.ok(&["push", &s2]);
        // Only the change: two blobs, the trees above them and the snapshot.
        assert!(pushed_b["objects_sent"].as_u64() <= Some(8), "{pushed_b}");
    }

    // A pulls it.
    let pull_arg = if target.conditional {
        "main"
    } else {
        s2.as_str()
    };
    let pulled = a.ok(&["pull", pull_arg]);
    assert_eq!(pulled["pulled"][0], s2.as_str(), "{pulled}");
    assert!(
        pulled["objects_received"].as_u64() <= Some(8),
        "only the change: {pulled}"
    );
    let spec = if target.conditional {
        "main@origin".to_owned()
    } else {
        s2.clone()
    };
    let a_out = a.dir.join("from-b");
    a.ok(&["--offline", "checkout", &spec, a_out.as_str()]);
    assert_eq!(tree_of(&a_out), tree_of(&out), "A has B's change");
    let log = a.ok(&["log", &s2]);
    assert_eq!(log["snapshots"].as_array().map(Vec::len), Some(2), "{log}");

    if target.conditional {
        // A ref removed on the remote is gone from what a full pull saw there.
        b.ok(&["ref", "rm", "main@origin"]);
        let seen = a.ok(&["--offline", "ref", "list", "--remote", "origin"]);
        assert!(seen.to_string().contains("main@origin"), "{seen}");
        a.ok(&["pull"]);
        let seen = a.ok(&["--offline", "ref", "list", "--remote", "origin"]);
        assert!(!seen.to_string().contains("main@origin"), "{seen}");
    }
}

/// Both machines move one ref from the same value at once: exactly one wins, the other is
/// refused (exit 1) naming the ref and its value; on an engine that ignores conditions,
/// both are refused (exit 3) naming the remote.
pub fn race(target: &RemoteTarget, a: &Machine, b: &Machine) {
    for (m, seed) in [(a, "a"), (b, "b")] {
        let p = m.dir.join(format!("race-{seed}"));
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("who"), seed).unwrap();
        m.ok(&["onboard", p.as_str()]);
        if m.ok(&["remote", "list"])["remotes"]
            .as_array()
            .is_none_or(Vec::is_empty)
        {
            m.add_remote(target);
        }
    }
    let head = |m: &Machine, seed: &str| {
        let v = m.ok(&[
            "log",
            m.dir.join(format!("race-{seed}")).as_str(),
            "-n",
            "1",
        ]);
        v["snapshots"][0]["id"].as_str().unwrap().to_owned()
    };
    let (sa, sb) = (head(a, "a"), head(b, "b"));
    // Each pushes first, so both ref updates start from the same (absent) value at once.
    a.ok(&["push", &sa]);
    b.ok(&["push", &sb]);
    for round in 0..3 {
        let name = format!("race{round}@origin");
        let mut ca = a.command(&["--json", "ref", "set", &name, &sa]);
        let mut cb = b.command(&["--json", "ref", "set", &name, &sb]);
        for c in [&mut ca, &mut cb] {
            c.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
        }
        let (pa, pb) = (ca.spawn().unwrap(), cb.spawn().unwrap());
        let (oa, ob) = (
            pa.wait_with_output().unwrap(),
            pb.wait_with_output().unwrap(),
        );
        let code = |o: &Output| o.status.code().unwrap_or(-1);
        let body = |o: &Output| String::from_utf8_lossy(&o.stdout).into_owned();
        if !target.conditional {
            for o in [&oa, &ob] {
                assert_eq!(code(o), 3, "{}", body(o));
                assert!(body(o).contains("origin"), "{}", body(o));
            }
            continue;
        }
        let mut codes = [code(&oa), code(&ob)];
        codes.sort_unstable();
        assert_eq!(
            codes,
            [0, 1],
            "exactly one wins: {} / {}",
            body(&oa),
            body(&ob)
        );
        let (winner, loser) = if code(&oa) == 0 {
            (&sa, &ob)
        } else {
            (&sb, &oa)
        };
        let refused = body(loser);
        assert!(
            refused.contains(&format!("race{round}@origin")),
            "{refused}"
        );
        assert!(
            refused.contains(winner.as_str()),
            "names the value: {refused}"
        );
        let listed = a.ok(&["ref", "list", "--remote", "origin"]);
        let found = listed["refs"].as_array().unwrap().iter().any(|r| {
            r["name"] == format!("race{round}@origin") && r["snapshot"] == winner.as_str()
        });
        assert!(found, "{listed}");
    }
}

#[test]
fn two_machines_share_snapshots_through_a_folder_remote() {
    let env = crate::support::Env::new();
    let target = RemoteTarget {
        url: format!("file://{}", env.path().join("remote")),
        endpoint: None,
        env: Vec::new(),
        conditional: true,
    };
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    let b = Machine::new(env.path(), "b", Vec::new(), &target);
    two_machines(&target, &a, &b);
    race(&target, &a, &b);
}

#[test]
fn bad_remotes_are_clear_errors_naming_them() {
    let env = crate::support::Env::new();
    let target = RemoteTarget {
        url: format!("file://{}", env.path().join("remote")),
        endpoint: None,
        env: Vec::new(),
        conditional: true,
    };
    let m = Machine::new(env.path(), "m", Vec::new(), &target);
    let p = m.dir.join("p");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("f"), "x").unwrap();
    let s = id_of(&m.ok(&["onboard", p.as_str()]), "snapshot");

    let (code, v) = m.json(&["push", &s]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "unknown_remote");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("origin"),
        "{v}"
    );
    for (url, what) in [
        ("http://x/y", "http://x/y"),
        ("s3://B", "B"),
        ("file://rel", "rel"),
    ] {
        let (code, v) = m.json(&["remote", "add", "x", url]);
        assert_eq!(code, 2, "{url}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(what),
            "{v}"
        );
    }
    // Nothing listens there: exit 3 naming the remote, after bounded retries.
    let started = std::time::Instant::now();
    let (code, v) = m.json(&[
        "remote",
        "add",
        "nowhere",
        "s3://bucket",
        "--endpoint",
        "http://127.0.0.1:9",
    ]);
    assert_eq!(code, 3, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("nowhere"),
        "{v}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    assert_eq!(m.ok(&["remote", "list"])["remotes"], serde_json::json!([]));

    // Offline, an id the store lacks is unknown, and a remote ref is what was last seen.
    m.add_remote(&target);
    let (code, v) = m.json(&["--offline", "checkout", &"ab".repeat(32), "out"]);
    assert_eq!(code, 2, "{v}");
    let (code, v) = m.json(&["--offline", "log", "main@origin"]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("main"),
        "{v}"
    );
    // A full id on no remote is unknown, as without remotes.
    let (code, v) = m.json(&["checkout", &"cd".repeat(32), "out"]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("unknown_id")),
        "{v}"
    );
    let removed = m.ok(&["remote", "rm", "origin"]);
    assert_eq!(removed["remotes"][0]["name"], "origin");
}

#[test]
fn a_corrupted_pack_on_the_remote_is_refused_naming_the_id_and_nothing_is_kept() {
    let env = crate::support::Env::new();
    let target = RemoteTarget {
        url: format!("file://{}", env.path().join("remote")),
        endpoint: None,
        env: Vec::new(),
        conditional: true,
    };
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    let b = Machine::new(env.path(), "b", Vec::new(), &target);
    let p = a.dir.join("p");
    std::fs::create_dir_all(&p).unwrap();
    let mut noise = vec![0u8; 200_000];
    blake3::Hasher::new()
        .update(b"incompressible")
        .finalize_xof()
        .fill(&mut noise);
    std::fs::write(p.join("noise.bin"), &noise).unwrap();
    let s = id_of(&a.ok(&["onboard", p.as_str()]), "snapshot");
    a.add_remote(&target);
    a.ok(&["push", &s]);
    // Flip one byte of the file's bytes inside the pack on the remote's disk.
    let mut flipped = 0;
    for pack in std::fs::read_dir(env.path().join("remote/packs")).unwrap() {
        let path = pack.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        if let Some(at) = bytes.windows(64).position(|w| w == &noise[1000..1064]) {
            bytes[at + 10] ^= 0x01;
            std::fs::write(&path, bytes).unwrap();
            flipped += 1;
        }
    }
    assert_eq!(
        flipped, 1,
        "the file's bytes are in one pack, stored as they are"
    );
    b.add_remote(&target);
    let (code, v) = b.json(&["checkout", &s, "out"]);
    assert_eq!(code, 3, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    let blob = blake3::hash(&noise).to_hex().to_string();
    assert!(
        message.contains(&blob) && message.contains("origin"),
        "{message}"
    );
    assert!(!b.dir.join("out").join("noise.bin").exists());
    let (code, v) = b.json(&["--offline", "log", &s]);
    assert_eq!(code, 2, "nothing of it was kept: {v}");
}

#[test]
fn a_server_fetches_on_demand_for_every_client_at_once() {
    let env = crate::support::Env::new();
    let target = RemoteTarget {
        url: format!("file://{}", env.path().join("remote")),
        endpoint: None,
        env: Vec::new(),
        conditional: true,
    };
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    let b = Machine::new(env.path(), "b", Vec::new(), &target);
    let proj = a.dir.join("proj");
    project(&proj);
    let s = id_of(&a.ok(&["onboard", proj.as_str()]), "snapshot");
    a.add_remote(&target);
    a.ok(&["push", &s]);
    b.add_remote(&target);

    let mut server = b
        .command(&["serve"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let socket = cairn_client::Client::socket_of(&b.dir.join("store"));
    let started = std::time::Instant::now();
    while cairn_client::Client::connect(&socket).is_err() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "no server"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Four clients check the same remote snapshot out at once, through the server.
    let children: Vec<_> = (0..4)
        .map(|i| {
            b.command(&["--json", "checkout", &s, &format!("out{i}")])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(tree_of(&b.dir.join(format!("out{i}"))), tree_of(&proj));
    }
    let _ = server.kill();
    let _ = server.wait();
    b.ok(&["fsck"]);
    // Fetched once, into the store: the remote is no longer needed for it.
    std::fs::remove_dir_all(env.path().join("remote/packs")).unwrap();
    b.ok(&["checkout", &s, "again"]);
}

#[test]
fn remote_gc_keeps_what_refs_and_pins_reach_and_deletes_the_rest_after_the_grace() {
    let env = crate::support::Env::new();
    let target = RemoteTarget {
        url: format!("file://{}", env.path().join("remote")),
        endpoint: None,
        env: Vec::new(),
        conditional: true,
    };
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    let b = Machine::new(env.path(), "b", Vec::new(), &target);
    let snap = |m: &Machine, name: &str, content: &str| {
        let p = m.dir.join(name);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("f"), content).unwrap();
        id_of(&m.ok(&["onboard", p.as_str()]), "snapshot")
    };
    let kept = snap(&a, "kept", "kept by a ref");
    let pinned = snap(&a, "pinned", "kept by a pin");
    let dropped = snap(&a, "dropped", "kept by nothing");
    a.add_remote(&target);
    a.ok(&["ref", "set", "main@origin", &kept]);
    a.ok(&["push", &pinned]);
    a.ok(&["push", &dropped]);
    a.ok(&["ref", "rm", &format!("{dropped}@origin")]);
    let packs = || {
        std::fs::read_dir(env.path().join("remote/packs"))
            .unwrap()
            .count()
    };
    let before = packs();

    let dry = a.ok(&["gc", "--remote", "origin", "--grace", "0", "--dry-run"]);
    assert_eq!(dry["remote"]["packs_removed"], 2, "{dry}");
    assert_eq!(packs(), before, "a dry run deletes nothing");
    let held = a.ok(&["gc", "--remote", "origin"]);
    assert_eq!(held["remote"]["packs_condemned"], 2, "{held}");
    assert_eq!(held["remote"]["packs_removed"], 0, "{held}");
    let done = a.ok(&["gc", "--remote", "origin", "--grace", "0"]);
    assert_eq!(done["remote"]["packs_removed"], 2, "{done}");
    let removed = done["removed"].as_array().unwrap();
    assert!(removed.iter().all(|r| r["kind"] == "pack"), "{done}");
    for r in removed {
        let pack = r["id"].as_str().unwrap();
        assert!(
            !env.path().join("remote/packs").join(pack).exists(),
            "{pack} is gone"
        );
    }
    assert_eq!(removed.len(), 2, "{done}");
    assert!(done["bytes_freed"].as_u64() > Some(0), "{done}");
    assert_eq!(packs(), before - 2);

    b.add_remote(&target);
    b.ok(&["checkout", &kept, "kept"]);
    b.ok(&["checkout", &pinned, "pinned"]);
    let (code, v) = b.json(&["checkout", &dropped, "dropped"]);
    assert_eq!(code, 2, "{v}");
    let (code, v) = a.json(&["gc", "--grace", "1"]);
    assert_eq!(code, 2, "--grace is for --remote: {v}");
}

/// Attestations through a folder remote: a signed check made after a push travels with
/// the next push and a pull; a second store's `checks` and `log` see it with its signer;
/// an old remote (no `attestations/` folder) pulls as before; remote gc keeps it while the
/// snapshot is kept there and for the grace period after.
#[test]
fn attestations_travel_through_a_folder_remote() {
    let env = crate::support::Env::new();
    let folder = env.path().join("remote");
    let target = RemoteTarget {
        url: format!("file://{folder}"),
        endpoint: None,
        env: Vec::new(),
        conditional: true,
    };
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    let b = Machine::new(env.path(), "b", Vec::new(), &target);
    let proj = a.dir.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(proj.join("x.txt"), "x\n").unwrap();
    let snap = id_of(&a.ok(&["onboard", proj.as_str()]), "snapshot");
    a.add_remote(&target);
    b.add_remote(&target);
    a.ok(&["ref", "set", "main", &snap]);
    // Nothing verified yet: the remote has no attestations, and a pull works as before.
    assert_eq!(a.ok(&["push", "main"])["attestations_sent"], 0);
    assert!(!folder.join("attestations").exists());
    assert_eq!(b.ok(&["pull", "main"])["attestations_received"], 0);

    let keys = a.dir.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (key, _) = crate::verify_commands::ssh_key(&keys);
    let tests = a.ok(&[
        "verify",
        &snap,
        "--check",
        "tests",
        "--sign",
        key.as_str(),
        "--",
        "true",
    ]);
    // Verified after the push: the next push sends it.
    assert_eq!(a.ok(&["push", "main"])["attestations_sent"], 2);
    let tree = tests["tree"].as_str().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(folder.join("attestations").join(tree))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(names[0], tests["attestation"].as_str().unwrap());
    assert!(names[1].starts_with(&format!("{}.", names[0])), "{names:?}");

    // B has the snapshot already: the pull brings what is new of it.
    assert_eq!(b.ok(&["pull", "main"])["attestations_received"], 2);
    let listed = b.ok(&["checks", &snap]);
    assert_eq!(listed["checks"][0]["attestation"], tests["attestation"]);
    assert!(
        listed["checks"][0]["signed_by"]
            .as_str()
            .unwrap()
            .starts_with("SHA256:")
    );
    assert_eq!(
        b.ok(&["log", &snap])["snapshots"][0]["checks"][0]["check"],
        "tests"
    );
    // Nothing new: nothing comes.
    assert_eq!(b.ok(&["pull", "main"])["attestations_received"], 0);

    // Remote gc: kept while the ref keeps the snapshot; once nothing does, kept still
    // within the grace period (a push under way elsewhere may be about to need them), and
    // then removed with their signatures.
    let removed = |grace: &str| {
        let gc = a.ok(&["gc", "--remote", "origin", "--grace", grace]);
        gc["remote"]["attestations_removed"].as_u64().unwrap()
    };
    assert_eq!(removed("0"), 0);
    a.ok(&["ref", "rm", "main@origin"]);
    assert_eq!(removed("24"), 0);
    assert_eq!(
        std::fs::read_dir(folder.join("attestations").join(tree))
            .unwrap()
            .count(),
        2
    );
    assert_eq!(removed("0"), 1);
    let left = std::fs::read_dir(folder.join("attestations").join(tree))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(left, 0);
}
