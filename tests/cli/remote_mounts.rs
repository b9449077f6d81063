//! Mounts of snapshots only a remote holds, on the SeaweedFS cluster, each machine in its
//! own network namespace with added latency to the engines: a mount reads back what was
//! pushed, fetching only what is read (counted in the requests the mount's server logs
//! under `cairn::remote::request`, and in the store's blobs); a gateway killed mid-read and
//! a tampered pack give EIO; `--prefetch` completes the store. Then the fleet: verifiers on
//! other machines check a pushed snapshot in lazily fetched views, push their signed
//! attestations, and the machine that pushed merges once it pulls them.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};
// The tracing target of every request to a remote: at `debug` each is one log line.
use remote::REQUESTS;
use serde_json::Value;

use crate::engines::{ACCESS_KEY, Hosts, SECRET_KEY, Seaweed, rclone, read_key, write_key};
use crate::remote_commands::{Machine, tree_of};
use crate::remote_engines::s3_target;

/// Milliseconds added to each round trip between a reading machine and the engines.
const LATENCY_MS: u32 = 20;

/// One SeaweedFS cluster, machines in namespaces, and a folder for their stores.
struct Site {
    hosts: Hosts,
    cluster: Seaweed,
    bucket: &'static str,
    tmp: tempfile::TempDir,
}

impl Site {
    fn start(machines: usize, bucket: &'static str) -> Site {
        let hosts = Hosts::new(machines);
        let cluster = Seaweed::start(hosts.server_ip());
        cluster.create_bucket(bucket);
        Site {
            hosts,
            cluster,
            bucket,
            tmp: tempfile::tempdir().unwrap(),
        }
    }

    fn root(&self) -> &Utf8Path {
        Utf8Path::from_path(self.tmp.path()).unwrap()
    }

    /// Machine `i` with `origin` added, reached `latency` ms further away, its remote
    /// requests logged; its commands run with this host's mounts (so its FUSE mounts are
    /// seen here).
    fn machine(&mut self, i: usize, name: &str, latency: u32) -> Machine {
        let endpoint = if latency == 0 {
            self.cluster.endpoint()
        } else {
            self.hosts.delayed(i, latency, &self.cluster.endpoint())
        };
        let target = s3_target(&endpoint, self.bucket, true);
        let mut m = Machine::new(self.root(), name, self.hosts.net_prefix(i), &target);
        m.env
            .push(("RUST_LOG".into(), format!("warn,{REQUESTS}=debug")));
        m.ok(&["init"]);
        m.add_remote(&target);
        m
    }
}

/// Incompressible bytes named by `seed`.
fn noise(seed: &str, len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    blake3::Hasher::new()
        .update(seed.as_bytes())
        .finalize_xof()
        .fill(&mut bytes);
    bytes
}

/// A blob's id: the BLAKE3 of its bytes.
fn blob_id(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// The log of the server a machine's mount started.
fn serve_log(m: &Machine) -> Utf8PathBuf {
    m.dir.join("store/mounts/serve.log")
}

/// The remote requests logged in `log` so far.
fn requests(log: &Utf8Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(REQUESTS))
        .map(str::to_owned)
        .collect()
}

/// The requests of `log` past the first `from`: reads of packs.
fn pack_reads(log: &Utf8Path, from: usize) -> Vec<String> {
    requests(log)
        .into_iter()
        .skip(from)
        .filter(|l| l.contains("GET") && l.contains("packs/"))
        .collect()
}

/// A request line's byte range (`start=S … end=E`), if it names one.
fn range_of(line: &str) -> Option<(u64, u64)> {
    let re = regex::Regex::new(r"\bstart=(\d+)\b.*\bend=(\d+)\b").unwrap();
    let c = re.captures(line)?;
    Some((c[1].parse().ok()?, c[2].parse().ok()?))
}

/// The blobs `m`'s store holds, as `fsck` counts them (a blob known to be on a remote
/// is not held).
fn blobs_held(m: &Machine) -> u64 {
    m.ok(&["fsck"])["checked"]["blobs"].as_u64().unwrap()
}

/// True if `m`'s store holds the file `path` of `snap`'s bytes (nothing is fetched).
fn holds(m: &Machine, snap: &str, path: &str) -> bool {
    m.run(&["--offline", "show", &format!("{snap}:{path}")])
        .status
        .success()
}

/// Unmounts what a test mounted on a machine, whatever happened.
struct Mounted<'a> {
    machine: &'a Machine,
    dir: Utf8PathBuf,
}

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        let _ = self.machine.run(&["unmount", self.dir.as_str()]);
        let _ = Command::new("umount")
            .args(["-l", self.dir.as_str()])
            .output();
    }
}

fn mount<'a>(m: &'a Machine, snap: &str, dir: &Utf8Path, extra: &[&str]) -> (Mounted<'a>, Value) {
    let mut args = vec!["mount", snap, dir.as_str()];
    args.extend_from_slice(extra);
    let v = m.ok(&args);
    assert_eq!(v["worktree"], dir.as_str(), "{v}");
    (
        Mounted {
            machine: m,
            dir: dir.to_owned(),
        },
        v,
    )
}

/// A project: the shared test project's nested folders, executable, symlink and chunked
/// file, plus incompressible files (each its own payload in a pack), a file of several
/// chunks, and an empty file.
fn lazy_project(m: &Machine, name: &str) -> Utf8PathBuf {
    let p = m.dir.join(name);
    crate::remote_commands::project(&p);
    std::fs::create_dir_all(p.join("noise")).unwrap();
    for i in 0..4 {
        std::fs::write(
            p.join(format!("noise/n{i}.bin")),
            noise(&format!("{name}-n{i}"), 200_000),
        )
        .unwrap();
    }
    std::fs::create_dir_all(p.join("large")).unwrap();
    std::fs::write(
        p.join("large/six.bin"),
        noise(&format!("{name}-six"), 6 << 20),
    )
    .unwrap();
    std::fs::write(p.join("empty"), b"").unwrap();
    p
}

/// Reads `rel` under each of `roots` at once, each from its own thread; each one's bytes.
fn read_at_once(roots: &[&Utf8Path], rel: &str) -> Vec<Vec<u8>> {
    let barrier = std::sync::Barrier::new(roots.len());
    std::thread::scope(|s| {
        let readers: Vec<_> = roots
            .iter()
            .map(|root| {
                let path = root.join(rel);
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    })
}

/// Waits until `done` is `Ok` (60 s at most), polling; its last `Err` says how far it got.
fn wait_until(what: &str, mut done: impl FnMut() -> Result<(), String>) {
    let started = Instant::now();
    while let Err(why) = done() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{what}: not in 60 s: {why}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_remote_only_mount_over_a_slow_link_reads_back_the_source_fetching_only_what_is_read() {
    let mut site = Site::start(3, "cairn-lazy");
    let a = site.machine(0, "a", 0);
    let b = site.machine(1, "b", LATENCY_MS);
    let c = site.machine(2, "c", LATENCY_MS);
    let source = lazy_project(&a, "proj");
    let snap = a.ok(&["onboard", source.as_str()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    a.ok(&["ref", "set", "proj", &snap]);
    a.ok(&["push", "proj"]);

    // B has never seen the snapshot: mounted by its remote name, it is there at once,
    // its trees whole, no file's bytes fetched.
    let m = b.dir.join("m");
    let (_mounted, v) = mount(&b, "proj@origin", &m, &[]);
    assert_eq!(v["snapshot"], snap.as_str(), "{v}");
    let log = serve_log(&b);
    let listed = Command::new("find").arg(m.as_str()).output().unwrap();
    assert!(listed.status.success());
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("/src/deep/er/data.txt"), "{listed}");
    // (A symlink's target may come with the listing: it is the link's size.)
    let files: Vec<String> = tree_of(&source).into_keys().collect();
    let held: Vec<&String> = files
        .iter()
        .filter(|f| *f != "link" && holds(&b, &snap, f))
        .collect();
    assert_eq!(held, Vec::<&String>::new(), "a listing fetches no file");
    let listed_blobs = blobs_held(&b);
    let partial = b.ok(&["fsck"]);
    assert!(
        partial["checked"]["promised"].as_u64() > Some(10),
        "the files are known to be on the remote: {partial}"
    );
    assert!(listed_blobs <= 1, "{listed_blobs} blobs after a listing");

    // One file read: one ranged read of a pack, that file's blob alone stored.
    let before = requests(&log).len();
    let n0 = std::fs::read(m.join("noise/n0.bin")).unwrap();
    assert_eq!(n0, std::fs::read(source.join("noise/n0.bin")).unwrap());
    let reads = pack_reads(&log, before);
    assert_eq!(reads.len(), 1, "one request for one small file: {reads:#?}");
    let (start, end) = range_of(&reads[0]).expect("a ranged read");
    assert!(
        (200_000..201_024).contains(&(end - start)),
        "that file's range of the pack: {reads:#?}"
    );
    assert_eq!(
        blobs_held(&b),
        listed_blobs + 1,
        "that file's blob and no other"
    );
    assert!(holds(&b, &snap, "noise/n0.bin"));
    assert!(!holds(&b, &snap, "noise/n1.bin"));

    // Two readers of one file at once, through two mounts of the snapshot (one server):
    // one request. (Through one mount the kernel's page cache would make them one read.)
    let m2 = b.dir.join("m2");
    let (_mounted2, v) = mount(&b, &snap, &m2, &[]);
    assert_eq!(v["snapshot"], snap.as_str(), "{v}");
    let before = requests(&log).len();
    let expected = std::fs::read(source.join("noise/n1.bin")).unwrap();
    for got in read_at_once(&[&m, &m2], "noise/n1.bin") {
        assert_eq!(got, expected);
    }
    let reads = pack_reads(&log, before);
    assert_eq!(reads.len(), 1, "two readers, one fetch: {reads:#?}");

    // Two readers of a file of six chunks at once: no range read twice, and about the
    // file's bytes in all.
    let before = requests(&log).len();
    let expected = std::fs::read(source.join("large/six.bin")).unwrap();
    for got in read_at_once(&[&m, &m2], "large/six.bin") {
        assert_eq!(got, expected);
    }
    let reads = pack_reads(&log, before);
    let mut ranges: Vec<(u64, u64)> = reads
        .iter()
        .map(|l| range_of(l).unwrap_or_else(|| panic!("no range in {l}")))
        .collect();
    let fetched: u64 = ranges.iter().map(|(s, e)| e - s).sum();
    ranges.sort();
    let distinct = {
        let mut d = ranges.clone();
        d.dedup();
        d.len()
    };
    assert_eq!(distinct, ranges.len(), "a range read twice: {reads:#?}");
    eprintln!(
        "two readers of {} bytes in {} chunks: {} ranged reads, {fetched} bytes",
        expected.len(),
        expected.len().div_ceil(cas::CHUNK_BYTES),
        reads.len()
    );
    assert!(
        fetched < expected.len() as u64 + (256 << 10),
        "{fetched} bytes fetched for a file of {}",
        expected.len()
    );

    // The whole mount reads back the source, byte for byte, modes and links too.
    assert_eq!(tree_of(&m), tree_of(&source));
    b.ok(&["fsck"]);

    // C mounts by full id with --prefetch: the rest comes in the background (`worktree
    // list` shows how far) until the store is whole, nothing promised, every blob there
    // (what A's store holds), and checks out offline.
    let mc = c.dir.join("m");
    let (_prefetched, v) = mount(&c, &snap, &mc, &["--prefetch"]);
    assert_eq!(v["snapshot"], snap.as_str(), "{v}");
    assert_eq!(v["remote"], "origin", "{v}");
    wait_until("the prefetch ends", || {
        let listed = c.ok(&["worktree", "list"]);
        let item = listed["worktrees"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["path"] == mc.as_str())
            .cloned()
            .unwrap_or_else(|| panic!("the mount is listed: {listed}"));
        let p = &item["prefetch"];
        (p["ended"] == true).then_some(()).ok_or(item.to_string())
    });
    let fsck = c.ok(&["fsck"]);
    assert_eq!(fsck["problems"], serde_json::json!([]), "{fsck}");
    assert_eq!(fsck["checked"]["promised"], Value::Null, "whole: {fsck}");
    assert_eq!(fsck["checked"]["blobs"], blobs_held(&a), "{fsck}");
    let out = c.dir.join("out");
    c.ok(&["--offline", "checkout", &snap, out.as_str()]);
    assert_eq!(tree_of(&out), tree_of(&source));
    assert!(
        pack_reads(&serve_log(&c), 0).len() > 1,
        "the prefetch read the packs"
    );
}

/// The packs of the remote and the first one holding `needle`, with where.
fn pack_holding(site: &Site, needle: &[u8]) -> (String, Vec<u8>, usize) {
    let endpoint = site.cluster.endpoint();
    let packs = format!("eng:{}/team/packs", site.bucket);
    let out = rclone(&endpoint, ACCESS_KEY, SECRET_KEY)
        .args(["lsf", &packs])
        .output()
        .unwrap();
    for name in String::from_utf8_lossy(&out.stdout).lines() {
        let key = format!("{packs}/{name}");
        let bytes = read_key(&endpoint, &key);
        if let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) {
            return (key, bytes, at);
        }
    }
    panic!("no pack holds the file's bytes")
}

#[test]
fn a_killed_gateway_and_a_tampered_pack_give_eio_and_store_nothing_wrong() {
    let mut site = Site::start(2, "cairn-lazy-faults");
    let a = site.machine(0, "a", 0);
    let b = site.machine(1, "b", LATENCY_MS);
    let source = a.dir.join("proj");
    std::fs::create_dir_all(&source).unwrap();
    let stream = noise("stream", 24 << 20);
    let tampered = noise("tampered", 300_000);
    let fine = noise("fine", 200_000);
    let second = noise("second", 32 << 20);
    std::fs::write(source.join("stream.bin"), &stream).unwrap();
    std::fs::write(source.join("second.bin"), &second).unwrap();
    std::fs::write(source.join("tampered.bin"), &tampered).unwrap();
    std::fs::write(source.join("fine.bin"), &fine).unwrap();
    let snap = a.ok(&["onboard", source.as_str()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    a.ok(&["push", &snap]);
    let m = b.dir.join("m");
    let (_mounted, _) = mount(&b, &snap, &m, &[]);
    let log = serve_log(&b);

    // A pack rewritten on the engine (one byte of the file's payload): the read is EIO,
    // the log names the object and the remote, nothing of it is stored; other files read.
    let (key, mut bytes, at) = pack_holding(&site, &tampered[1000..1064]);
    bytes[at + 7] ^= 0x20;
    write_key(&site.cluster.endpoint(), &key, &bytes);
    assert_eio(
        std::fs::read(m.join("tampered.bin")).map(drop),
        "the tampered file",
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    let named = logged
        .lines()
        .find(|l| l.contains(&blob_id(&tampered)))
        .unwrap_or_else(|| panic!("no log line names the object:\n{logged}"));
    assert!(named.contains("origin"), "names the remote: {named}");
    assert!(!holds(&b, &snap, "tampered.bin"), "nothing of it stored");
    assert_eq!(std::fs::read(m.join("fine.bin")).unwrap(), fine);

    // The gateway killed mid-read: the read fails with EIO; what was fetched still reads;
    // with the gateway back, the file reads whole.
    let before = requests(&log).len();
    let mut file = std::fs::File::open(m.join("stream.bin")).unwrap();
    let mut head = vec![0u8; 2 << 20];
    file.read_exact(&mut head).unwrap();
    assert_eq!(head, stream[..head.len()]);
    // A sequential read fetches ahead a few chunks, not the whole file.
    let chunks = stream.len() / cas::CHUNK_BYTES;
    let reads = pack_reads(&log, before);
    assert!(
        reads.len() < chunks / 2,
        "{} requests for 2 of {chunks} chunks: {reads:#?}",
        reads.len()
    );
    let logged_before = std::fs::read_to_string(&log).unwrap().len();
    site.cluster.kill_s3();
    let mut rest = Vec::new();
    assert_eio(
        file.read_to_end(&mut rest).map(drop),
        "the rest, the gateway gone",
    );
    // The log names the remote and the piece that failed: the file or one of its chunks.
    let pieces: Vec<String> = std::iter::once(blob_id(&stream))
        .chain(stream.chunks(cas::CHUNK_BYTES).map(blob_id))
        .collect();
    let logged = std::fs::read_to_string(&log).unwrap()[logged_before..].to_owned();
    assert!(
        logged
            .lines()
            .any(|l| l.contains("origin") && pieces.iter().any(|p| l.contains(p.as_str()))),
        "no log line names the remote and the object:\n{logged}"
    );
    assert_eq!(std::fs::read(m.join("fine.bin")).unwrap(), fine);
    site.cluster.restart_s3();
    assert_eq!(std::fs::read(m.join("stream.bin")).unwrap(), stream);
    let fsck = b.ok(&["fsck"]);
    assert_eq!(fsck["problems"], serde_json::json!([]), "{fsck}");

    // The mount's server killed (-9) while a read's requests are in flight: the store
    // stays clean, and the mount attached again reads the file lazily.
    let before = requests(&log).len();
    let reading = {
        let path = m.join("second.bin");
        std::thread::spawn(move || std::fs::read(&path).map(|b| b.len()))
    };
    wait_until("the read's first request", || {
        (pack_reads(&log, before).len() > 1)
            .then_some(())
            .ok_or("no request yet".into())
    });
    kill_mount_server(&b);
    let cut = reading.join().unwrap();
    assert!(
        cut.as_ref().is_err() || cut.as_ref().is_ok_and(|n| *n < second.len()),
        "the read ended with its server: {cut:?}"
    );
    wait_until(
        "the mount dies with its server",
        || match rustix::fs::statfs(m.as_std_path()) {
            Ok(_) => Err("still mounted".into()),
            Err(_) => Ok(()),
        },
    );
    let fsck = b.ok(&["fsck"]);
    assert_eq!(fsck["problems"], serde_json::json!([]), "{fsck}");
    assert!(fsck["checked"]["promised"].as_u64() >= Some(1), "{fsck}");
    let attached = b.ok(&["mount", m.as_str()]);
    assert_eq!(attached["remote"], "origin", "{attached}");
    assert_eq!(std::fs::read(m.join("second.bin")).unwrap(), second);
    assert!(!holds(&b, &snap, "tampered.bin"));
    b.ok(&["fsck"]);
}

/// SIGKILL to the server `m`'s mounts started.
fn kill_mount_server(m: &Machine) {
    let pattern = format!("--store {} serve --for-mounts", m.dir.join("store"));
    let out = Command::new("pgrep")
        .args(["-f", "--", &pattern])
        .output()
        .unwrap();
    let pids = String::from_utf8_lossy(&out.stdout);
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

/// `result` is the error EIO.
fn assert_eio(result: std::io::Result<()>, what: &str) {
    match result {
        Ok(()) => panic!("{what}: read, where EIO was due"),
        Err(e) => assert_eq!(e.raw_os_error(), Some(EIO), "{what}: {e}"),
    }
}

/// `errno` EIO.
const EIO: i32 = 5;

/// A git repository with a small project and tests, onboarded: its snapshot; and an
/// agent's change to it, snapshotted: (base, change).
fn task(a: &Machine) -> (Utf8PathBuf, String, String) {
    let repo = a.dir.join("repo");
    std::fs::create_dir_all(repo.join("assets")).unwrap();
    std::fs::write(repo.join("calc.py"), "def add(a, b):\n    return a - b\n").unwrap();
    std::fs::write(
        repo.join("test_calc.py"),
        "import unittest\nfrom calc import add\n\n\
         class T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\
         unittest.main()\n",
    )
    .unwrap();
    // What no check opens.
    std::fs::write(repo.join("assets/big.bin"), noise("big", 3 << 20)).unwrap();
    // What two checks on one host read at once.
    std::fs::write(repo.join("assets/shared.bin"), noise("shared", 300_000)).unwrap();
    crate::support::git(&repo, &["init", "-q", "-b", "main"]);
    crate::support::git(&repo, &["add", "-A"]);
    crate::support::git(&repo, &["commit", "-qm", "first"]);
    let base = a.ok(&["onboard", repo.as_str()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    let agent = a.dir.join("agent");
    a.ok(&["checkout", &base, agent.as_str()]);
    std::fs::write(agent.join("calc.py"), "def add(a, b):\n    return a + b\n").unwrap();
    let change = a.ok(&["snapshot", agent.as_str(), "-m", "fix add"])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    (repo, base, change)
}

/// A Python 3 that runs whatever `HOME` is (a pyenv shim needs its own).
fn python() -> &'static str {
    if Utf8Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// `cairn verify` started on `m`, its JSON read when it ends.
fn spawn_verify(m: &Machine, args: &[&str]) -> Child {
    let mut all = vec!["--json", "verify"];
    all.extend_from_slice(args);
    m.command(&all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn verified(m: &Machine, child: Child) -> Value {
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}: verify: {text}\n{}",
        m.name,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(text.trim()).unwrap()
}

#[test]
fn a_fleet_verifies_a_pushed_snapshot_in_lazy_views_and_the_pusher_merges_on_its_proofs() {
    let mut site = Site::start(4, "cairn-fleet");
    let a = site.machine(0, "a", 0);
    let b = site.machine(1, "b", LATENCY_MS);
    let c = site.machine(2, "c", LATENCY_MS);

    // A: the agent's change, pushed as `task@origin`.
    let (repo, base, snap) = task(&a);
    a.ok(&["push", &snap]);
    a.ok(&["ref", "set", "task@origin", &snap]);

    // B and C, on stores that never saw it, each run a check at once, signed and pushed.
    let signers = a.dir.join("allowed_signers");
    let mut listed = String::new();
    let mut keys = Vec::new();
    for m in [&b, &c] {
        let dir = m.dir.join("keys");
        std::fs::create_dir_all(&dir).unwrap();
        let (key, public) = crate::verify_commands::ssh_key(&dir);
        listed.push_str(&format!("{}@fleet {public}\n", m.name));
        keys.push(key);
    }
    std::fs::write(&signers, listed).unwrap();
    let tests = spawn_verify(
        &b,
        &[
            "task@origin",
            "--check",
            "tests",
            "--sign",
            keys[0].as_str(),
            "--push",
            "--",
            python(),
            "test_calc.py",
        ],
    );
    let lint = spawn_verify(
        &c,
        &[
            "task@origin",
            "--check",
            "lint",
            "--sign",
            keys[1].as_str(),
            "--push",
            "--",
            "sh",
            "-c",
            "grep -q 'return a + b' calc.py && ! grep -rq TODO --include='*.py' .",
        ],
    );
    for (m, child, check) in [(&b, tests, "tests"), (&c, lint, "lint")] {
        let v = verified(m, child);
        assert_eq!(v["passed"], true, "{v}");
        assert_eq!(v["cached"], false, "{v}");
        assert_eq!(v["view"], "mount", "{v}");
        assert_eq!(v["snapshot"], snap.as_str(), "{v}");
        assert_eq!(v["pushed"]["remote"], "origin", "{v}");
        assert!(v["pushed"]["attestations_sent"].as_u64() >= Some(1), "{v}");
        // The view was fetched lazily: what the check read is here, the big file it
        // never opened is not.
        assert!(holds(m, &snap, "calc.py"), "{check} read calc.py");
        assert!(
            !holds(m, &snap, "assets/big.bin"),
            "{}: the file no check opens was fetched",
            m.name
        );
        m.ok(&["fsck"]);
    }

    // A merges only once it has pulled the proofs.
    let merge = [
        "merge",
        snap.as_str(),
        "--into",
        repo.as_str(),
        "--base",
        base.as_str(),
        "--require",
        "tests",
        "--require",
        "lint",
        "--signed-by",
        signers.as_str(),
    ];
    let (code, refused) = a.json(&merge);
    assert_eq!(code, 1, "{refused}");
    assert_eq!(
        refused["unverified"].as_array().map(Vec::len),
        Some(2),
        "{refused}"
    );
    let pulled = a.ok(&["pull", "task"]);
    assert_eq!(
        pulled["attestations_received"], 4,
        "two records, two signatures: {pulled}"
    );
    assert_eq!(pulled["objects_received"], 0, "nothing else: {pulled}");
    let merged = a.ok(&merge);
    assert_eq!(merged["merged"], true, "{merged}");
    let trailers = crate::support::git(
        &repo,
        &[
            "log",
            "-1",
            "--format=%(trailers:key=Cairn-Verified,valueonly)",
            merged["branch"].as_str().unwrap(),
        ],
    );
    let trailers = String::from_utf8_lossy(&trailers);
    assert!(
        trailers.contains("tests ") && trailers.contains("lint "),
        "{trailers}"
    );

    // Two verifiers on one host share one store and one server: the file both read is
    // fetched once.
    let d = site.machine(3, "d", LATENCY_MS);
    let (server, log) = serve(&d);
    let both = "sha256sum assets/shared.bin && sleep 1";
    let first = spawn_verify(
        &d,
        &["task@origin", "--check", "one", "--", "sh", "-c", both],
    );
    let second = spawn_verify(
        &d,
        &["task@origin", "--check", "two", "--", "sh", "-c", both],
    );
    let shared = sha256(&repo.join("assets/shared.bin"));
    for (child, check) in [(first, "one"), (second, "two")] {
        let v = verified(&d, child);
        assert_eq!(v["passed"], true, "{v}");
        assert_eq!(v["view"], "mount", "{v}");
        let out = d.ok(&["checks", &snap, "--log", check]);
        assert!(
            out["log"]["stdout"].as_str().unwrap().starts_with(&shared),
            "{out}"
        );
    }
    let whole: Vec<String> = pack_reads(&log, 0)
        .into_iter()
        .filter(|l| range_of(l).is_some_and(|(s, e)| e - s >= 300_000 && e - s < 310_000))
        .collect();
    assert_eq!(whole.len(), 1, "one fetch of the shared file: {whole:#?}");
    // Nor anything else that does not change (a ref is read by each verify: it moves).
    let mut asked: Vec<String> = requests(&log)
        .iter()
        .filter(|l| l.contains("GET") && !l.contains("key=\"refs/"))
        .map(|l| {
            l.split_once(REQUESTS)
                .map_or(l.as_str(), |(_, r)| r)
                .to_owned()
        })
        .collect();
    asked.sort();
    let twice: Vec<&String> = asked
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| &w[1])
        .collect();
    assert_eq!(twice, Vec::<&String>::new(), "fetched twice on one host");
    assert!(!holds(&d, &snap, "assets/big.bin"));
    drop(server);
}

/// `sha256sum`'s hex digest of a file.
fn sha256(path: &Utf8Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path.as_str())
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)[..64].to_owned()
}

/// A `cairn serve` stopped (SIGTERM, then waited for) when dropped.
struct Serving(Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

/// `cairn serve` on machine `m`, its log (remote requests included) in a file.
fn serve(m: &Machine) -> (Serving, Utf8PathBuf) {
    let log = m.dir.join("serve.log");
    let file = std::fs::File::create(&log).unwrap();
    let child = m
        .command(&["serve"])
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let serving = Serving(child);
    let socket = cairn_client::Client::socket_of(&m.dir.join("store"));
    wait_until("the server listens", || {
        cairn_client::Client::connect(&socket)
            .map(drop)
            .map_err(|e| e.to_string())
    });
    (serving, log)
}

/// The marker the README puts before the fleet's console block.
const FLEET_MARKER: &str = "<!-- the output of docs/fleet.sh -->";

/// `docs/fleet.sh` run for real on SeaweedFS prints what the README shows (ids and times
/// aside), so neither can drift from the commands.
#[test]
fn the_readme_fleet_is_what_docs_fleet_sh_prints() {
    use crate::walkthrough::{first_difference, normalized, readme_block};
    let site = Site::start(0, "cairn-fleet-doc");
    let root = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = Utf8Path::new(env!("CARGO_BIN_EXE_cairn"))
        .parent()
        .expect("the binary's folder");
    let tmp = site.root().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg("exec sh \"$0\" 2>&1")
        .arg(root.join("docs/fleet.sh"))
        .env(
            "PATH",
            format!("{bin}:{}", std::env::var("PATH").unwrap_or_default()),
        )
        .env("TMPDIR", tmp.as_str())
        .env("CAIRN_FLEET_URL", format!("s3://{}/team", site.bucket))
        .env("CAIRN_FLEET_ENDPOINT", site.cluster.endpoint())
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env_remove("CAIRN_STORE")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "the fleet failed:\n{printed}");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let (shown, now) = (
        normalized(&readme_block(&readme, FLEET_MARKER)),
        normalized(&printed),
    );
    assert!(
        shown == now,
        "README.md's fleet is not what docs/fleet.sh prints now; the line that differs \
         first:\n  README: {:?}\n  script: {:?}\nthe script's output, to paste under \
         {FLEET_MARKER}:\n{printed}",
        first_difference(&shown, &now).0,
        first_difference(&shown, &now).1,
    );
}
