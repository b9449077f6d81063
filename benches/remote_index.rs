//! A remote holding 100,000 small packs: what a push and a fetch cost when they list only
//! the indexes named since their store last looked, against listing `index/` whole (what
//! cairn did before layout 4, forced here by dropping the store's mark); and a fresh
//! store's fetch before and after `gc --remote` repacks the small packs.
//!
//! `cargo bench -p cairn-cli --bench remote_index` on a `file://` remote, or on SeaweedFS
//! with `CAIRN_BENCH_ENGINE=seaweedfs` (started by the bench as the tests start it; the
//! generated remote is copied there with rclone, and the repack rows, which take 300,000
//! requests there, are left out); `CAIRN_BENCH_PACKS` packs (default 100,000),
//! `CAIRN_BENCH_PAIRS` rounds (default 3), each the full listing then the incremental one. The remote is generated: one push of a tree of that many
//! small files (kept by a ref), whose blob packs are then rewritten one blob per pack, each
//! index named two days back (as if pushed one by one), and every store's index cache
//! dropped. The pushes and fetches measured are of another project of 1,000 files, so what
//! they cost is the remote's size, not the snapshot's. Requests are counted from the
//! `cairn::remote::request` debug log.
#![allow(missing_docs)]

#[allow(dead_code)]
#[path = "../tests/cli/engines.rs"]
mod engines;
#[path = "harness/mod.rs"]
mod harness;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use harness::{median, secs};

/// What one cairn run asked of the remote.
#[derive(Debug, Default, Clone, Copy)]
struct Requests {
    lists: u64,
    keys_listed: u64,
    /// Names a folder remote's listings of `index/` read (S3: none counted).
    names_read: u64,
    gets: u64,
}

/// Runs `cairn --json --store STORE ARGS…` logging its requests: time, requests, JSON.
fn cairn(store: &Path, args: &[&str]) -> (Duration, Requests, serde_json::Value) {
    let started = Instant::now();
    let out = Command::new(harness::cairn_binary())
        .env("AWS_ACCESS_KEY_ID", engines::ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", engines::SECRET_KEY)
        .env("RUST_LOG", "cairn::remote::request=debug")
        .env("NO_COLOR", "1")
        .arg("--json")
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cairn {args:?}: {log}");
    let mut requests = Requests::default();
    for line in log.lines().filter(|l| l.contains("cairn::remote::request")) {
        if line.contains("op=\"LIST\"") {
            requests.lists += 1;
            if let Some((_, tail)) = line.rsplit_once("keys=") {
                let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
                requests.keys_listed += digits.parse::<u64>().unwrap_or(0);
            }
            if let Some((_, tail)) = line.rsplit_once("read=Some(") {
                let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
                requests.names_read += digits.parse::<u64>().unwrap_or(0);
            }
        } else if line.contains("op=\"GET\"") {
            requests.gets += 1;
        }
    }
    let json = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (took, requests, json)
}

fn ok(store: &Path, args: &[&str]) -> serde_json::Value {
    cairn(store, args).2
}

fn open(store: &Path) -> cas::Store {
    cas::Store::open(
        camino::Utf8Path::from_path(store).unwrap(),
        &cas::OpenOptions::default(),
    )
    .unwrap()
}

/// Drops what `store` keeps of the remote's `index/`: its cached indexes, where their
/// objects are, and its mark (`mark_only`: sets the mark back to the epoch, so its next
/// listing names every index, as before layout 4, and the locations it keeps still
/// serve).
fn forget(store: &Path, mark_only: bool) {
    let store = open(store);
    let mut batch = cas::WriteBatch::new();
    if mark_only {
        let epoch = br#"{"seen_millis":0,"gc":[],"located":true}"#;
        batch.put_side(remote::INDEX_CACHE, "origin", b"mark", epoch.to_vec());
    } else {
        batch.clear_side_scope(remote::INDEX_CACHE, "origin");
        batch.clear_side_scope(remote::LOCATIONS, "origin");
    }
    store.write(&batch).unwrap();
}

/// Rewrites the remote at `dir` so that every blob is in a pack of its own (its index
/// named `millis` on, a millisecond apart), trees and snapshots in one more; the packs
/// that held them are deleted. Blobs come from `store`. Returns the number of packs.
fn explode(dir: &Path, store: &Path, millis: u64) -> usize {
    use remote::layout::{PackBuilder, decode_index, index_name, parse_index_name};
    let store = open(store);
    let reader = store.reader().unwrap();
    let index_dir = dir.join("index");
    // Names in their time's folders (layout 5): relative paths.
    let mut originals: Vec<String> = Vec::new();
    let mut stack = vec![index_dir.clone()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(&index_dir).unwrap();
                originals.push(name.to_str().unwrap().to_owned());
            }
        }
    }
    let mut rest = PackBuilder::default();
    let mut written = 0;
    let mut at = millis;
    let write = |builder: PackBuilder, at: u64| {
        let pack = builder.finish();
        std::fs::write(dir.join("packs").join(&pack.id), &pack.bytes).unwrap();
        let index = index_dir.join(index_name(at, &pack.id));
        std::fs::create_dir_all(index.parent().unwrap()).unwrap();
        std::fs::write(index, &pack.index).unwrap();
    };
    for name in &originals {
        let (pack, _) = parse_index_name(name).unwrap();
        let bytes = std::fs::read(dir.join("packs").join(pack)).unwrap();
        let entries = decode_index(&std::fs::read(index_dir.join(name)).unwrap(), pack).unwrap();
        let payloads = remote::layout::decode_pack(&bytes, pack).unwrap();
        for entry in &entries {
            if entry.kind == cas::ObjectKind::Blob {
                let id = entry.id.as_blob();
                let content = reader.blob(id).unwrap();
                let mut builder = PackBuilder::default();
                builder
                    .add(
                        cas::ObjectKind::Blob,
                        entry.id,
                        false,
                        content.len() as u64,
                        &content,
                    )
                    .unwrap();
                write(builder, at);
                at += 1;
                written += 1;
            }
        }
        for (entry, payload) in payloads {
            if entry.kind != cas::ObjectKind::Blob {
                rest.copy_payload(&[entry], payload).unwrap();
            }
        }
        std::fs::remove_file(dir.join("packs").join(pack)).unwrap();
        std::fs::remove_file(index_dir.join(name)).unwrap();
    }
    write(rest, at);
    written + 1
}

fn main() {
    let packs: usize = harness::number("CAIRN_BENCH_PACKS", 100_000);
    let pairs: usize = harness::number("CAIRN_BENCH_PAIRS", 3);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let src = root.join("src");
    for i in 0..packs {
        let d = src.join(format!("d{:03}", i / 1000));
        if i % 1000 == 0 {
            std::fs::create_dir_all(&d).unwrap();
        }
        std::fs::write(d.join(format!("f{i}")), format!("small file {i}\n")).unwrap();
    }
    let remote_dir = root.join("remote");
    let url = format!("file://{}", remote_dir.display());
    let (a, b) = (root.join("a"), root.join("b"));
    let bulk = ok(&a, &["onboard", src.to_str().unwrap()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    ok(&a, &["remote", "add", "origin", &url]);
    ok(&a, &["ref", "set", "bulk@origin", &bulk]);
    let two_days_ago = remote::layout::now_millis() - 2 * 86_400_000;
    let generated = explode(&remote_dir, &a, two_days_ago - packs as u64);
    forget(&a, false);
    // On SeaweedFS: the same remote, copied there; every store adds that one.
    let seaweed = std::env::var("CAIRN_BENCH_ENGINE").is_ok_and(|e| e == "seaweedfs");
    let cluster = seaweed.then(|| {
        let cluster = engines::Seaweed::start("127.0.0.1");
        cluster.create_bucket("cairn-index");
        let out = engines::rclone(
            &cluster.endpoint(),
            engines::ACCESS_KEY,
            engines::SECRET_KEY,
        )
        .args(["copy", "--transfers", "32", "--checkers", "32"])
        .arg(&remote_dir)
        .arg("eng:cairn-index/bench")
        .output()
        .unwrap();
        assert!(
            out.status.success(),
            "rclone copy: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        cluster
    });
    let endpoint = cluster.as_ref().map(engines::Seaweed::endpoint);
    let url = match &endpoint {
        Some(_) => "s3://cairn-index/bench".to_owned(),
        None => url,
    };
    let add = |store: &Path| {
        let mut args = vec!["remote", "add", "origin", url.as_str()];
        if let Some(e) = &endpoint {
            args.extend(["--endpoint", e.as_str()]);
        }
        ok(store, &args);
    };
    if seaweed {
        ok(&a, &["remote", "rm", "origin"]);
        add(&a);
    }
    let src = root.join("proj");
    for i in 0..1000 {
        let d = src.join(format!("d{:02}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&d).unwrap();
        }
        std::fs::write(d.join(format!("f{i}")), format!("project file {i}\n")).unwrap();
    }
    let first = ok(&a, &["onboard", src.to_str().unwrap()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    println!(
        "remote: {generated} packs ({packs} of one small blob each), {}; machine: 2 cores shared with other builds (load {})",
        if seaweed { "SeaweedFS" } else { "file://" },
        harness::load()
    );
    // Each store reads every index once (cached from then on).
    let (t, r, _) = cairn(&a, &["push", &first]);
    println!(
        "a's first push (full listing, every index read): {} {r:?}",
        secs(t)
    );
    add(&b);
    let (t, r, _) = cairn(&b, &["pull", &first]);
    println!(
        "b's first fetch (full, every index read): {} {r:?}",
        secs(t)
    );

    // Rounds: a pushes 10 changed files, b fetches that snapshot; full listing first.
    let mut rows: Vec<(&str, bool, Vec<Duration>, Vec<Requests>)> = vec![
        ("push of 10 changed files", true, vec![], vec![]),
        ("push of 10 changed files", false, vec![], vec![]),
        ("fetch of that snapshot", true, vec![], vec![]),
        ("fetch of that snapshot", false, vec![], vec![]),
    ];
    let mut last = first.clone();
    for round in 0..pairs {
        for full in [true, false] {
            for i in 0..10 {
                let f = src.join(format!("d00/f{i}"));
                std::fs::write(&f, format!("changed {round} {full} {i}\n")).unwrap();
            }
            let snap = ok(&a, &["snapshot", src.to_str().unwrap(), "-m", "ten"])["snapshot"]
                .as_str()
                .unwrap()
                .to_owned();
            if full {
                forget(&a, true);
                forget(&b, true);
            }
            let (t, r, _) = cairn(&a, &["push", &snap]);
            let row = &mut rows[usize::from(!full)];
            row.2.push(t);
            row.3.push(r);
            let (t, r, _) = cairn(&b, &["pull", &snap]);
            let row = &mut rows[2 + usize::from(!full)];
            row.2.push(t);
            row.3.push(r);
            last = snap;
        }
    }
    println!(
        "\n| operation | listing | time (median of {pairs}) | LIST keys | names read | GETs |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, full, times, requests) in &rows {
        let r = requests[requests.len() / 2];
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            if *full {
                "full (before)"
            } else {
                "incremental"
            },
            secs(median(times)),
            r.keys_listed,
            r.names_read,
            r.gets
        );
    }

    // What a call costs that asks the remote nothing, on the same stores: the floor under
    // the rows above.
    let floor = |store: &Path| {
        let times: Vec<Duration> = (0..pairs)
            .map(|_| cairn(store, &["remote", "list"]).0)
            .collect();
        secs(median(&times))
    };
    println!(
        "`remote list` (asks the remote nothing): a's store {}, b's store {}",
        floor(&a),
        floor(&b)
    );

    if seaweed {
        return;
    }
    // A fresh store's fetch, before and after the repack.
    let fresh = |name: &str| -> (Duration, Requests) {
        let store: PathBuf = root.join(name);
        add(&store);
        let (t, r, _) = cairn(&store, &["pull", &last]);
        (t, r)
    };
    let (before, rb) = fresh("fresh-before");
    let (t, _, gc) = cairn(&a, &["gc", "--remote", "origin", "--grace", "0"]);
    println!(
        "\ngc --remote (repack): {} repacked into {} in {}",
        gc["remote"]["packs_repacked"],
        gc["remote"]["packs_written"],
        secs(t)
    );
    let (t, _, gc) = cairn(&a, &["gc", "--remote", "origin", "--grace", "0"]);
    println!(
        "gc --remote (deletes the originals): {} removed in {}",
        gc["remote"]["packs_removed"],
        secs(t)
    );
    let left = std::fs::read_dir(remote_dir.join("packs")).unwrap().count();
    let (after, ra) = fresh("fresh-after");
    // The same push and fetch again, now that the remote (and each store's cache) holds
    // few packs.
    let (mut pushes, mut fetches) = (vec![], vec![]);
    let (mut push_requests, mut fetch_requests) = (vec![], vec![]);
    for round in 0..pairs {
        for i in 0..10 {
            let f = src.join(format!("d00/f{i}"));
            std::fs::write(&f, format!("after the repack {round} {i}\n")).unwrap();
        }
        let snap = ok(&a, &["snapshot", src.to_str().unwrap(), "-m", "ten"])["snapshot"]
            .as_str()
            .unwrap()
            .to_owned();
        let (t, r, _) = cairn(&a, &["push", &snap]);
        pushes.push(t);
        push_requests.push(r);
        let (t, r, _) = cairn(&b, &["pull", &snap]);
        fetches.push(t);
        fetch_requests.push(r);
    }
    println!(
        "\n| after the repack ({left} packs) | listing | time (median of {pairs}) | LIST keys | names read | GETs |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, times, requests) in [
        ("push of 10 changed files", &pushes, &push_requests),
        ("fetch of that snapshot", &fetches, &fetch_requests),
    ] {
        let r = requests[requests.len() / 2];
        println!(
            "| {name} | incremental | {} | {} | {} | {} |",
            secs(median(times)),
            r.keys_listed,
            r.names_read,
            r.gets
        );
    }
    println!();
    println!("| a fresh store's fetch of one snapshot | packs | time | LIST keys | GETs |");
    println!("|---|---|---|---|---|");
    println!(
        "| before repack | {generated}+ | {} | {} | {} |",
        secs(before),
        rb.keys_listed,
        rb.gets
    );
    println!(
        "| after repack | {left} | {} | {} | {} |",
        secs(after),
        ra.keys_listed,
        ra.gets
    );
}
