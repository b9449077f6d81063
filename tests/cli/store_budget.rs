//! A store within a budget: `gc --keep-within/--max-size` and `CAIRN_STORE_BUDGET`.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};

use std::process::Output;

use crate::support::{Env, stderr};

/// `len` bytes no compressor shrinks, different for each `seed`.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

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
    let store_handle = cas::Store::open(
        &store,
        &cas::OpenOptions {
            read_only: true,
            ..cas::OpenOptions::default()
        },
    )
    .unwrap();
    let reader = store_handle.reader().unwrap();
    let record = fs_manager::RegistryRead::worktree(&reader, &wt)
        .unwrap()
        .unwrap();
    let baseline = record.task.as_ref().unwrap().baseline;
    assert!(record.checkpoints.len() < 9, "{:?}", record.checkpoints);
    assert!(record.checkpoint("middle").is_some());
    assert!(record.checkpoints.iter().any(|c| c.snapshot == baseline));
    for c in &record.checkpoints {
        assert!(reader.has_snapshot(c.snapshot).unwrap(), "{c:?}");
    }
    drop((reader, store_handle));

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
    let out = with_budget(&env, "2GB", &["gc", "--prune-ops", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("CAIRN_STORE_BUDGET=2GB: not a whole number of bytes"),
        "{}",
        stderr(&out)
    );
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
