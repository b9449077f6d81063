//! Reversible work: checkpoint, rewind, undo/redo, op log, review/accept/discard, recover,
//! in place in a git repository and in isolated worktrees.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;

use camino::{Utf8Path, Utf8PathBuf};

use crate::support::{Env, git, stderr, stdout};

/// Every file under `root` except `.git/`: path → (bytes, executable), symlinks as
/// `-> target`.
pub fn files(root: &Utf8Path) -> BTreeMap<String, (Vec<u8>, bool)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let path = Utf8PathBuf::from_path_buf(e.path()).unwrap();
            let rel = path.strip_prefix(root).unwrap().to_string();
            if rel == ".git" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(
                    rel,
                    (format!("-> {}", target.display()).into_bytes(), false),
                );
            } else if meta.is_dir() {
                stack.push(path);
            } else {
                let exec = meta.permissions().mode() & 0o100 != 0;
                out.insert(rel, (std::fs::read(&path).unwrap(), exec));
            }
        }
    }
    out
}

/// Every file under `.git/` with its bytes: what git owns.
fn git_dir(root: &Utf8Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.join(".git")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = Utf8PathBuf::from_path_buf(e.unwrap().path()).unwrap();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(root).unwrap().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

fn write(root: &Utf8Path, path: &str, content: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}\n{}",
        stderr(out),
        stdout(out)
    );
    stdout(out)
}

#[test]
fn in_place_checkpoints_never_touch_git_and_rewind_spares_ignored_files() {
    let env = Env::new();
    let repo = env.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    write(&repo, ".gitignore", "build/\n*.log\n");
    write(&repo, "src/lib.rs", "fn a() {}\n");
    write(&repo, "README", "readme\n");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "init"]);
    write(&repo, "README", "stashed edit\n");
    git(&repo, &["stash", "-q"]);
    write(&repo, "notes.txt", "untracked before the task\n");
    write(&repo, "build/out.bin", "ignored build output\n");
    write(&repo, "run.log", "ignored log\n");
    let git_before = git_dir(&repo);

    let (code, first) = env.json(&["checkpoint", repo.as_str(), "--name", "start"]);
    assert_eq!(code, 0, "{first}");
    assert_eq!(first["name"], "start");
    assert_eq!(first["onboarded"], true);
    assert_eq!(first["task_started"], true);
    let start_files = files(&repo);

    // The agent edits with any tool, a shell command included.
    write(&repo, "src/lib.rs", "fn a() { broken }\n");
    std::fs::remove_file(repo.join("notes.txt")).unwrap();
    let sh = std::process::Command::new("sh")
        .arg("-c")
        .arg("echo generated > gen.txt && echo more >> build/out.bin")
        .current_dir(&repo)
        .status()
        .unwrap();
    assert!(sh.success());
    let ignored_now = std::fs::read(repo.join("build/out.bin")).unwrap();

    let (code, status) = env.json(&["status", repo.as_str()]);
    assert_eq!(code, 0);
    assert_eq!(status["stats"]["files"], 3, "{status}");
    let out = env.cairn(&["status", "--short", repo.as_str()]);
    assert_eq!(ok(&out), "[checkpoint: 3 files changed]\n");

    let (code, rewound) = env.json(&["rewind", repo.as_str()]);
    assert_eq!(code, 0, "{rewound}");
    let mut expected = start_files.clone();
    expected.insert("build/out.bin".into(), (ignored_now.clone(), false));
    assert_eq!(
        files(&repo),
        expected,
        "scope restored, ignored files untouched"
    );
    assert_eq!(
        git_dir(&repo),
        git_before,
        "HEAD, refs, index, stash, config unchanged"
    );
    assert!(
        !String::from_utf8(git(&repo, &["log", "--oneline"]))
            .unwrap()
            .contains("cairn"),
        "nothing committed"
    );

    // The rewind is itself undoable: the edits come back.
    let (code, undone) = env.json(&["undo", repo.as_str()]);
    assert_eq!(code, 0, "{undone}");
    assert_eq!(
        std::fs::read_to_string(repo.join("gen.txt")).unwrap(),
        "generated\n"
    );
    assert!(!repo.join("notes.txt").exists());
    assert_eq!(git_dir(&repo), git_before);
}

#[test]
fn a_plain_directory_works_the_same() {
    let env = Env::new();
    let dir = env.path().join("plain");
    write(&dir, "a.txt", "one\n");
    write(&dir, "sub/b.txt", "two\n");
    let (code, _) = env.json(&["checkpoint", dir.as_str()]);
    assert_eq!(code, 0);
    let before = files(&dir);
    write(&dir, "a.txt", "changed\n");
    write(&dir, "sub/new/c.txt", "three\n");
    std::fs::remove_file(dir.join("sub/b.txt")).unwrap();
    ok(&env.cairn(&["rewind", dir.as_str()]));
    assert_eq!(files(&dir), before);
    assert!(
        !dir.join("sub/new").exists(),
        "directories it created are gone"
    );
}

#[test]
fn rewind_by_name_or_latest_with_dry_run_and_forward_again() {
    let env = Env::new();
    let dir = env.path().join("w");
    write(&dir, "f", "v1\n");
    ok(&env.cairn(&["checkpoint", dir.as_str(), "--name", "one"]));
    let v1 = files(&dir);
    write(&dir, "f", "v2\n");
    write(&dir, "g", "new in v2\n");
    ok(&env.cairn(&["checkpoint", dir.as_str(), "--name", "two"]));
    let v2 = files(&dir);
    write(&dir, "f", "v3, never checkpointed\n");

    let (code, dry) = env.json(&["rewind", dir.as_str(), "--dry-run"]);
    assert_eq!(code, 0);
    assert_eq!(dry["written"], serde_json::json!(["f"]));
    assert_eq!(dry["dry_run"], true);
    assert_eq!(
        std::fs::read_to_string(dir.join("f")).unwrap(),
        "v3, never checkpointed\n",
        "a dry run changes nothing"
    );

    let (code, to_one) = env.json(&["rewind", dir.as_str(), "--to", "one"]);
    assert_eq!(code, 0, "{to_one}");
    assert_eq!(files(&dir), v1);
    assert_eq!(to_one["deleted"], serde_json::json!(["g"]));
    // Later checkpoints stay reachable: rewind forward.
    ok(&env.cairn(&["rewind", dir.as_str(), "--to", "two"]));
    assert_eq!(files(&dir), v2);
    // Without --to: the latest checkpoint.
    write(&dir, "f", "scratch\n");
    ok(&env.cairn(&["rewind", dir.as_str()]));
    assert_eq!(files(&dir), v2);
    // The never-checkpointed v3 was captured before the first rewind.
    let (_, log) = env.json(&["op", "log", dir.as_str()]);
    let names: Vec<&str> = log["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["op"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"capture") && names.contains(&"rewind"),
        "{names:?}"
    );

    // Reusing a name moves it.
    write(&dir, "f", "v4\n");
    ok(&env.cairn(&["checkpoint", dir.as_str(), "--name", "one"]));
    let v4 = files(&dir);
    ok(&env.cairn(&["rewind", dir.as_str(), "--to", "two"]));
    ok(&env.cairn(&["rewind", dir.as_str(), "--to", "one"]));
    assert_eq!(files(&dir), v4);

    // Inside the worktree, checkpoint names work wherever a snapshot is expected.
    let inside = |args: &[&str]| {
        let mut cmd = env.command();
        cmd.current_dir(&dir)
            .arg("--store")
            .arg(env.store().as_str())
            .args(args);
        cmd.output().unwrap()
    };
    let out = inside(&["diff", "--name-status", "two", "one"]);
    assert_eq!(ok(&out), "M\tf\n");
    let out = inside(&["show", "two:g"]);
    assert_eq!(ok(&out), "new in v2\n");

    let (code, err) = env.json(&["rewind", dir.as_str(), "--to", "nope"]);
    assert_eq!(code, 2);
    assert!(
        err["error"]["message"].as_str().unwrap().contains("nope"),
        "{err}"
    );
}

#[test]
fn undo_walks_back_per_snapshot_and_redo_reapplies_until_a_new_change() {
    let env = Env::new();
    let dir = env.path().join("agent");
    write(&dir, "a", "0\n");
    ok(&env.cairn(&["onboard", dir.as_str()]));
    let mut states = vec![files(&dir)];
    // A harness snapshots after every tool call.
    for (i, (path, body)) in [("a", "1\n"), ("b", "new\n"), ("a", "3\n")]
        .iter()
        .enumerate()
    {
        write(&dir, path, body);
        if i == 2 {
            std::fs::remove_file(dir.join("b")).unwrap();
        }
        ok(&env.cairn(&["snapshot", dir.as_str()]));
        states.push(files(&dir));
    }
    for expected in states.iter().rev().skip(1) {
        let (code, out) = env.json(&["undo", dir.as_str()]);
        assert_eq!(code, 0, "{out}");
        assert!(out["refused"].as_array().unwrap().is_empty());
        assert_eq!(&files(&dir), expected);
    }
    // The onboard (the first capture) is not undoable.
    let out = env.cairn(&["undo", dir.as_str()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "No edits have been applied to any file with this session.\n"
    );
    let (code, json) = env.json(&["undo", dir.as_str()]);
    assert_eq!(code, 1);
    assert_eq!(
        json["message"],
        "No edits have been applied to any file with this session."
    );

    let (code, redone) = env.json(&["redo", dir.as_str()]);
    assert_eq!(code, 0, "{redone}");
    assert_eq!(redone["reapplied"], serde_json::json!(["a"]));
    assert_eq!(files(&dir), states[1]);
    ok(&env.cairn(&["redo", dir.as_str()]));
    assert_eq!(files(&dir), states[2]);

    // A new change set clears the redo stack.
    write(&dir, "c", "fresh\n");
    ok(&env.cairn(&["snapshot", dir.as_str()]));
    let out = env.cairn(&["redo", dir.as_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("nothing to redo"), "{}", stderr(&out));

    let (_, log) = env.json(&["op", "log", dir.as_str()]);
    let ops = log["ops"].as_array().unwrap();
    assert_eq!(ops[0]["op"], "snapshot", "newest first");
    assert!(
        ops.iter()
            .any(|o| o["op"] == "undo" && o["undoes"].is_u64())
    );
    assert!(
        ops.iter()
            .any(|o| o["op"] == "redo" && o["redoes"].is_u64())
    );
}

#[test]
fn undo_refuses_every_file_changed_since_and_changes_nothing() {
    let env = Env::new();
    let dir = env.path().join("w");
    write(&dir, "mod.txt", "original\n");
    write(&dir, "del.txt", "to be deleted\n");
    write(&dir, "tool.sh", "echo hi\n");
    ok(&env.cairn(&["onboard", dir.as_str()]));
    // One change set: modify, delete, create two files, make a script executable.
    write(&dir, "mod.txt", "agent edit\n");
    std::fs::remove_file(dir.join("del.txt")).unwrap();
    write(&dir, "created.txt", "made by agent\n");
    write(&dir, "made/dir.txt", "also made\n");
    std::fs::set_permissions(dir.join("tool.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    ok(&env.cairn(&["snapshot", dir.as_str()]));

    // Someone edits after the snapshot.
    write(&dir, "mod.txt", "user edit\n");
    std::fs::remove_file(dir.join("created.txt")).unwrap();
    std::fs::remove_file(dir.join("made/dir.txt")).unwrap();
    std::fs::create_dir(dir.join("made/dir.txt")).unwrap();
    let before = files(&dir);
    let (code, out) = env.json(&["undo", dir.as_str()]);
    assert_eq!(code, 1, "{out}");
    let refused: BTreeMap<String, String> = out["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().to_owned(),
                r["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        refused,
        BTreeMap::from([
            ("created.txt".to_owned(), "missing".to_owned()),
            ("made/dir.txt".to_owned(), "is a directory".to_owned()),
            ("mod.txt".to_owned(), "hash mismatch".to_owned()),
        ])
    );
    assert!(out["reverted"].as_array().unwrap().is_empty());
    assert!(out["message"].as_str().unwrap().contains("refused"));
    assert_eq!(files(&dir), before, "nothing changed");
    assert!(dir.join("made/dir.txt").is_dir());

    // Put the files back as the change left them: now it goes through, exactly.
    write(&dir, "mod.txt", "agent edit\n");
    write(&dir, "created.txt", "made by agent\n");
    std::fs::remove_dir(dir.join("made/dir.txt")).unwrap();
    write(&dir, "made/dir.txt", "also made\n");
    let (code, out) = env.json(&["undo", dir.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        std::fs::read_to_string(dir.join("mod.txt")).unwrap(),
        "original\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("del.txt")).unwrap(),
        "to be deleted\n",
        "a deleted file counts as matching while absent and comes back"
    );
    assert!(!dir.join("created.txt").exists());
    assert!(!dir.join("made").exists());
    let mode = std::fs::metadata(dir.join("tool.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0, "the executable bit is reverted too");
    // Undone once: it cannot apply twice.
    let out = env.cairn(&["undo", dir.as_str()]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn accept_three_discard_two_leaves_exactly_that() {
    let env = Env::new();
    let dir = env.path().join("w");
    for i in 1..=5 {
        write(&dir, &format!("f{i}"), &format!("base {i}\n"));
    }
    ok(&env.cairn(&["checkpoint", dir.as_str()]));
    for i in 1..=5 {
        write(&dir, &format!("f{i}"), &format!("agent {i}\n"));
    }
    write(&dir, "extra", "created\n");

    let out = env.cairn(&["review", dir.as_str()]);
    let text = ok(&out);
    assert!(text.contains("+6 -5 across 6 files"), "{text}");
    assert!(text.contains("Modified: f1, f2, f3, f4, f5"), "{text}");
    assert!(text.contains("Created: extra"), "{text}");
    assert!(text.contains("+agent 3"), "per-file diff: {text}");

    let (code, acc) = env.json(&["accept", dir.as_str(), "--", "f1", "f2", "f3"]);
    assert_eq!(code, 0, "{acc}");
    assert_eq!(acc["accepted"], serde_json::json!(["f1", "f2", "f3"]));
    let (code, dis) = env.json(&["discard", dir.as_str(), "--", "f4", "f5"]);
    assert_eq!(code, 0, "{dis}");
    assert_eq!(dis["discarded"], serde_json::json!(["f4", "f5"]));
    for i in 1..=3 {
        assert_eq!(
            std::fs::read_to_string(dir.join(format!("f{i}"))).unwrap(),
            format!("agent {i}\n")
        );
    }
    for i in 4..=5 {
        assert_eq!(
            std::fs::read_to_string(dir.join(format!("f{i}"))).unwrap(),
            format!("base {i}\n")
        );
    }
    let (_, review) = env.json(&["review", dir.as_str()]);
    assert_eq!(
        review["stats"]["files"], 1,
        "only `extra` is left: {review}"
    );

    // Discarding everything needs --yes without a terminal, and changes nothing without it.
    let before = files(&dir);
    let out = env.cairn(&["discard", dir.as_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    assert_eq!(files(&dir), before);
    let (code, all) = env.json(&["discard", dir.as_str(), "--yes"]);
    assert_eq!(code, 0, "{all}");
    assert_eq!(all["discarded"], serde_json::json!(["extra"]));
    assert!(!dir.join("extra").exists());
    assert_eq!(all["task_ended"], true);
    let out = env.cairn(&["review", dir.as_str()]);
    assert_eq!(out.status.code(), Some(2), "no task: {}", stderr(&out));
    // And the discard is undoable.
    ok(&env.cairn(&["undo", dir.as_str()]));
    assert_eq!(files(&dir), before);

    let (code, err) = env.json(&["accept", dir.as_str(), "--", "f9"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn a_size_cap_skips_and_reports_large_files() {
    let env = Env::new();
    let dir = env.path().join("w");
    write(&dir, "small", "tiny\n");
    std::fs::write(dir.join("big.bin"), vec![7u8; 5000]).unwrap();
    let (code, out) = env.json(&["checkpoint", dir.as_str(), "--max-file-size", "1000"]);
    assert_eq!(code, 0, "{out}");
    let skipped = out["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{out}");
    assert_eq!(skipped[0]["path"], "big.bin");
    assert!(skipped[0]["reason"].as_str().unwrap().contains("size cap"));
    let snap = out["snapshot"].as_str().unwrap();
    let listing = ok(&env.cairn(&["show", snap]));
    assert!(!listing.contains("big.bin"), "{listing}");
    // Out of scope, so a rewind leaves it alone.
    write(&dir, "small", "changed\n");
    ok(&env.cairn(&["rewind", dir.as_str()]));
    assert_eq!(std::fs::read(dir.join("big.bin")).unwrap().len(), 5000);
}

#[test]
fn gc_keeps_checkpoints_and_prunes_old_op_log_entries() {
    let env = Env::new();
    let dir = env.path().join("w");
    write(&dir, "f", "kept by a checkpoint\n");
    let (_, cp) = env.json(&["checkpoint", dir.as_str(), "--name", "keep"]);
    let kept = cp["snapshot"].as_str().unwrap().to_owned();
    write(&dir, "f", "later\n");
    ok(&env.cairn(&["snapshot", dir.as_str()]));
    let (code, gc) = env.json(&["gc", "--prune-ops", "0"]);
    assert_eq!(code, 0, "{gc}");
    assert!(gc["ops_pruned"].as_u64().unwrap() >= 2, "{gc}");
    let (_, log) = env.json(&["op", "log", dir.as_str()]);
    assert!(log["ops"].as_array().unwrap().is_empty());
    ok(&env.cairn(&["show", &kept]));
    ok(&env.cairn(&["rewind", dir.as_str(), "--to", "keep"]));
    assert_eq!(
        std::fs::read_to_string(dir.join("f")).unwrap(),
        "kept by a checkpoint\n"
    );
    let (code, fsck) = env.json(&["fsck"]);
    assert_eq!(code, 0, "{fsck}");
}

#[test]
fn recover_with_nothing_interrupted_is_a_no_op() {
    let env = Env::new();
    let dir = env.path().join("w");
    write(&dir, "f", "x\n");
    ok(&env.cairn(&["onboard", dir.as_str()]));
    let (code, out) = env.json(&["recover", dir.as_str()]);
    assert_eq!(code, 0);
    assert_eq!(out["recovered"], serde_json::Value::Null);
}

#[test]
fn out_of_scope_files_are_never_overwritten_and_undo_still_works() {
    let env = Env::new();
    // A file captured while small, then over a size cap turned on later.
    let dir = env.path().join("w");
    write(&dir, "big.bin", "small\n");
    write(&dir, "a.txt", "a\n");
    ok(&env.cairn(&["checkpoint", dir.as_str(), "--name", "base"]));
    ok(&env.cairn(&["checkpoint", dir.as_str(), "--max-file-size", "10"]));
    let grown = "grown well past the cap\n".repeat(5);
    write(&dir, "big.bin", &grown);
    write(&dir, "a.txt", "changed\n");
    let (code, out) = env.json(&["rewind", dir.as_str(), "--to", "base"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(std::fs::read_to_string(dir.join("big.bin")).unwrap(), grown);
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "a\n");
    let skipped = out["skipped"].as_array().unwrap();
    assert!(
        skipped.iter().any(|s| s["path"] == "big.bin"),
        "reported: {out}"
    );

    // A rollback to a snapshot holding a secret skips it, and stays undoable.
    let secret_src = env.path().join("with-secret");
    write(&secret_src, ".env", "TOKEN=theirs\n");
    write(&secret_src, "code.rs", "fn x() {}\n");
    let (_, s) = env.json(&["onboard", secret_src.as_str(), "--include-denied"]);
    let other = env.path().join("other");
    write(&other, "code.rs", "fn mine() {}\n");
    ok(&env.cairn(&["onboard", other.as_str()]));
    let (code, rb) = env.json(&["rollback", other.as_str(), s["snapshot"].as_str().unwrap()]);
    assert_eq!(code, 0, "{rb}");
    assert!(!other.join(".env").exists(), "a secret never comes in");
    let (code, undone) = env.json(&["undo", other.as_str()]);
    assert_eq!(code, 0, "{undone}");
    assert_eq!(
        std::fs::read_to_string(other.join("code.rs")).unwrap(),
        "fn mine() {}\n"
    );
}

#[test]
fn gc_refuses_an_impossible_prune_age_clearly() {
    let env = Env::new();
    ok(&env.cairn(&["init", env.store().as_str()]));
    let (code, err) = env.json(&["gc", "--prune-ops", "4000000000"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--prune-ops")
    );
}

/// The case: a file became a directory of unsnapshotted work, a rollback put the
/// file back, and undo must bring the work back (redo the file again).
#[test]
fn undo_brings_back_work_in_a_directory_where_a_file_was() {
    let env = Env::new();
    let wt = env.path().join("wt");
    write(&wt, "a", "a\n");
    let (code, v) = env.json(&["onboard", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    let first = v["snapshot"].as_str().unwrap().to_owned();
    std::fs::remove_file(wt.join("a")).unwrap();
    write(&wt, "a/work.txt", "unsaved\n");
    let with_work = files(&wt);
    ok(&env.cairn(&["rollback", wt.as_str(), &first]));
    assert_eq!(std::fs::read_to_string(wt.join("a")).unwrap(), "a\n");
    let (code, v) = env.json(&["undo", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["refused"], serde_json::json!([]));
    assert_eq!(files(&wt), with_work);
    let (code, v) = env.json(&["redo", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(std::fs::read_to_string(wt.join("a")).unwrap(), "a\n");
    assert_eq!(env.json(&["fsck"]).0, 0);
}

/// `rollback` (and `undo`) of a file whose absolute path is longer than the system takes
/// (`PATH_MAX`) while its path in the tree is not: it was left out as `path-too-long`, so
/// an agent's edit to it stood; now its bytes are restored through directory handles.
#[test]
fn rollback_restores_a_file_whose_absolute_path_exceeds_path_max() {
    use crate::support::{deep_folder, deep_path, read_beneath, write_beneath};
    let env = Env::new();
    let root = deep_folder(&env.path().join("a"), 3000, 'r');
    let rel = deep_path(2000);
    assert!(
        root.as_str().len() + 1 + rel.len() > 4096,
        "beyond PATH_MAX"
    );
    let added = rel.replace("file.txt", "added.txt");
    write(&root, "top.txt", "top\n");
    write_beneath(&root, &rel, b"mine\n");
    let (code, v) = env.json(&["checkpoint", root.as_str(), "--name", "base"]);
    assert_eq!(code, 0, "{v}");

    write_beneath(&root, &rel, b"the agent's\n");
    write_beneath(&root, &added, b"new\n");
    let (code, v) = env.json(&["rollback", root.as_str(), "base"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["skipped"], serde_json::json!([]), "{v}");
    assert_eq!(read_beneath(&root, &rel).unwrap(), b"mine\n");
    assert_eq!(
        read_beneath(&root, &added).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );

    let (code, v) = env.json(&["undo", root.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(read_beneath(&root, &rel).unwrap(), b"the agent's\n");
    assert_eq!(read_beneath(&root, &added).unwrap(), b"new\n");
}
