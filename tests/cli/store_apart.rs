//! A worktree lies apart from the store's folder: every command that registers, captures
//! or writes a worktree refuses the store's folder, anything inside it and anything that
//! holds it (exit 2, naming both, nothing changed in the store), and `fsck` reports a
//! registration an older cairn made there.

use std::io::{BufRead, Write};
use std::process::Stdio;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{OpenOptions, SnapshotId, Store, WriteBatch};
use fs_manager::{RegistryRead, RegistryWrite, WorktreeKind, WorktreeRecord};

use crate::support::{Env, git, stderr};

/// What a refused command must leave as it was: the store file itself (a rollback over it
/// would replace it), every path in the store's folder, what the store holds (objects,
/// references, op-log entries) and every worktree record. Not the file's bytes: redb
/// rewrites its allocator state whenever a writer closes it, even one that wrote nothing.
#[derive(Debug, PartialEq)]
struct StoreState {
    file: (u64, u64),
    paths: Vec<Utf8PathBuf>,
    counts: [u64; 4],
    worktrees: serde_json::Value,
}

fn store_state(env: &Env) -> StoreState {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(env.store().join(cas::DATABASE_FILE)).unwrap();
    let mut paths = Vec::new();
    let mut stack = vec![env.store()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = Utf8PathBuf::from_path_buf(entry.unwrap().path()).unwrap();
            if path.is_dir() {
                stack.push(path.clone());
            }
            paths.push(path);
        }
    }
    paths.sort();
    let store = Store::open(
        &env.store(),
        &OpenOptions {
            read_only: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    let checked = store
        .fsck(
            &cas::StoreFsckOptions::default(),
            &[&fs_manager::Registry::default()],
        )
        .unwrap();
    let worktrees = store.reader().unwrap().worktrees().unwrap();
    StoreState {
        file: (meta.dev(), meta.ino()),
        paths,
        counts: [
            checked.blobs,
            checked.trees,
            checked.snapshots,
            checked.references,
        ],
        worktrees: serde_json::to_value(worktrees).unwrap(),
    }
}

/// Registers `root` directly in the registry as `cairn checkpoint ROOT` did before the
/// check: head `head`, a task and a checkpoint at `baseline`.
fn register_the_old_way(env: &Env, root: &Utf8Path, baseline: SnapshotId, head: SnapshotId) {
    let store = Store::open(&env.store(), &OpenOptions::default()).unwrap();
    let now = jiff::Timestamp::now();
    let record = WorktreeRecord {
        head: Some(head),
        task: Some(fs_manager::Task {
            baseline,
            started: now,
        }),
        checkpoints: vec![fs_manager::Checkpoint {
            name: None,
            snapshot: baseline,
            created: now,
        }],
        ..WorktreeRecord::new(root.to_owned(), WorktreeKind::InPlace)
    };
    let mut batch = WriteBatch::new();
    batch.put_worktree(&record).unwrap();
    for (op, before, after) in [
        ("onboard", None, baseline),
        ("snapshot", Some(baseline), head),
    ] {
        let entry = fs_manager::OpRecord::new(op, before, Some(after));
        batch.append_op(root, &entry).unwrap();
    }
    store.write(&batch).unwrap();
}

/// Runs `cairn --json --store STORE args…` in `cwd`: it must exit 2 with an
/// `invalid_path` error whose message names `root` first and the store.
fn refusal(env: &Env, cwd: &Utf8Path, args: &[&str], root: &Utf8Path) {
    let out = env
        .command()
        .current_dir(cwd)
        .args(["--json", "--store", env.store().as_str()])
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?}: {text} {}",
        stderr(&out)
    );
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    let message = v["error"]["message"].as_str().unwrap();
    assert_eq!(v["error"]["code"], "invalid_path", "{args:?}: {v}");
    assert!(
        message.starts_with(&format!("{root}: ")) && message.contains(env.store().as_str()),
        "{args:?}: {message}"
    );
}

/// [`refusal`], and the store as it was (see [`StoreState`]).
fn refused(env: &Env, cwd: &Utf8Path, args: &[&str], root: &Utf8Path) {
    let before = store_state(env);
    refusal(env, cwd, args, root);
    assert_eq!(store_state(env), before, "{args:?} changed the store");
}

/// `onboard`, `checkpoint` (with a directory, and without one from inside the store),
/// `checkout`, `mount` and `merge --checkout` refuse the store's folder, a folder inside it
/// and one holding it, before anything is made or written.
#[test]
fn nothing_registers_a_worktree_in_or_around_the_store() {
    let env = Env::new();
    let s = env.commit(&[("a.txt", b"a\n")], vec![], "m").to_hex();
    let store = env.store();
    let inside = store.join("sub");
    std::fs::create_dir(&inside).unwrap();
    let holder = env.path().to_owned();
    let top = env.path();
    for root in [&store, &inside, &holder] {
        refused(&env, top, &["onboard", root.as_str()], root);
        refused(&env, top, &["checkpoint", root.as_str()], root);
    }
    // No directory: the current one, which lies inside the store.
    refused(&env, &inside, &["checkpoint"], &inside);
    refused(&env, &store, &["checkpoint"], &store);
    // A destination not made yet: nothing is made on the way to the refusal.
    let deep = store.join("new/deeper");
    refused(&env, top, &["checkout", &s, deep.as_str()], &deep);
    refused(&env, top, &["checkout", &s, inside.as_str()], &inside);
    // `merge --checkout` writes a repository's working files.
    let repo = store.join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "first"]);
    let merge = ["merge", &s, "--into", repo.as_str(), "--checkout"];
    refused(&env, top, &merge, &repo);
    // A mount starts a server for the store first, which leaves its socket and log in the
    // store's folder: only the refusal and what it must not do are checked.
    refusal(&env, top, &["mount", &s, deep.as_str()], &deep);
    assert!(!store.join("new").exists(), "a mount point was made");
    assert_eq!(
        env.json(&["worktree", "list"]).1["worktrees"],
        serde_json::json!([])
    );
    // The same folders are fine once the store is elsewhere.
    let other = Env::new();
    let out = other.cairn(&["onboard", inside.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A worktree registered in or around the store by an older cairn: every command that
/// captures or writes it refuses, naming both, and changes nothing; `fsck` reports it and
/// `worktree remove` forgets it.
#[test]
fn a_worktree_registered_in_or_around_the_store_is_refused_and_reported() {
    let env = Env::new();
    let first_id = env.commit(&[("a.txt", b"a\n")], vec![], "first");
    let second_id = env.commit(&[("a.txt", b"b\n")], vec![first_id], "second");
    let (first, second) = (first_id.to_hex(), second_id.to_hex());
    let store = env.store();
    let inside = store.join("sub");
    std::fs::create_dir(&inside).unwrap();
    std::fs::write(inside.join("a.txt"), "live\n").unwrap();
    let holder = env.path().to_owned();
    // A worktree apart from the store, to see that fsck names only the others.
    let fine = env.path().join("fine");
    std::fs::create_dir(&fine).unwrap();
    let out = env.cairn(&["onboard", fine.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let roots = [&store, &inside, &holder];
    for root in roots {
        register_the_old_way(&env, root, first_id, second_id);
    }

    let (code, v) = env.json(&["fsck"]);
    assert_eq!(code, 1, "{v}");
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 3, "{v}");
    for root in roots {
        let problem = problems
            .iter()
            .find(|p| p["name"] == root.as_str())
            .unwrap_or_else(|| panic!("{root} not reported: {v}"));
        assert_eq!(problem["kind"], "worktree", "{problem}");
        assert!(
            problem["message"]
                .as_str()
                .unwrap()
                .contains(store.as_str()),
            "{problem}"
        );
    }

    let top = env.path();
    for root in roots {
        let r = root.as_str();
        for args in [
            &["snapshot", r][..],
            &["checkpoint", r],
            &["status", r],
            &["rollback", r, &first],
            &["rollback", r, &first, "--", "a.txt"],
            &["rewind", r, "--to", &first],
            &["undo", r],
            &["redo", r],
            &["accept", r],
            &["discard", r, "--yes"],
            &["worktree", "rebind", r],
            &["onboard", r],
            &["run", r, "--", "true"],
        ] {
            refused(&env, top, args, root);
        }
    }
    // `merge --checkout` into a registered repository inside the store.
    git(&inside, &["init", "-q"]);
    git(&inside, &["add", "a.txt"]);
    git(&inside, &["commit", "-q", "-m", "first"]);
    refused(
        &env,
        top,
        &["merge", &second, "--into", inside.as_str(), "--checkout"],
        &inside,
    );
    assert_eq!(
        std::fs::read_to_string(inside.join("a.txt")).unwrap(),
        "live\n"
    );

    for root in roots {
        let out = env.cairn(&["worktree", "remove", root.as_str()]);
        assert_eq!(out.status.code(), Some(0), "{root}: {}", stderr(&out));
    }
    let (code, v) = env.json(&["fsck"]);
    assert_eq!((code, &v["problems"]), (0, &serde_json::json!([])), "{v}");
}

/// The MCP `checkpoint` tool without `dir`, from a server whose directory lies inside the
/// store: refused as a tool error naming both, nothing written.
#[test]
fn mcp_checkpoint_without_a_dir_inside_the_store_is_refused() {
    let env = Env::new();
    env.commit(&[("a.txt", b"a\n")], vec![], "m");
    let inside = env.store().join("sub");
    std::fs::create_dir(&inside).unwrap();
    let before = store_state(&env);
    let mut child = env
        .command()
        .current_dir(&inside)
        .args(["--store", env.store().as_str(), "mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |id: u64| -> serde_json::Value {
        loop {
            let line = lines.next().expect("the server answers").unwrap();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    let mut send = move |v: serde_json::Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    send(serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "store_apart", "version": "0"}
        }
    }));
    let init = answer(1);
    assert!(init["result"].is_object(), "{init}");
    send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(serde_json::json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "checkpoint", "arguments": {}}
    }));
    let called = answer(2);
    drop(send);
    let status = child.wait().unwrap();
    assert!(status.success(), "cairn mcp exited with {status}");
    assert_eq!(called["result"]["isError"], true, "{called}");
    let text = called["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains(inside.as_str()) && text.contains(env.store().as_str()),
        "{text}"
    );
    assert_eq!(store_state(&env), before, "the store changed");
    assert_eq!(
        env.json(&["worktree", "list"]).1["worktrees"],
        serde_json::json!([])
    );
}

/// Another path to the store's folder (a bind mount) is the store's folder too: caught by
/// device and inode, not only by path. Needs a private mount namespace (`unshare`, root).
#[test]
fn another_path_to_the_store_is_the_store() {
    let env = Env::new();
    env.commit(&[("a.txt", b"a\n")], vec![], "m");
    let alias = env.path().join("alias");
    let outer = env.path().join("outer");
    std::fs::create_dir(&alias).unwrap();
    std::fs::create_dir(&outer).unwrap();
    let probe = std::process::Command::new("unshare")
        .args(["--mount", "true"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!(
            "another_path_to_the_store_is_the_store: skipped, unshare --mount is not permitted here"
        );
        return;
    }
    let before = store_state(&env);
    // The store under /alias, and the whole temp dir (which holds it) under /outer.
    let script = format!(
        "mount --make-rprivate / && mount --bind {store} {alias} && mount --bind {top} {outer} \
         && {cairn} --json --store {store} onboard {alias}/sub; echo \"exit $?\"; \
         {cairn} --json --store {store} onboard {alias}; echo \"exit $?\"; \
         {cairn} --json --store {store} onboard {outer}; echo \"exit $?\"",
        store = env.store(),
        alias = alias,
        top = env.path(),
        outer = outer,
        cairn = env!("CARGO_BIN_EXE_cairn"),
    );
    std::fs::create_dir(env.store().join("sub")).unwrap();
    let out = std::process::Command::new("unshare")
        .args(["--mount", "sh", "-c", &script])
        .env("HOME", env.path().join("home").as_str())
        .env_remove("CAIRN_STORE")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let answers: Vec<&str> = text.lines().collect();
    assert_eq!(answers.len(), 6, "{text} {}", stderr(&out));
    for (i, (root, relation)) in [
        (alias.join("sub"), "lies inside the store"),
        (alias.clone(), "is the folder of the store"),
        (outer.clone(), "holds the store"),
    ]
    .iter()
    .enumerate()
    {
        let v: serde_json::Value = serde_json::from_str(answers[2 * i]).unwrap();
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(&format!("{root}: {relation} {}", env.store())),
            "{root}: {v}"
        );
        assert_eq!(answers[2 * i + 1], "exit 2", "{root}: {v}");
    }
    std::fs::remove_dir(env.store().join("sub")).unwrap();
    assert_eq!(store_state(&env), before, "the store changed");
}
