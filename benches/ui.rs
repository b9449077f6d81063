//! `cairn ui` in Debian's chromium: time to first render of a worktree's timeline of 10,000
//! snapshots and of a snapshot that changed 1,000 files, read from the page's own marks
//! (`performance.mark("cairn:rendered:<view>")`, from the navigation's start).
//!
//! `cargo bench -p cairn-cli --bench ui`. The store: a chain of `CAIRN_BENCH_SNAPSHOTS`
//! (default 10,000) snapshots, each changing one line of a file, checked out as a
//! worktree; and a project of 1,000 files of 40 lines, onboarded, then each file edited in
//! two places and snapshotted. One `cairn ui` serves it; each run opens the view in a new
//! browser context (no cache, no cookie). Rounds: `CAIRN_BENCH_PAIRS` (default 3), the two
//! views interleaved; medians, with what the time went to (the page's shell, the verb
//! calls, the drawing after them). Goal: under 300 ms each.
#![allow(missing_docs)]

#[path = "harness/mod.rs"]
mod harness;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use harness::{cairn, load, median, run, secs};

/// Writes a chain of `count` snapshots into `store` through the library, as many agent
/// turns would leave it: each changes one line of `progress.txt` and carries a message and
/// labels, a second apart. Returns the newest.
fn history(store: &Path, count: usize) -> String {
    let store = cas::Store::open(
        camino::Utf8Path::from_path(store).unwrap(),
        &cas::OpenOptions::default(),
    )
    .unwrap();
    let start = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(count as i64 + 60);
    let readme = b"# long\n\nAn agent's long session.\n".to_vec();
    let mut parent: Option<cas::SnapshotId> = None;
    for first in (0..count).step_by(1000) {
        let mut batch = cas::WriteBatch::new();
        for turn in first..(first + 1000).min(count) {
            let progress = format!("turns done: {turn}\nlast: step {turn}\n").into_bytes();
            let entries = [("README.md", &readme), ("progress.txt", &progress)]
                .into_iter()
                .map(|(name, bytes)| cas::TreeEntry {
                    name: name.as_bytes().to_vec(),
                    kind: cas::EntryKind::File,
                    id: batch.add_blob(cas::PreparedBlob::new(bytes)).into(),
                    size: bytes.len() as u64,
                })
                .collect();
            let tree = batch.add_tree(cas::Tree::new(entries).unwrap());
            let id = batch.add_snapshot(cas::Snapshot {
                tree,
                parents: parent.into_iter().collect(),
                created: start + jiff::SignedDuration::from_secs(turn as i64),
                message: format!("Turn {turn}: step {turn}"),
                labels: [("turn".to_owned(), turn.to_string())]
                    .into_iter()
                    .collect(),
                source: None,
            });
            parent = Some(id);
        }
        store.write(&batch).unwrap();
    }
    parent.expect("at least one snapshot").to_string()
}

/// Line `line` of file `file` of the wide project.
fn wide_line(file: usize, line: usize) -> String {
    format!("    let value_{line} = compute({file}, {line}); // file {file}, line {line}\n")
}

/// A project of `files` files of 40 lines in 20 folders at `dir`, onboarded; then each
/// file changed in two places and snapshotted. The snapshot.
fn wide_change(store: &Path, dir: &Path, files: usize) -> String {
    let path = |i: usize| dir.join(format!("mod{:02}/file{i:04}.rs", i % 20));
    for i in 0..files {
        std::fs::create_dir_all(path(i).parent().unwrap()).unwrap();
        let text: String = (0..40).map(|l| wide_line(i, l)).collect();
        std::fs::write(path(i), text).unwrap();
    }
    cairn(store, &["onboard", dir.to_str().unwrap(), "-m", "before"]);
    for i in 0..files {
        let text: String = (0..40)
            .map(|l| match l {
                10 | 30 => wide_line(i, l).replace("compute", "compute_fast"),
                _ => wide_line(i, l),
            })
            .collect();
        std::fs::write(path(i), text).unwrap();
    }
    let made = cairn(
        store,
        &["snapshot", dir.to_str().unwrap(), "-m", "use compute_fast"],
    );
    assert_eq!(made["modified"], files, "{made}");
    made["snapshot"].as_str().unwrap().to_owned()
}

fn millis(v: &serde_json::Value) -> Duration {
    Duration::from_secs_f64(v.as_f64().expect("a time in ms") / 1000.0)
}

fn main() {
    let rounds: usize = harness::number("CAIRN_BENCH_PAIRS", 3);
    let count: usize = harness::number("CAIRN_BENCH_SNAPSHOTS", 10_000);
    let scenarios = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/ui");
    run(Command::new("bash").arg(scenarios.join("setup.sh")));

    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-ui");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let store = work.join("store");
    cairn(&store, &["init"]);
    let tip = history(&store, count);
    let long = work.join("long");
    cairn(&store, &["checkout", &tip, long.to_str().unwrap()]);
    let wide = wide_change(&store, &work.join("wide"), 1000);

    let mut ui = Command::new(harness::cairn_binary())
        .arg("--store")
        .arg(&store)
        .args(["--json", "ui", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(ui.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = serde_json::from_str::<serde_json::Value>(line.trim())
        .unwrap_or_else(|e| panic!("cairn ui --json printed {line:?}: {e}"))["url"]
        .as_str()
        .unwrap()
        .to_owned();

    let input = serde_json::json!({
        "url": url,
        "rounds": rounds,
        "screenshots": work.join("screenshots"),
        "cases": [
            {"name": "timeline", "worktree": long, "view": "timeline",
             "items": "timeline-row"},
            {"name": "diff", "hash": format!("#/snapshot/{wide}"), "view": "snapshot",
             "items": "diff-file"},
        ],
    });
    let load_before = load();
    let out = run(Command::new("node")
        .arg(scenarios.join("bench.mjs"))
        .env("CAIRN_UI_INPUT", input.to_string()));
    let _ = ui.kill();
    let _ = ui.wait();
    let seen: serde_json::Value = serde_json::from_str(out.trim()).unwrap();

    println!(
        "cairn ui, first render in chromium ({rounds} rounds interleaved; load {load_before} \
         before, {} after)",
        load()
    );
    for (case, label) in [
        ("timeline", format!("timeline of {count} snapshots")),
        ("diff", "a snapshot of 1,000 changed files".to_owned()),
    ] {
        let runs = seen[case].as_array().unwrap();
        let median_of = |key: &str| -> Duration {
            median(&runs.iter().map(|r| millis(&r[key])).collect::<Vec<_>>())
        };
        let renders: Vec<String> = runs.iter().map(|r| secs(millis(&r["render"]))).collect();
        let complete = match runs[0]["complete"] {
            serde_json::Value::Null => String::new(),
            _ => format!("; all files in {}", secs(median_of("complete"))),
        };
        println!(
            "  {label:<36} first render {:>9} (runs: {}); of it: page shell {}, verb calls \
             {}, drawing after the data {}{complete}; {} shown",
            secs(median_of("render")),
            renders.join(", "),
            secs(median_of("shell")),
            secs(median_of("verbs")),
            secs(median_of("drawn")),
            runs[0]["items"]
        );
    }
}
