//! Store throughput: put and get of 1 KB, 64 KB and 8 MB blobs, against git's object store
//! (`git hash-object -w --stdin-paths` / `git cat-file --batch`) on the same files, in the
//! same run, interleaved. Run: `cargo bench -p cas --bench store`.
#![allow(missing_docs)]

#[path = "harness/mod.rs"]
mod harness;

use std::io::Write;
use std::process::{Command, Stdio};

use camino::{Utf8Path, Utf8PathBuf};
use cas::{BlobId, OpenOptions, PreparedBlob, Store, WriteBatch};
use harness::{interleave, median, ms, text, time};
use rayon::prelude::*;

const PAIRS: usize = 3;

fn main() {
    let work = tempfile::tempdir().unwrap();
    let work = Utf8Path::from_path(work.path()).unwrap().to_owned();
    println!("| blob size | count | op | cairn | git | ratio | cairn MB/s | cairn objects/s |");
    println!("|---|---|---|---|---|---|---|---|");
    for (label, size, count) in [
        ("1 KB", 1 << 10, 20_000),
        ("64 KB", 64 << 10, 1_000),
        ("8 MB", 8 << 20, 12),
    ] {
        run_size(&work, label, size, count);
    }
}

fn run_size(work: &Utf8Path, label: &str, size: usize, count: usize) {
    let files = work.join(format!("files-{size}"));
    std::fs::create_dir_all(&files).unwrap();
    let paths: Vec<Utf8PathBuf> = (0..count)
        .map(|i| {
            let p = files.join(format!("{i}"));
            std::fs::write(&p, text(i as u64 * 7919 + size as u64, size)).unwrap();
            p
        })
        .collect();
    let total = (size * count) as f64;
    let round = std::cell::Cell::new(0);
    let put = interleave(
        PAIRS,
        || {
            round.set(round.get() + 1);
            let root = work.join(format!("store-{size}-{}", round.get()));
            let store = Store::open(
                &root,
                &OpenOptions {
                    create: true,
                    ..Default::default()
                },
            )
            .unwrap();
            let d = time(|| {
                put_files(&store, &paths);
            });
            std::fs::remove_dir_all(&root).unwrap();
            d
        },
        || {
            let repo = work.join(format!("git-{size}-{}", round.get()));
            git_init(&repo);
            let d = time(|| {
                git_hash_objects(&repo, &paths);
            });
            std::fs::remove_dir_all(&repo).unwrap();
            d
        },
    );
    // Get: one populated store and repo, read everything back.
    let root = work.join(format!("store-{size}-get"));
    let store = Store::open(
        &root,
        &OpenOptions {
            create: true,
            ..Default::default()
        },
    )
    .unwrap();
    let ids = put_files(&store, &paths);
    let repo = work.join(format!("git-{size}-get"));
    git_init(&repo);
    let oids = git_hash_objects(&repo, &paths);
    let get = interleave(
        PAIRS,
        || time(|| get_all(&store, &ids)),
        || time(|| git_cat_all(&repo, &oids)),
    );
    for (op, pair) in [("put", &put), ("get", &get)] {
        let m = median(&pair.cairn);
        println!(
            "| {label} | {count} | {op} | {} | {} | {:.2} | {:.0} | {:.0} |",
            ms(m),
            ms(median(&pair.peer)),
            pair.ratio(),
            total / m.as_secs_f64() / 1e6,
            count as f64 / m.as_secs_f64(),
        );
    }
    std::fs::remove_dir_all(&files).unwrap();
}

/// Reads, hashes and compresses in parallel, writing batches of about 64 MB.
fn put_files(store: &Store, paths: &[Utf8PathBuf]) -> Vec<BlobId> {
    let mut ids = Vec::with_capacity(paths.len());
    for group in paths.chunks(64.max(paths.len() / 16)) {
        let prepared: Vec<PreparedBlob> = group
            .par_iter()
            .map(|p| PreparedBlob::new(&std::fs::read(p).unwrap()))
            .collect();
        let mut batch = WriteBatch::new();
        for p in prepared {
            ids.push(batch.add_blob(p));
        }
        store.write(&batch).unwrap();
    }
    ids
}

fn get_all(store: &Store, ids: &[BlobId]) {
    ids.par_iter().for_each_init(
        || store.reader().unwrap(),
        |r, id| {
            let bytes = r.blob(*id).unwrap();
            assert!(!bytes.is_empty());
        },
    );
}

fn git_init(repo: &Utf8Path) {
    let ok = Command::new("git")
        .args(["init", "-q", repo.as_str()])
        .status()
        .unwrap();
    assert!(ok.success());
}

fn git_hash_objects(repo: &Utf8Path, paths: &[Utf8PathBuf]) -> Vec<String> {
    let mut child = Command::new("git")
        .args(["-C", repo.as_str(), "hash-object", "-w", "--stdin-paths"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let list: String = paths.iter().map(|p| format!("{p}\n")).collect();
    let writer = std::thread::spawn(move || stdin.write_all(list.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn git_cat_all(repo: &Utf8Path, oids: &[String]) {
    let mut child = Command::new("git")
        .args(["-C", repo.as_str(), "cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let list: String = oids.iter().map(|o| format!("{o}\n")).collect();
    let writer = std::thread::spawn(move || stdin.write_all(list.as_bytes()).unwrap());
    let mut stdout = child.stdout.take().unwrap();
    let n = std::io::copy(&mut stdout, &mut std::io::sink()).unwrap();
    assert!(n > 0);
    writer.join().unwrap();
    assert!(child.wait().unwrap().success());
}
