//! A store within a budget: `gc --keep-within/--max-size` and `CAIRN_STORE_BUDGET`.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};

use std::process::Output;

use crate::support::{Env, noise, stderr};

/// `cairn --store <store> args…` with `CAIRN_STORE_BUDGET=budget`.
fn with_budget(env: &Env, budget: &str, args: &[&str]) -> Output {
    env.command()
        .args(["--store", env.store().as_str()])
        .args(args)
        .env("CAIRN_STORE_BUDGET", budget)
        .output()
        .unwrap()
}

/// The bytes every regular file under `dir` takes (what the budget counts).
fn folder_bytes(dir: &Utf8Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = std::fs::symlink_metadata(entry.path()).unwrap();
        if meta.is_dir() {
            total += folder_bytes(Utf8Path::from_path(&entry.path()).unwrap());
        } else if meta.is_file() {
            total += meta.len();
        }
    }
    total
}

fn files_of(dir: &Utf8Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        out.insert(
            entry.file_name().into_string().unwrap(),
            std::fs::read(entry.path()).unwrap(),
        );
    }
    out
}

/// The JSON of a command that must succeed.
fn succeeds((code, v): (i32, serde_json::Value)) -> serde_json::Value {
    assert_eq!(code, 0, "{v}");
    v
}

/// How many entries worktree `wt`'s op log has.
fn op_count(env: &Env, wt: &Utf8Path) -> u64 {
    let v = succeeds(env.json(&["op", "log", wt.as_str()]));
    v["ops"].as_array().unwrap().len() as u64
}

/// Worktree `wt`'s registry record, read from the store.
fn worktree_record(env: &Env, wt: &Utf8Path) -> fs_manager::WorktreeRecord {
    let store = cas::Store::open(
        &env.store(),
        &cas::OpenOptions {
            read_only: true,
            ..cas::OpenOptions::default()
        },
    )
    .unwrap();
    let reader = store.reader().unwrap();
    fs_manager::RegistryRead::worktree(&reader, wt)
        .unwrap()
        .unwrap()
}

const BIG: usize = 400 << 10;
const BUDGET: u64 = 4 << 20;

/// A worktree snapshotted 36 times with a large file changing each time (about 14 MB
/// stored), every fourth time as an unnamed checkpoint, with a ref on an early snapshot and
/// a named checkpoint half way.
struct Filled {
    env: Env,
    wt: Utf8PathBuf,
    /// Named snapshots (ref `early`, checkpoint `middle`, the head) and their files.
    named: Vec<(String, String, BTreeMap<String, Vec<u8>>)>,
}

fn filled() -> Filled {
    let env = Env::new();
    let wt = env.path().join("wt");
    std::fs::create_dir(&wt).unwrap();
    std::fs::write(wt.join("base.bin"), noise(1000, 300 << 10)).unwrap();
    std::fs::write(wt.join("big.bin"), noise(0, BIG)).unwrap();
    let (code, v) = env.json(&["onboard", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    let mut named = Vec::new();
    for i in 1..=36u64 {
        std::fs::write(wt.join("big.bin"), noise(i, BIG)).unwrap();
        std::fs::write(wt.join("note.txt"), format!("step {i}\n")).unwrap();
        let (code, v) = if i == 20 {
            env.json(&["checkpoint", wt.as_str(), "--name", "middle"])
        } else if i % 4 == 0 {
            env.json(&["checkpoint", wt.as_str()])
        } else {
            env.json(&["snapshot", wt.as_str(), "-m", &format!("step {i}")])
        };
        assert_eq!(code, 0, "{v}");
        let id = v["snapshot"].as_str().unwrap().to_owned();
        if i == 5 {
            let (code, v) = env.json(&["ref", "set", "early", &id]);
            assert_eq!(code, 0, "{v}");
            named.push(("early".to_owned(), id, files_of(&wt)));
        } else if i == 20 {
            named.push(("middle".to_owned(), id, files_of(&wt)));
        } else if i == 36 {
            named.push(("head".to_owned(), id, files_of(&wt)));
        }
    }
    Filled { env, wt, named }
}

#[test]
fn gc_max_size_brings_the_store_file_under_the_budget_and_named_snapshots_stay_whole() {
    let Filled { env, wt, named } = filled();
    let store = env.store();
    let before = folder_bytes(&store);
    assert!(
        before > 3 * BUDGET,
        "the store must start well past the budget: {before}"
    );

    // Past the budget: every command says so once, with the gc command that fixes it.
    let out = with_budget(&env, &BUDGET.to_string(), &["ref", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = stderr(&out);
    assert_eq!(said.matches("CAIRN_STORE_BUDGET").count(), 1, "{said}");
    assert!(
        said.contains(&format!("cairn gc --store {store} --max-size {BUDGET}")),
        "{said}"
    );

    // Recent entries are never dropped: with every entry within --keep-within, history
    // stays, and `retained` says the recent ops keep it.
    let (code, v) = env.json(&[
        "gc",
        "--dry-run",
        "--keep-within",
        "1",
        "--max-size",
        &BUDGET.to_string(),
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["ops_pruned"], 0, "{v}");
    assert_eq!(v["removed"].as_array().unwrap().len(), 0, "{v}");
    let retained = v["retained"].as_array().unwrap();
    assert!(retained.iter().any(|r| r["reason"] == "recent op"), "{v}");
    let kept: u64 = retained.iter().map(|r| r["bytes"].as_u64().unwrap()).sum();
    assert!(
        kept > 36 * BIG as u64,
        "recent ops keep every big file: {kept}"
    );
    assert_eq!(folder_bytes(&store), before, "a dry run changes nothing");

    let (code, v) = env.json(&["gc", "--max-size", &BUDGET.to_string()]);
    assert_eq!(code, 0, "{v}");
    let db = std::fs::metadata(store.join(cas::DATABASE_FILE))
        .unwrap()
        .len();
    assert!(db <= BUDGET, "store file {db} bytes, budget {BUDGET}: {v}");
    assert!(folder_bytes(&store) <= BUDGET);
    assert_eq!(v["store_bytes"].as_u64(), Some(folder_bytes(&store)));
    assert!(v["ops_pruned"].as_u64().unwrap() > 0, "{v}");
    assert!(v["bytes_freed"].as_u64().unwrap() > 20 * BIG as u64, "{v}");
    let retained = v["retained"].as_array().unwrap();
    let reasons: Vec<(&str, &str)> = retained
        .iter()
        .map(|r| {
            (
                r["reason"].as_str().unwrap(),
                r["name"].as_str().unwrap_or(""),
            )
        })
        .collect();
    for want in [
        ("ref", "early"),
        ("worktree head", ""),
        ("named checkpoint", "middle"),
    ] {
        assert!(reasons.contains(&want), "{want:?} not in {reasons:?}");
    }
    let (_, head_snap, _) = &named[2];
    assert!(
        retained.iter().any(|r| r["reason"] == "worktree head"
            && r["worktree"] == wt.as_str()
            && r["snapshot"] == head_snap.as_str()),
        "{v}"
    );

    // Old unnamed checkpoints went from the stack; the named one, the task's baseline
    // (the first checkpoint) and the head stay, and every one left is whole.
    assert!(v["checkpoints_pruned"].as_u64().unwrap() > 0, "{v}");
    let record = worktree_record(&env, &wt);
    let baseline = record.task.as_ref().unwrap().baseline;
    assert!(record.checkpoints.len() < 9, "{:?}", record.checkpoints);
    assert!(record.checkpoint("middle").is_some());
    assert!(record.checkpoints.iter().any(|c| c.snapshot == baseline));
    for c in &record.checkpoints {
        assert_eq!(
            env.cairn(&["show", &c.snapshot.to_hex()]).status.code(),
            Some(0),
            "{c:?}"
        );
    }

    // Every named snapshot checks out byte-identical.
    for (name, id, files) in &named {
        let dest = env.path().join(format!("out-{name}"));
        let spec = if name == "head" {
            id.as_str()
        } else {
            name.as_str()
        };
        let out = env
            .command()
            .current_dir(&wt)
            .args(["--store", store.as_str(), "checkout", spec, dest.as_str()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        assert!(
            files_of(&dest) == *files,
            "{name} is not what was snapshotted"
        );
    }

    // What it pruned is no damage: fsck is clean, log ends where history was cut, a plain
    // gc and undo of the newest change still work, and the store no longer warns.
    let (code, v) = env.json(&["fsck"]);
    assert_eq!(code, 0, "{v}");
    let (code, v) = env.json(&["log", wt.as_str(), "--stat"]);
    assert_eq!(code, 0, "{v}");
    let logged = v["snapshots"].as_array().unwrap().len();
    assert!((2..37).contains(&logged), "{logged} snapshots logged: {v}");
    let (code, v) = env.json(&["gc"]);
    assert_eq!(code, 0, "{v}");
    let (code, v) = env.json(&["undo", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    let out = with_budget(&env, &BUDGET.to_string(), &["ref", "list"]);
    assert!(
        !stderr(&out).contains("CAIRN_STORE_BUDGET"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_store_budget_that_is_not_a_number_is_named_and_prune_ops_still_works() {
    let env = Env::new();
    env.commit(&[("a", b"1")], vec![], "m");
    let wt = env.path().join("wt");
    std::fs::create_dir(&wt).unwrap();
    std::fs::write(wt.join("f"), "one\n").unwrap();
    succeeds(env.json(&["onboard", wt.as_str()]));
    std::fs::write(wt.join("f"), "two\n").unwrap();
    succeeds(env.json(&["snapshot", wt.as_str()]));
    let logged = op_count(&env, &wt);
    assert!(logged >= 2, "{logged} op-log entries");
    let out = with_budget(&env, "2GB", &["--json", "gc", "--prune-ops", "0"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("CAIRN_STORE_BUDGET=2GB: not a whole number of bytes"),
        "{}",
        stderr(&out)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ops_pruned"].as_u64(), Some(logged), "{v}");
    assert_eq!(op_count(&env, &wt), 0, "every entry was older than 0 days");
    let (code, v) = env.json(&["gc", "--remote", "origin", "--max-size", "10"]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-size"),
        "{v}"
    );
}

/// A rewind's capture of edits never snapshotted is named only by the rewind's op-log entry.
/// No budget drops the change `undo` would revert, so the edits come back whole.
#[test]
fn gc_max_size_keeps_what_undo_needs_to_bring_back_rewound_edits() {
    let env = Env::new();
    let wt = env.path().join("wt");
    std::fs::create_dir(&wt).unwrap();
    std::fs::write(wt.join("big.bin"), noise(1, BIG)).unwrap();
    succeeds(env.json(&["checkpoint", wt.as_str()]));
    std::fs::write(wt.join("big.bin"), noise(2, BIG)).unwrap();
    let between = succeeds(env.json(&["snapshot", wt.as_str()]))["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(wt.join("big.bin"), noise(3, BIG)).unwrap();
    succeeds(env.json(&["checkpoint", wt.as_str()]));
    std::fs::write(wt.join("big.bin"), noise(4, BIG)).unwrap();
    std::fs::write(wt.join("new.txt"), "never snapshotted\n").unwrap();
    let edited = files_of(&wt);
    succeeds(env.json(&["rewind", wt.as_str()]));
    assert_ne!(files_of(&wt), edited);

    let v = succeeds(env.json(&["gc", "--max-size", "1"]));
    assert!(
        v["ops_pruned"].as_u64().unwrap() > 0,
        "the budget cut history: {v}"
    );
    let out = env.cairn(&["show", &between]);
    assert_ne!(
        out.status.code(),
        Some(0),
        "only old history kept {between}"
    );
    succeeds(env.json(&["undo", wt.as_str()]));
    assert!(
        files_of(&wt) == edited,
        "the rewound edits are back, byte for byte"
    );
    let retained = v["retained"].as_array().unwrap();
    assert!(
        retained
            .iter()
            .any(|r| r["reason"] == "undo" && r["worktree"] == wt.as_str()),
        "{v}"
    );

    succeeds(env.json(&["fsck"]));
}

/// A real run (not a dry run) under a budget nothing can meet keeps every op-log entry and
/// unnamed checkpoint within --keep-within, and a snapshot only a remote ref keeps.
#[test]
fn gc_max_size_keeps_recent_entries_checkpoints_and_remote_refs() {
    let env = Env::new();
    let wt = env.path().join("wt");
    std::fs::create_dir(&wt).unwrap();
    std::fs::write(wt.join("a.txt"), "a\n").unwrap();
    succeeds(env.json(&["onboard", wt.as_str()]));
    // The first checkpoint becomes the task's baseline; the second is only a checkpoint.
    let mut states = Vec::new();
    for i in 1..=5u64 {
        std::fs::write(wt.join("big.bin"), noise(i, BIG)).unwrap();
        let verb = if i % 2 == 0 { "checkpoint" } else { "snapshot" };
        let v = succeeds(env.json(&[verb, wt.as_str()]));
        states.push((v["snapshot"].as_str().unwrap().to_owned(), files_of(&wt)));
    }
    let checkpoints = worktree_record(&env, &wt).checkpoints;
    let ops = op_count(&env, &wt);

    let pushed = env.commit(&[("p.bin", &noise(9, BIG))], vec![], "pushed");
    let remote = format!("file://{}", env.path().join("remote"));
    succeeds(env.json(&["remote", "add", "origin", &remote]));
    succeeds(env.json(&["ref", "set", "p", &pushed.to_hex()]));
    succeeds(env.json(&["push", "p"]));
    succeeds(env.json(&["ref", "rm", "p"]));

    let v = succeeds(env.json(&["gc", "--keep-within", "1", "--max-size", "1"]));
    assert_eq!(v["dry_run"], false, "{v}");
    assert_eq!(v["ops_pruned"], 0, "{v}");
    assert_eq!(v["checkpoints_pruned"], 0, "{v}");
    assert_eq!(op_count(&env, &wt), ops);
    assert_eq!(worktree_record(&env, &wt).checkpoints, checkpoints);
    let retained = v["retained"].as_array().unwrap();
    for reason in ["checkpoint", "recent op", "remote ref"] {
        assert!(
            retained.iter().any(|r| r["reason"] == reason),
            "{reason}: {v}"
        );
    }
    assert!(
        retained
            .iter()
            .any(|r| r["reason"] == "remote ref" && r["snapshot"] == pushed.to_hex().as_str()),
        "{v}"
    );

    // Every state is still whole: each checks out byte-identical, the pushed one too.
    for (i, (id, files)) in states.iter().enumerate() {
        let dest = env.path().join(format!("out-{i}"));
        succeeds(env.json(&["checkout", id, dest.as_str()]));
        assert!(
            files_of(&dest) == *files,
            "state {i} is not what was snapshotted"
        );
    }
    let dest = env.path().join("out-pushed");
    succeeds(env.json(&["checkout", &pushed.to_hex(), dest.as_str()]));
    assert_eq!(std::fs::read(dest.join("p.bin")).unwrap(), noise(9, BIG));
    succeeds(env.json(&["fsck"]));
}
