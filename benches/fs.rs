//! cairn against git (and cp) on a real source tree, interleaved in one run.
//!
//! `cargo bench -p cairn-cli --bench fs` uses the Linux 6.1 tree from
//! `../shared/bench/linux-corpus.sh`; `CAIRN_BENCH_CORPUS=synthetic` uses a small generated
//! tree for a quick run, and `CAIRN_BENCH_CORPUS=/some/dir` any directory. Each row is the
//! median of `CAIRN_BENCH_PAIRS` (default 3) cairn/peer pairs run alternately; the ratio is
//! cairn's median over the peer's. `CAIRN_BENCH_ONLY=merge` (or `reversible`, or `served`) runs only those rows.
//! `CAIRN_BENCH_CAIRN=/path/to/cairn` runs another build of cairn (every bench takes it), to
//! compare two versions under one harness.
#![allow(missing_docs)]

#[path = "harness/mod.rs"]
mod harness;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use harness::{disk_usage, median, ms, time};

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sh(script: &str, dir: &Path) {
    run(Command::new("sh").arg("-c").arg(script).current_dir(dir));
}

fn git(dir: &Path, args: &[&str]) -> String {
    run(Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.com",
            "-c",
            "core.autocrlf=false",
            // No detached `git gc --auto` left running into the next step (it broke a
            // `.git` the merge rows delete and re-create).
            "-c",
            "gc.auto=0",
            "-c",
            "maintenance.auto=false",
        ])
        .args(args)
        .current_dir(dir))
}

fn cairn(store: &Path, args: &[&str]) -> serde_json::Value {
    let out = run(Command::new(harness::cairn_binary())
        .arg("--store")
        .arg(store)
        .arg("--json")
        .args(args));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("cairn {args:?}: {e}: {out}"))
}

/// Peak RSS in MiB of a command, via GNU time.
fn peak_rss(args: &[&str], dir: &Path) -> f64 {
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let kb: f64 = err
        .lines()
        .last()
        .unwrap_or("0")
        .trim()
        .parse()
        .unwrap_or(0.0);
    kb / 1024.0
}

/// The paths git tracks in the repository at `dir`.
fn tracked_files(dir: &Path) -> Vec<String> {
    git(dir, &["ls-files"])
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

fn corpus() -> PathBuf {
    match std::env::var("CAIRN_BENCH_CORPUS").as_deref() {
        Ok("synthetic") => synthetic(),
        Ok(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            let script =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench/linux-corpus.sh");
            let out = run(Command::new("bash").arg(script));
            PathBuf::from(out.trim())
        }
    }
}

fn synthetic() -> PathBuf {
    let dir = std::env::temp_dir().join("cairn-bench-synthetic");
    if !dir.join(".ready").exists() {
        let _ = std::fs::remove_dir_all(&dir);
        for d in 0..40 {
            for s in 0..5 {
                let sub = dir.join(format!("drivers/d{d}/s{s}"));
                std::fs::create_dir_all(&sub).unwrap();
                for f in 0..25 {
                    std::fs::write(
                        sub.join(format!("f{f}.c")),
                        harness::text((d * 1000 + s * 100 + f) as u64, 2000 + f * 300),
                    )
                    .unwrap();
                }
            }
        }
        std::fs::write(dir.join(".gitignore"), "*.o\n").unwrap();
        std::fs::write(dir.join(".ready"), "").unwrap();
    }
    dir
}

struct Row {
    name: &'static str,
    peer: &'static str,
    cairn: Vec<Duration>,
    other: Vec<Duration>,
    target: f64,
}

impl Row {
    fn new(name: &'static str, peer: &'static str, target: f64) -> Row {
        Row {
            name,
            peer,
            cairn: Vec::new(),
            other: Vec::new(),
            target,
        }
    }
    fn print(&self) {
        let (c, p) = (median(&self.cairn), median(&self.other));
        let ratio = c.as_secs_f64() / p.as_secs_f64();
        let verdict = if ratio <= self.target {
            "meets"
        } else {
            "misses"
        };
        println!(
            "| {} | {} | {} | {} | {:.2} | ≤ {:.2} ({verdict}) |",
            self.name,
            ms(c),
            self.peer,
            ms(p),
            ratio,
            self.target
        );
    }
}

/// Appends a line to `n` tracked files of a tree, picked deterministically by `round`.
fn touch_files(root: &Path, files: &[String], round: usize, n: usize) {
    for i in 0..n {
        let f = &files[(round * 7919 + i * 104_729) % files.len()];
        let p = root.join(f);
        let mut content = std::fs::read(&p).unwrap();
        content.extend_from_slice(format!("\n/* bench edit {round} {i} */\n").as_bytes());
        std::fs::write(&p, content).unwrap();
    }
}

fn main() {
    let pairs: usize = harness::number("CAIRN_BENCH_PAIRS", 3);
    let src = corpus();
    let work = tempfile::Builder::new()
        .prefix("cairn-bench-")
        .tempdir_in(std::env::var("CAIRN_BENCH_TMP").unwrap_or_else(|_| "/tmp".into()))
        .unwrap();
    let work = work.path();
    eprintln!("corpus {}; work in {}", src.display(), work.display());

    let only = std::env::var("CAIRN_BENCH_ONLY").ok();
    let reversible_rows = if only.as_deref().is_none_or(|o| o == "reversible") {
        reversible(&src, work, pairs)
    } else {
        Vec::new()
    };
    let served_rows = if only.as_deref().is_none_or(|o| o == "served") {
        served(&src, work, pairs)
    } else {
        Vec::new()
    };
    let merge_rows = if only.as_deref().is_none_or(|o| o == "merge") {
        merge(&src, work, pairs)
    } else {
        Vec::new()
    };
    if only.is_some() {
        println!("| operation | cairn | peer | peer time | ratio | target |");
        println!("|---|---|---|---|---|---|");
        for row in reversible_rows
            .iter()
            .chain(&served_rows)
            .chain(&merge_rows)
        {
            row.print();
        }
        return;
    }
    let (c_src, g_src) = (work.join("c-src"), work.join("g-src"));
    for d in [&c_src, &g_src] {
        run(Command::new("cp").arg("-a").arg(&src).arg(d));
    }
    let store = work.join("store");

    // Onboard vs git init + add + commit.
    let mut onboard = Row::new("onboard", "`git init && git add -A && git commit`", 0.25);
    let mut files_in_scope = 0;
    let mut denied: Vec<String> = Vec::new();
    for _ in 0..pairs {
        let _ = std::fs::remove_dir_all(&store);
        onboard.cairn.push(time(|| {
            let v = cairn(&store, &["onboard", c_src.to_str().unwrap()]);
            files_in_scope = v["files"].as_u64().unwrap();
            denied = v["skipped"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["path"].as_str().unwrap().to_owned())
                .collect();
        }));
        let _ = std::fs::remove_dir_all(g_src.join(".git"));
        onboard.other.push(time(|| {
            git(&g_src, &["init", "-q"]);
            git(&g_src, &["add", "-A"]);
            git(&g_src, &["commit", "-qm", "onboard"]);
        }));
    }
    let tracked = tracked_files(&g_src);
    let store_bytes = disk_usage(&store);
    let git_bytes = disk_usage(&g_src.join(".git"));
    let store_file = std::fs::metadata(store.join("store.redb")).unwrap().len();

    // Snapshot with nothing changed.
    let mut unchanged = Row::new(
        "snapshot, nothing changed",
        "`git add -A && git commit --allow-empty`",
        0.25,
    );
    for _ in 0..pairs {
        unchanged.cairn.push(time(|| {
            let v = cairn(&store, &["snapshot", c_src.to_str().unwrap()]);
            assert_eq!(v["changed"], false);
        }));
        unchanged.other.push(time(|| {
            git(&g_src, &["add", "-A"]);
            git(&g_src, &["commit", "-q", "--allow-empty", "-m", "x"]);
        }));
    }

    // Snapshot after 10 files changed, then rollback of 10 changed files.
    let mut ten = Row::new(
        "snapshot after 10 files changed",
        "`git add -A && git commit`",
        0.25,
    );
    let mut rollback = Row::new(
        "rollback of 10 changed files",
        "`git reset --hard && git clean -fd`",
        0.25,
    );
    let mut ten_pairs = Vec::new();
    for round in 0..pairs {
        touch_files(&c_src, &tracked, round, 10);
        touch_files(&g_src, &tracked, round, 10);
        let mut pair = (String::new(), String::new());
        ten.cairn.push(time(|| {
            let v = cairn(&store, &["snapshot", c_src.to_str().unwrap()]);
            assert_eq!(v["modified"], 10, "{v}");
            pair = (
                v["parent"].as_str().unwrap().to_owned(),
                v["snapshot"].as_str().unwrap().to_owned(),
            );
        }));
        ten_pairs.push(pair);
        ten.other.push(time(|| {
            git(&g_src, &["add", "-A"]);
            git(&g_src, &["commit", "-qm", "ten"]);
        }));
        let head =
            cairn(&store, &["log", c_src.to_str().unwrap(), "-n", "1"])["snapshots"][0]["id"]
                .as_str()
                .unwrap()
                .to_owned();
        touch_files(&c_src, &tracked, round + 100, 10);
        touch_files(&g_src, &tracked, round + 100, 10);
        rollback.cairn.push(time(|| {
            let v = cairn(&store, &["rollback", c_src.to_str().unwrap(), &head]);
            assert_eq!(v["written"].as_array().unwrap().len(), 10, "{v}");
        }));
        rollback.other.push(time(|| {
            git(&g_src, &["reset", "-q", "--hard"]);
            git(&g_src, &["clean", "-qfd"]);
        }));
    }

    // Diff of two snapshots 10 files apart, and status of an unchanged worktree.
    let mut diff_ten = Row::new(
        "diff --name-status of snapshots 10 files apart",
        "`git diff --raw` of the commits",
        1.0,
    );
    let mut status = Row::new("status, nothing changed", "`git status`", 0.25);
    for (a, b) in &ten_pairs {
        diff_ten.cairn.push(time(|| {
            let out = run(Command::new(harness::cairn_binary())
                .arg("--store")
                .arg(&store)
                .args(["diff", "--name-status", a, b]));
            assert_eq!(out.lines().count(), 10, "{out}");
        }));
        diff_ten.other.push(time(|| {
            git(&g_src, &["diff", "--raw", "HEAD~1", "HEAD"]);
        }));
        status.cairn.push(time(|| {
            let v = cairn(&store, &["status", c_src.to_str().unwrap()]);
            assert_eq!(v["stats"]["files"], 0, "{v}");
        }));
        status.other.push(time(|| {
            git(&g_src, &["status"]);
        }));
    }

    // diff --stat of two snapshots 1,000 files apart.
    touch_files(&c_src, &tracked, 1000, 1000);
    touch_files(&g_src, &tracked, 1000, 1000);
    let v = cairn(&store, &["snapshot", c_src.to_str().unwrap()]);
    let (thousand_a, thousand_b) = (
        v["parent"].as_str().unwrap().to_owned(),
        v["snapshot"].as_str().unwrap().to_owned(),
    );
    git(&g_src, &["add", "-A"]);
    git(&g_src, &["commit", "-qm", "thousand"]);
    let mut stat_thousand = Row::new(
        "diff --stat of snapshots 1,000 files apart",
        "`git diff --stat` of the commits",
        1.0,
    );
    for _ in 0..pairs {
        stat_thousand.cairn.push(time(|| {
            run(Command::new(harness::cairn_binary())
                .arg("--store")
                .arg(&store)
                .args(["diff", "--stat", &thousand_a, &thousand_b]));
        }));
        stat_thousand.other.push(time(|| {
            git(&g_src, &["diff", "--stat", "HEAD~1", "HEAD"]);
        }));
    }

    // Checkout into an empty directory vs cp -a and git worktree add.
    let head = cairn(&store, &["log", c_src.to_str().unwrap(), "-n", "1"])["snapshots"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut vs_cp = Row::new(
        "checkout into an empty directory",
        "`cp -a` of the source tree",
        1.0,
    );
    let mut vs_wt = Row::new(
        "checkout into an empty directory",
        "`git worktree add`",
        0.6,
    );
    for round in 0..pairs {
        let dest = work.join(format!("co-{round}"));
        let d = time(|| {
            cairn(&store, &["checkout", &head, dest.to_str().unwrap()]);
        });
        vs_cp.cairn.push(d);
        vs_wt.cairn.push(d);
        if round + 1 < pairs {
            cairn(&store, &["worktree", "remove", dest.to_str().unwrap()]);
            std::fs::remove_dir_all(&dest).unwrap();
        }
        let cp_dest = work.join(format!("cp-{round}"));
        vs_cp.other.push(time(|| {
            run(Command::new("cp").arg("-a").arg(&c_src).arg(&cp_dest));
        }));
        std::fs::remove_dir_all(&cp_dest).unwrap();
        let wt = work.join(format!("wt-{round}"));
        vs_wt.other.push(time(|| {
            git(
                &g_src,
                &["worktree", "add", "-q", "--detach", wt.to_str().unwrap()],
            );
        }));
        git(
            &g_src,
            &["worktree", "remove", "--force", wt.to_str().unwrap()],
        );
    }

    // Round trip: the last checkout holds exactly the files in scope, byte for byte.
    let last = work.join(format!("co-{}", pairs - 1));
    let checked = verify_round_trip(&c_src, &last, &git(&g_src, &["ls-files"]), &denied);

    // Peak memory.
    let _ = std::fs::remove_dir_all(&store);
    let rss_onboard = peak_rss(
        &[
            harness::cairn_binary(),
            "--store",
            store.to_str().unwrap(),
            "onboard",
            c_src.to_str().unwrap(),
        ],
        work,
    );
    let big = work.join("big");
    std::fs::create_dir_all(&big).unwrap();
    let big_mib: u64 = harness::number("CAIRN_BENCH_BIG_MIB", 2048);
    sh(
        &format!("head -c {}M /dev/urandom > big/blob.bin", big_mib),
        work,
    );
    let big_store = work.join("big-store");
    let rss_big_onboard = peak_rss(
        &[
            harness::cairn_binary(),
            "--store",
            big_store.to_str().unwrap(),
            "onboard",
            big.to_str().unwrap(),
        ],
        work,
    );
    let big_head =
        cairn(&big_store, &["log", big.to_str().unwrap(), "-n", "1"])["snapshots"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
    let big_co = work.join("big-co");
    let rss_big_checkout = peak_rss(
        &[
            harness::cairn_binary(),
            "--store",
            big_store.to_str().unwrap(),
            "checkout",
            &big_head,
            big_co.to_str().unwrap(),
        ],
        work,
    );
    sh("cmp big/blob.bin big-co/blob.bin", work);

    println!(
        "corpus: {} ({files_in_scope} files in scope, {} tracked by git, out of scope: {denied:?})",
        src.display(),
        tracked.len()
    );
    println!();
    println!("| operation | cairn | peer | peer time | ratio | target |");
    println!("|---|---|---|---|---|---|");
    for row in [
        &onboard,
        &unchanged,
        &ten,
        &vs_cp,
        &vs_wt,
        &rollback,
        &diff_ten,
        &status,
        &stat_thousand,
    ]
    .into_iter()
    .chain(&reversible_rows)
    .chain(&served_rows)
    .chain(&merge_rows)
    {
        row.print();
    }
    let ratio = store_bytes as f64 / git_bytes as f64;
    println!(
        "| store size after onboard | {:.0} MB | `.git` after add + commit | {:.0} MB | {:.2} | ≤ 0.70 ({}) |",
        store_bytes as f64 / 1e6,
        git_bytes as f64 / 1e6,
        ratio,
        if ratio <= 0.7 { "meets" } else { "misses" }
    );
    println!();
    println!(
        "store file {:.0} MB (apparent size; disk usage above)",
        store_file as f64 / 1e6
    );
    println!(
        "peak RSS: onboard {rss_onboard:.0} MiB (≤ 300); {big_mib} MiB file: onboard {rss_big_onboard:.0} MiB, checkout {rss_big_checkout:.0} MiB (≤ 300)"
    );
    println!(
        "round trip: {checked} files identical in bytes, exec bit and link target; nothing else in the checkout"
    );
}

/// Two copies of the tree: `<prefix>-cairn` taken by a first checkpoint into
/// `<prefix>-store`, `<prefix>-git` committed as a git repository; and git's file list.
fn twins(src: &Path, work: &Path, prefix: &str) -> (PathBuf, PathBuf, PathBuf, Vec<String>) {
    let c_dir = work.join(format!("{prefix}-cairn"));
    let g_dir = work.join(format!("{prefix}-git"));
    let store = work.join(format!("{prefix}-store"));
    for d in [&c_dir, &g_dir] {
        run(Command::new("cp").arg("-a").arg(src).arg(d));
    }
    cairn(
        &store,
        &["checkpoint", c_dir.to_str().unwrap(), "--name", "start"],
    );
    git(&g_dir, &["init", "-q"]);
    git(&g_dir, &["add", "-A"]);
    git(&g_dir, &["commit", "-qm", "start"]);
    let tracked = tracked_files(&g_dir);
    (c_dir, g_dir, store, tracked)
}

/// The two copies `twins` made, for timing the same step on both.
struct Twin<'a> {
    c_dir: &'a Path,
    g_dir: &'a Path,
    store: &'a Path,
    tracked: &'a [String],
}

impl Twin<'_> {
    /// Changes 10 files in both and times a checkpoint against `git add -A && git commit`;
    /// then changes 10 more and times a rewind against `git reset --hard && git clean -fd`.
    fn checkpoint_then_rewind(&self, round: usize, checkpoint: &mut Row, rewind: &mut Row) {
        let c = self.c_dir.to_str().unwrap();
        touch_files(self.c_dir, self.tracked, round, 10);
        touch_files(self.g_dir, self.tracked, round, 10);
        checkpoint.cairn.push(time(|| {
            let v = cairn(self.store, &["checkpoint", c]);
            assert_eq!(v["modified"], 10, "{v}");
        }));
        checkpoint.other.push(time(|| {
            git(self.g_dir, &["add", "-A"]);
            git(self.g_dir, &["commit", "-qm", "checkpoint"]);
        }));
        touch_files(self.c_dir, self.tracked, round + 100, 10);
        touch_files(self.g_dir, self.tracked, round + 100, 10);
        rewind.cairn.push(time(|| {
            let v = cairn(self.store, &["rewind", c]);
            assert_eq!(v["written"].as_array().unwrap().len(), 10, "{v}");
        }));
        rewind.other.push(time(|| {
            git(self.g_dir, &["reset", "-q", "--hard"]);
            git(self.g_dir, &["clean", "-qfd"]);
        }));
    }

    /// A tool call changes 10 files in both and the harness records it (a snapshot, a
    /// commit); times undoing it against `git reset --hard HEAD~1`.
    fn snapshot_then_undo(&self, round: usize, undo: &mut Row) {
        let c = self.c_dir.to_str().unwrap();
        touch_files(self.c_dir, self.tracked, round, 10);
        touch_files(self.g_dir, self.tracked, round, 10);
        cairn(self.store, &["snapshot", c]);
        git(self.g_dir, &["commit", "-qam", "tool call"]);
        undo.cairn.push(time(|| {
            let v = cairn(self.store, &["undo", c]);
            assert_eq!(v["reverted"].as_array().unwrap().len(), 10, "{v}");
        }));
        undo.other.push(time(|| {
            git(self.g_dir, &["reset", "-q", "--hard", "HEAD~1"]);
        }));
    }
}

/// Checkpoint, rewind and undo of 10 changed files, each against the git command a
/// harness would use for it, in twin copies of the tree.
fn reversible(src: &Path, work: &Path, pairs: usize) -> Vec<Row> {
    let (c_dir, g_dir, store, tracked) = twins(src, work, "r");

    let mut checkpoint = Row::new(
        "checkpoint after 10 files changed",
        "`git add -A && git commit`",
        0.25,
    );
    let mut rewind = Row::new(
        "rewind of 10 changed files",
        "`git reset --hard && git clean -fd`",
        0.25,
    );
    let mut undo = Row::new(
        "undo of a 10-file change",
        "`git reset --hard HEAD~1`",
        0.25,
    );
    for round in 0..pairs {
        let twin = Twin {
            c_dir: &c_dir,
            g_dir: &g_dir,
            store: &store,
            tracked: &tracked,
        };
        twin.checkpoint_then_rewind(round, &mut checkpoint, &mut rewind);
        twin.snapshot_then_undo(round + 200, &mut undo);
    }
    vec![checkpoint, rewind, undo]
}

/// The same verbs with `cairn serve` running on the store (every command goes through it,
/// and its watcher spares the `lstat` of directories where nothing happened), against the
/// same git commands, in twin copies of the tree.
fn served(src: &Path, work: &Path, pairs: usize) -> Vec<Row> {
    let (c_dir, g_dir, store, tracked) = twins(src, work, "s");
    let c = c_dir.to_str().unwrap();
    let mut server = Command::new(harness::cairn_binary())
        .arg("--store")
        .arg(&store)
        .arg("serve")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let socket = camino::Utf8PathBuf::from_path_buf(store.join("serve.sock")).unwrap();
    while cairn_client::Client::connect(&socket).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The first captures through the server set up its watches.
    for _ in 0..2 {
        cairn(&store, &["snapshot", c]);
    }

    let mut unchanged = Row::new(
        "served: snapshot, nothing changed",
        "`git add -A && git commit --allow-empty`",
        0.25,
    );
    let mut ten = Row::new(
        "served: snapshot after 10 files changed",
        "`git add -A && git commit`",
        0.25,
    );
    let mut status = Row::new("served: status, nothing changed", "`git status`", 0.25);
    let mut checkpoint = Row::new(
        "served: checkpoint after 10 files changed",
        "`git add -A && git commit`",
        0.25,
    );
    let mut rewind = Row::new(
        "served: rewind of 10 changed files",
        "`git reset --hard && git clean -fd`",
        0.25,
    );
    let mut rollback = Row::new(
        "served: rollback of 10 changed files",
        "`git reset --hard && git clean -fd`",
        0.25,
    );
    let mut undo = Row::new(
        "served: undo of a 10-file change",
        "`git reset --hard HEAD~1`",
        0.25,
    );
    for round in 0..pairs {
        touch_files(&c_dir, &tracked, round + 300, 10);
        touch_files(&g_dir, &tracked, round + 300, 10);
        ten.cairn.push(time(|| {
            let v = cairn(&store, &["snapshot", c]);
            assert_eq!(v["modified"], 10, "{v}");
        }));
        ten.other.push(time(|| {
            git(&g_dir, &["add", "-A"]);
            git(&g_dir, &["commit", "-qm", "ten"]);
        }));

        // Nothing changed since that snapshot (the next tool call wrote nothing).
        unchanged.cairn.push(time(|| {
            let v = cairn(&store, &["snapshot", c]);
            assert_eq!(v["changed"], false, "{v}");
        }));
        unchanged.other.push(time(|| {
            git(&g_dir, &["add", "-A"]);
            git(&g_dir, &["commit", "-q", "--allow-empty", "-m", "x"]);
        }));
        status.cairn.push(time(|| {
            let v = cairn(&store, &["status", c]);
            assert_eq!(v["stats"]["files"], 0, "{v}");
        }));
        status.other.push(time(|| {
            git(&g_dir, &["status", "--porcelain"]);
        }));

        let twin = Twin {
            c_dir: &c_dir,
            g_dir: &g_dir,
            store: &store,
            tracked: &tracked,
        };
        twin.checkpoint_then_rewind(round + 400, &mut checkpoint, &mut rewind);

        let head = cairn(&store, &["log", c, "-n", "1"])["snapshots"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        touch_files(&c_dir, &tracked, round + 600, 10);
        touch_files(&g_dir, &tracked, round + 600, 10);
        rollback.cairn.push(time(|| {
            let v = cairn(&store, &["rollback", c, &head]);
            assert_eq!(v["written"].as_array().unwrap().len(), 10, "{v}");
        }));
        rollback.other.push(time(|| {
            git(&g_dir, &["reset", "-q", "--hard"]);
            git(&g_dir, &["clean", "-qfd"]);
        }));
        twin.snapshot_then_undo(round + 700, &mut undo);
    }
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    let _ = server.wait();
    vec![unchanged, ten, status, checkpoint, rewind, rollback, undo]
}

/// `cairn merge` of a snapshot 10 files away from the onboarded repository, against
/// committing the same 10 changes with git in a copy of that repository; and the first merge
/// into a fresh store (every blob exported once) against `git add -A && git commit` of the
/// whole tree.
fn merge(src: &Path, work: &Path, pairs: usize) -> Vec<Row> {
    let (repo, peer, agent) = (
        work.join("m-repo"),
        work.join("m-peer"),
        work.join("m-agent"),
    );
    run(Command::new("cp").arg("-a").arg(src).arg(&repo));
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "base"]);
    run(Command::new("cp").arg("-a").arg(&repo).arg(&peer));
    let tracked = tracked_files(&repo);
    let mut first = Row::new(
        "first merge into a fresh store (every blob hashed for the map)",
        "`git add -A && git commit` of the whole tree",
        1.0,
    );
    let mut warm = Row::new(
        "merge of a snapshot 10 files past the last merged one, warm map",
        "`git add -A && git commit` of the 10 changes",
        1.0,
    );
    let merge_to = |store: &Path, snap: &str, branch: &str| {
        let into = repo.to_str().unwrap();
        let v = cairn(store, &["merge", snap, "--into", into, "--branch", branch]);
        assert_eq!(v["merged"], true, "{v}");
    };
    for round in 0..pairs {
        let store = work.join(format!("m-store-{round}"));
        let _ = std::fs::remove_dir_all(&agent);
        let base = cairn(&store, &["onboard", repo.to_str().unwrap()])["snapshot"]
            .as_str()
            .unwrap()
            .to_owned();
        cairn(&store, &["checkout", &base, agent.to_str().unwrap()]);
        touch_files(&agent, &tracked, round, 10);
        let snap = cairn(&store, &["snapshot", agent.to_str().unwrap()])["snapshot"]
            .as_str()
            .unwrap()
            .to_owned();
        first
            .cairn
            .push(time(|| merge_to(&store, &snap, &format!("first-{round}"))));
        let _ = std::fs::remove_dir_all(peer.join(".git"));
        first.other.push(time(|| {
            git(&peer, &["init", "-q"]);
            git(&peer, &["add", "-A"]);
            git(&peer, &["commit", "-qm", "all"]);
        }));
        // Ten more changes on the same store: the map knows every unchanged blob.
        touch_files(&agent, &tracked, round + 50, 10);
        let snap = cairn(&store, &["snapshot", agent.to_str().unwrap()])["snapshot"]
            .as_str()
            .unwrap()
            .to_owned();
        touch_files(&peer, &tracked, round + 50, 10);
        warm.cairn
            .push(time(|| merge_to(&store, &snap, &format!("warm-{round}"))));
        warm.other.push(time(|| {
            git(&peer, &["add", "-A"]);
            git(&peer, &["commit", "-qm", "ten"]);
        }));
        let changed = git(
            &repo,
            &["diff", "--name-only", "HEAD", &format!("warm-{round}")],
        );
        assert_eq!(changed.lines().count(), 20, "{changed}");
    }
    vec![first, warm]
}

/// The checkout must hold exactly what git tracks, less what cairn reported as out of
/// scope (deny patterns), byte for byte.
fn verify_round_trip(src: &Path, dest: &Path, tracked: &str, skipped: &[String]) -> usize {
    use std::collections::BTreeSet;
    let want: BTreeSet<&str> = tracked
        .lines()
        .filter(|l| !l.is_empty() && !skipped.iter().any(|s| s == l))
        .collect();
    let mut got = BTreeSet::new();
    let mut stack = vec![dest.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = p.symlink_metadata().unwrap();
            if m.is_dir() {
                stack.push(p);
            } else {
                got.insert(p.strip_prefix(dest).unwrap().to_str().unwrap().to_owned());
            }
        }
    }
    let got_refs: BTreeSet<&str> = got.iter().map(String::as_str).collect();
    assert_eq!(
        got_refs, want,
        "the checkout holds exactly the paths in scope"
    );
    for rel in &want {
        let (a, b) = (src.join(rel), dest.join(rel));
        let (ma, mb) = (a.symlink_metadata().unwrap(), b.symlink_metadata().unwrap());
        if ma.file_type().is_symlink() {
            assert_eq!(
                std::fs::read_link(&a).unwrap(),
                std::fs::read_link(&b).unwrap(),
                "{rel}"
            );
        } else {
            assert_eq!(
                ma.permissions().mode() & 0o100,
                mb.permissions().mode() & 0o100,
                "{rel}"
            );
            assert!(
                std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
                "{rel} differs"
            );
        }
    }
    want.len()
}
