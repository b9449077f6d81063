//! `cairn mount` of a snapshot only a remote holds (a `file://` remote here; the S3 engines
//! in network namespaces are `remote_engines.rs`'s): its trees come first, each file's
//! bytes when first read, by ranged reads of the packs, verified and kept; a failure is an
//! EIO naming the object and the remote in the server's log; `--offline`, `--prefetch`, a
//! killed server and commands that later need the files.

use std::io::Read;
use std::process::Command;
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};
use serde_json::Value;

use crate::remote_commands::{Machine, RemoteTarget, project, tree_of};

/// Machine A holds a project and pushed it (also as `main@origin`); machine B knows the
/// remote and nothing else. B's commands log every remote request.
struct Setup {
    env: crate::support::Env,
    a: Machine,
    b: Machine,
    proj: Utf8PathBuf,
    snap: String,
    mounts: Vec<Utf8PathBuf>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        for m in &self.mounts {
            let _ = self.b.run(&["unmount", m.as_str()]);
            let _ = Command::new("umount").args(["-l", m.as_str()]).output();
        }
    }
}

fn setup() -> Setup {
    let env = crate::support::Env::new();
    let target = RemoteTarget {
        url: format!("file://{}", env.path().join("remote")),
        endpoint: None,
        env: Vec::new(),
        conditional: true,
    };
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    let mut b = Machine::new(env.path(), "b", Vec::new(), &target);
    b.env.push((
        "RUST_LOG".to_owned(),
        "cairn::remote::request=debug,info".to_owned(),
    ));
    let proj = a.dir.join("proj");
    project(&proj);
    std::fs::write(proj.join("empty"), "").unwrap();
    // Incompressible, so its bytes lie in the pack as they are (the tamper test finds them).
    std::fs::write(proj.join("noise.bin"), noise()).unwrap();
    let snap = a.ok(&["onboard", proj.as_str()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    a.add_remote(&target);
    a.ok(&["push", &snap]);
    a.ok(&["ref", "set", "main@origin", &snap]);
    b.add_remote(&target);
    Setup {
        env,
        a,
        b,
        proj,
        snap,
        mounts: Vec::new(),
    }
}

fn noise() -> Vec<u8> {
    let mut noise = vec![0u8; 200_000];
    blake3::Hasher::new()
        .update(b"incompressible")
        .finalize_xof()
        .fill(&mut noise);
    noise
}

impl Setup {
    /// Mounts `snap` at `name` on B; its outcome.
    fn mount(&mut self, args: &[&str], name: &str) -> (Utf8PathBuf, Value) {
        let dir = self.b.dir.join(name);
        let mut all = vec!["mount"];
        all.extend_from_slice(args);
        all.push(dir.as_str());
        let out = self.b.ok(&all);
        self.mounts.push(dir.clone());
        (dir, out)
    }

    /// The server's log.
    fn log(&self) -> String {
        std::fs::read_to_string(self.b.dir.join("store/mounts/serve.log")).unwrap_or_default()
    }

    /// The ranged reads of packs the server's log shows: (pack, start, end).
    fn range_reads(&self) -> Vec<(String, u64, u64)> {
        let field = |line: &str, name: &str| -> String {
            let at = line.find(&format!("{name}=")).expect(name) + name.len() + 1;
            line[at..]
                .split(|c: char| c.is_whitespace())
                .next()
                .unwrap()
                .trim_matches('"')
                .to_owned()
        };
        strip_ansi(&self.log())
            .lines()
            .filter(|l| {
                l.contains("cairn::remote::request")
                    && l.contains("op=\"GET\"")
                    && l.contains(" start=")
            })
            .map(|l| {
                (
                    field(l, "key"),
                    field(l, "start").parse().unwrap(),
                    field(l, "end").parse().unwrap(),
                )
            })
            .collect()
    }

    /// B's fsck: must find nothing wrong; what it checked.
    fn fsck(&self) -> Value {
        self.b.ok(&["fsck"])["checked"].clone()
    }

    /// Whether B's store holds the file at `path` of the snapshot (read offline).
    fn stored(&self, path: &str) -> bool {
        let out = self
            .b
            .run(&["--offline", "show", &format!("{}:{path}", self.snap)]);
        out.status.success()
    }
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Every name under `dir`, looked at (as `find` does) but no file read.
fn find(dir: &Utf8Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = Utf8PathBuf::try_from(e.unwrap().path()).unwrap();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            n += 1;
            if meta.is_dir() {
                stack.push(path);
            }
        }
    }
    n
}

fn is_eio(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(5)
}

#[test]
fn a_remote_only_mount_reads_back_byte_identical_fetching_only_what_is_read() {
    let mut s = setup();
    let snap = s.snap.clone();
    let (m, out) = s.mount(&[&snap], "m");
    assert_eq!(out["snapshot"], snap.as_str(), "{out}");
    assert_eq!(out["remote"], "origin", "{out}");

    // Trees only: a whole walk of the names reads no file.
    assert!(find(&m) >= 10);
    let checked = s.fsck();
    assert_eq!(
        checked["blobs"], 1,
        "only the symlink's target, which a listing shows: {checked}"
    );
    assert!(checked["promised"].as_u64().unwrap() >= 6, "{checked}");
    assert!(!s.stored("README.md") && !s.stored("big.bin"));
    // gc keeps what is here and leaves the promised files to the remote.
    s.b.ok(&["gc"]);
    assert_eq!(s.fsck()["blobs"], 1);

    // One file read: one request, for its payload; the large file's bytes stay remote.
    let before = s.range_reads().len();
    assert_eq!(
        std::fs::read(m.join("README.md")).unwrap(),
        std::fs::read(s.proj.join("README.md")).unwrap()
    );
    let reads = s.range_reads();
    assert_eq!(reads.len(), before + 1, "{reads:?}");
    assert!(s.stored("README.md"));
    assert!(!s.stored("big.bin") && !s.stored("noise.bin"));
    // Read again: from the store.
    std::fs::read(m.join("README.md")).unwrap();
    assert_eq!(s.range_reads().len(), before + 1);

    // Everything, byte for byte (a file over a chunk, an empty one, a symlink, modes).
    assert_eq!(tree_of(&m), tree_of(&s.proj));
    let checked = s.fsck();
    assert!(checked.get("promised").is_none(), "{checked}");

    // By NAME@REMOTE too.
    let (m2, out) = s.mount(&["main@origin"], "m2");
    assert_eq!(out["snapshot"], snap.as_str(), "{out}");
    assert_eq!(tree_of(&m2), tree_of(&s.proj));
    s.fsck();
}

#[test]
fn two_readers_of_one_large_file_make_one_request_per_range() {
    let mut s = setup();
    let snap = s.snap.clone();
    let (m, _) = s.mount(&[&snap], "m");
    let before = s.range_reads().len();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let path = m.join("big.bin");
            std::thread::spawn(move || std::fs::read(path).unwrap())
        })
        .collect();
    let expected = std::fs::read(s.proj.join("big.bin")).unwrap();
    for r in readers {
        assert!(r.join().unwrap() == expected);
    }
    let reads: Vec<_> = s.range_reads().split_off(before);
    // Its chunk list and its three chunks, each once.
    assert!(reads.len() >= 4, "{reads:?}");
    let mut distinct = reads.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), reads.len(), "a range read twice: {reads:?}");
    // The whole blob is recorded once its chunks are stored.
    let started = Instant::now();
    while !s.stored("big.bin") {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "big.bin not recorded"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    s.fsck();
}

#[test]
fn a_tampered_pack_gives_eio_naming_the_object_and_stores_nothing() {
    let mut s = setup();
    let noise = noise();
    let mut flipped = 0;
    for pack in std::fs::read_dir(s.env.path().join("remote/packs")).unwrap() {
        let path = pack.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        if let Some(at) = bytes.windows(64).position(|w| w == &noise[1000..1064]) {
            bytes[at + 10] ^= 0x01;
            std::fs::write(&path, bytes).unwrap();
            flipped += 1;
        }
    }
    assert_eq!(flipped, 1);
    let snap = s.snap.clone();
    let (m, _) = s.mount(&[&snap], "m");
    let err = std::fs::read(m.join("noise.bin")).unwrap_err();
    assert!(is_eio(&err), "{err}");
    let blob = blake3::hash(&noise).to_hex().to_string();
    let log = s.log();
    assert!(
        log.lines()
            .any(|l| l.contains("WARN") && l.contains(&blob) && l.contains("origin")),
        "{log}"
    );
    assert!(!s.stored("noise.bin"));
    // The rest still reads, and the next read of it tries again (and fails again).
    assert_eq!(
        std::fs::read(m.join("src/lib.rs")).unwrap(),
        std::fs::read(s.proj.join("src/lib.rs")).unwrap()
    );
    assert!(is_eio(&std::fs::read(m.join("noise.bin")).unwrap_err()));
    s.fsck();
}

#[test]
fn an_unreachable_remote_gives_eio_and_reads_work_again_once_it_is_back() {
    let mut s = setup();
    let snap = s.snap.clone();
    let (m, _) = s.mount(&[&snap], "m");
    assert!(std::fs::read(m.join("README.md")).is_ok());
    let remote = s.env.path().join("remote");
    let away = s.env.path().join("away");
    std::fs::rename(&remote, &away).unwrap();
    let err = std::fs::read(m.join("noise.bin")).unwrap_err();
    assert!(is_eio(&err), "{err}");
    assert!(
        s.log()
            .lines()
            .any(|l| l.contains("WARN") && l.contains("origin"))
    );
    // What was fetched keeps working.
    assert!(std::fs::read(m.join("README.md")).is_ok());
    std::fs::rename(&away, &remote).unwrap();
    assert_eq!(std::fs::read(m.join("noise.bin")).unwrap(), noise());
    s.fsck();
}

#[test]
fn offline_a_mount_serves_only_what_the_store_holds() {
    let mut s = setup();
    let snap = s.snap.clone();
    let dir = s.b.dir.join("m");
    let (code, v) = s.b.json(&["--offline", "mount", &snap, dir.as_str()]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "offline", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains(&snap),
        "{v}"
    );
    assert!(
        s.range_reads().is_empty(),
        "nothing was asked of the remote"
    );

    let (m, _) = s.mount(&[&snap], "m");
    assert!(std::fs::read(m.join("README.md")).is_ok());
    s.b.ok(&["unmount", m.as_str()]);
    let out = s.b.ok(&["--offline", "mount", m.as_str()]);
    assert_eq!(out["remote"], "origin", "{out}");
    assert!(std::fs::read(m.join("README.md")).is_ok());
    let err = std::fs::read(m.join("noise.bin")).unwrap_err();
    assert!(is_eio(&err), "{err}");
    assert!(
        s.log()
            .lines()
            .any(|l| l.contains("WARN") && l.contains("offline")),
        "{}",
        s.log()
    );
}

#[test]
fn prefetch_fetches_the_rest_in_the_background_to_a_whole_store() {
    let mut s = setup();
    let snap = s.snap.clone();
    let (m, _) = s.mount(&[&snap, "--prefetch"], "m");
    let started = Instant::now();
    let item = loop {
        let list = s.b.ok(&["worktree", "list"]);
        let item = list["worktrees"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["path"] == m.as_str())
            .cloned()
            .unwrap();
        if item["prefetch"]["ended"] == true {
            break item;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{item}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let p = &item["prefetch"];
    assert_eq!(item["remote"], "origin", "{item}");
    assert!(p["objects_total"].as_u64().unwrap() >= 6, "{p}");
    assert_eq!(p["objects_done"], p["objects_total"], "{p}");
    assert_eq!(p["bytes_done"], p["bytes_total"], "{p}");
    let checked = s.fsck();
    assert!(checked.get("promised").is_none(), "whole: {checked}");
    assert!(s.stored("big.bin") && s.stored("noise.bin"));
    assert!(s.log().contains("prefetch"));
    // The remote is no longer needed.
    std::fs::remove_dir_all(s.env.path().join("remote/packs")).unwrap();
    assert_eq!(tree_of(&m), tree_of(&s.proj));
}

/// Kills B's mount server with SIGKILL and waits until the mount at `m` is gone.
fn kill_server(s: &Setup, m: &Utf8Path) {
    let pids = String::from_utf8(
        Command::new("pgrep")
            .args([
                "-f",
                "--",
                &format!("--store {} serve --for-mounts", s.b.dir.join("store")),
            ])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let pid = pids.split_whitespace().next().expect("the mount's server");
    assert!(
        Command::new("kill")
            .args(["-KILL", pid])
            .status()
            .unwrap()
            .success()
    );
    let started = Instant::now();
    while rustix::fs::statfs(m.as_std_path()).is_ok() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the mount lives"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_killed_server_leaves_a_clean_store_and_the_mount_reads_lazily_when_attached_again() {
    let mut s = setup();
    let snap = s.snap.clone();
    let (m, _) = s.mount(&[&snap], "m");
    let mut f = std::fs::File::open(m.join("big.bin")).unwrap();
    let mut first = vec![0; 100];
    f.read_exact(&mut first).unwrap();
    drop(f);
    kill_server(&s, &m);
    let checked = s.fsck();
    assert!(checked["promised"].as_u64().unwrap() >= 1, "{checked}");
    let out = s.b.ok(&["mount", m.as_str()]);
    assert_eq!(out["remote"], "origin", "{out}");
    assert_eq!(tree_of(&m), tree_of(&s.proj));
    s.fsck();
}

#[test]
fn writes_in_a_lazy_mount_stay_in_its_layer() {
    let mut s = setup();
    let snap = s.snap.clone();
    let (m, _) = s.mount(&[&snap], "m");
    assert!(
        !s.stored("src/lib.rs"),
        "read from the remote only when first used"
    );
    // Appending copies the file up: its bytes are fetched first.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(m.join("src/lib.rs"))
        .unwrap();
    std::io::Write::write_all(&mut f, b"// more\n").unwrap();
    drop(f);
    let mut expected = std::fs::read(s.proj.join("src/lib.rs")).unwrap();
    expected.extend_from_slice(b"// more\n");
    assert_eq!(std::fs::read(m.join("src/lib.rs")).unwrap(), expected);
    let shown = s.b.run(&["show", &format!("{snap}:src/lib.rs")]);
    assert_eq!(
        shown.stdout,
        std::fs::read(s.proj.join("src/lib.rs")).unwrap()
    );
    let status = s.b.ok(&["status", m.as_str()]);
    assert!(status.to_string().contains("src/lib.rs"), "{status}");
    // A's project is untouched, and the snapshot on the remote too.
    assert_eq!(tree_of(&s.proj), tree_of(&s.a.dir.join("proj")));
}

#[test]
fn a_checkout_of_a_lazily_mounted_snapshot_fetches_what_the_store_lacks() {
    let mut s = setup();
    let snap = s.snap.clone();
    let (_m, _) = s.mount(&[&snap], "m");
    assert!(!s.stored("big.bin"));
    let out = s.b.dir.join("out");
    s.b.ok(&["checkout", &snap, out.as_str()]);
    assert_eq!(tree_of(&out), tree_of(&s.proj));
    let checked = s.fsck();
    assert!(checked.get("promised").is_none(), "{checked}");
}

#[test]
fn verify_of_a_remote_ref_the_store_never_saw_reads_only_what_its_check_reads() {
    let s = setup();
    let tmp = s.b.dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    // B's server runs: verify's view is a mount it serves.
    let mut server =
        s.b.command(&["serve"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
    let socket = cairn_client::Client::socket_of(&s.b.dir.join("store"));
    let started = Instant::now();
    while cairn_client::Client::connect(&socket).is_err() {
        assert!(started.elapsed() < Duration::from_secs(20), "no server");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out =
        s.b.command(&[
            "--json",
            "verify",
            "main@origin",
            "--check",
            "readme",
            "--",
            "cat",
            "README.md",
        ])
        .env("TMPDIR", tmp.as_str())
        .output()
        .unwrap();
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{answer}");
    assert_eq!(answer["view"], "mount", "{answer}");
    assert_eq!(answer["snapshot"], s.snap.as_str(), "{answer}");
    assert!(s.stored("README.md"));
    assert!(!s.stored("big.bin"), "only what the check read");
    s.fsck();
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn a_server_killed_during_a_prefetch_leaves_a_clean_store() {
    let mut s = setup();
    // Enough incompressible files that the prefetch takes several groups (it may still
    // end before the kill lands: the store is clean either way).
    let more = s.a.dir.join("more");
    std::fs::create_dir_all(&more).unwrap();
    for i in 0..40u32 {
        let mut bytes = vec![0u8; 400_000];
        blake3::Hasher::new()
            .update(&i.to_le_bytes())
            .finalize_xof()
            .fill(&mut bytes);
        std::fs::write(more.join(format!("f{i}.bin")), bytes).unwrap();
    }
    let snap = s.a.ok(&["onboard", more.as_str()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    s.a.ok(&["push", &snap]);
    let (m, _) = s.mount(&[&snap, "--prefetch"], "m");
    kill_server(&s, &m);
    s.fsck();
    let out = s.b.ok(&["mount", m.as_str()]);
    assert_eq!(out["remote"], "origin", "{out}");
    assert_eq!(tree_of(&m), tree_of(&more));
    let checked = s.fsck();
    assert!(checked.get("promised").is_none(), "{checked}");
}

#[test]
fn a_sequential_read_of_a_large_file_reads_ahead_a_few_chunks_not_the_whole_file() {
    let mut s = setup();
    let dir = s.a.dir.join("large");
    std::fs::create_dir_all(&dir).unwrap();
    let mut bytes = vec![0u8; 12 << 20];
    blake3::Hasher::new()
        .update(b"large")
        .finalize_xof()
        .fill(&mut bytes);
    std::fs::write(dir.join("large.bin"), &bytes).unwrap();
    let snap = s.a.ok(&["onboard", dir.as_str()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    s.a.ok(&["push", &snap]);
    let (m, _) = s.mount(&[&snap], "m");
    let before = s.range_reads().len();
    // The first two chunks, in order.
    let mut f = std::fs::File::open(m.join("large.bin")).unwrap();
    let mut head = vec![0u8; 2 << 20];
    f.read_exact(&mut head).unwrap();
    assert!(head == bytes[..2 << 20]);
    drop(f);
    // The read-ahead runs in the background: wait for it to settle.
    let mut seen = 0;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(200));
        let now = s.range_reads().len() - before;
        if now == seen && now >= 7 {
            break;
        }
        seen = now;
    }
    let reads = s.range_reads().split_off(before);
    // The chunk list, the two chunks read (the kernel's own read-ahead may ask for the
    // third) and the next four; never all twelve.
    assert!(reads.len() > 6, "no read-ahead: {reads:?}");
    assert!(reads.len() < 1 + 12, "the whole file was read: {reads:?}");
    assert_eq!(std::fs::read(m.join("large.bin")).unwrap(), bytes);
}

/// A deep tree costs a round trip per pack its trees lie in, not one per level: the first
/// time the walk needs a tree of a pack, the other trees of that pack come in the same read.
#[test]
fn the_trees_of_a_deep_snapshot_come_in_a_few_reads_not_one_per_level() {
    let mut s = setup();
    let mut dir = s.a.dir.join("deep");
    let top = dir.clone();
    for level in 0..16 {
        dir = dir.join(format!("d{level}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f"), format!("level {level}\n")).unwrap();
        std::fs::create_dir_all(dir.join(format!("side{level}"))).unwrap();
        std::fs::write(
            dir.join(format!("side{level}/g")),
            format!("side {level}\n"),
        )
        .unwrap();
    }
    let snap = s.a.ok(&["onboard", top.as_str()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    s.a.ok(&["push", &snap]);
    let before = s.range_reads().len();
    let (m, _) = s.mount(&[&snap], "deep");
    let reads = s.range_reads()[before..].to_vec();
    // The snapshot, then its root tree with every other tree of the push's pack.
    assert!(
        reads.len() <= 3,
        "{} reads for 33 trees: {reads:?}",
        reads.len()
    );
    assert_eq!(find(&m), 64, "every name is listed");
    assert_eq!(
        s.range_reads().len(),
        before + reads.len(),
        "a listing reads no more"
    );
    // Nothing of the read-ahead is kept but the trees the snapshot reaches.
    let checked = s.fsck();
    assert_eq!(checked["trees"], 33, "{checked}");
    assert_eq!(tree_of(&m), tree_of(&top));
}
