//! `cairn rebase WORKTREE --onto SNAP`: a worktree's changes (live edits included) moved
//! onto another snapshot, checked against `git merge-tree --write-tree` on the same trees;
//! conflicts change nothing; `undo` and `redo` move the worktree back and forth exactly.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use camino::Utf8Path;

use crate::mcp_client::Mcp;
use crate::reversible_commands::files;
use crate::support::{
    Env, LINES, Rng, Scratch, Server, attempt, crash_seed, project, replace, set_executable,
    stderr, stdout,
};

/// What a refusal must leave as it was: the files, the head, the history and the op log.
#[derive(Debug, PartialEq)]
struct State {
    files: BTreeMap<String, (Vec<u8>, bool)>,
    log: serde_json::Value,
    ops: serde_json::Value,
}

fn state(env: &Env, wt: &Utf8Path) -> State {
    let (code, log) = env.json(&["log", wt.as_str()]);
    assert_eq!(code, 0, "{log}");
    let (code, ops) = env.json(&["op", "log", wt.as_str()]);
    assert_eq!(code, 0, "{ops}");
    State {
        files: files(wt),
        log,
        ops,
    }
}

fn head(env: &Env, wt: &Utf8Path) -> serde_json::Value {
    let (code, log) = env.json(&["log", wt.as_str(), "-n", "1"]);
    assert_eq!(code, 0, "{log}");
    log["snapshots"][0].clone()
}

#[test]
fn a_worktree_with_live_edits_rebases_as_git_merges_and_undo_brings_it_back_exactly() {
    let env = Env::new();
    let base = project(&env);
    // The agent's worktree: a snapshotted change, then edits never snapshotted (a change,
    // a mode, a deletion, a new file).
    let wt = env.path().join("agent");
    let (code, v) = env.json(&["checkout", &base, wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    replace(&wt, "lines.txt", "two\n", "TWO\n");
    std::fs::write(wt.join("src/a.rs"), "pub fn a() {}\n").unwrap();
    let (code, v) = env.json(&["snapshot", wt.as_str(), "-m", "agent's work"]);
    assert_eq!(code, 0, "{v}");
    replace(&wt, "lines.txt", "four\n", "FOUR (unsnapshotted)\n");
    set_executable(&wt.join("run.sh"), false);
    std::fs::remove_file(wt.join("empty")).unwrap();
    std::fs::write(wt.join("live.txt"), "never snapshotted\n").unwrap();
    let before = files(&wt);

    // Meanwhile the project moved on.
    let onto = attempt(&env, &base, "upstream", |d| {
        replace(d, "lines.txt", "nine\n", "NINE\n");
        std::fs::write(d.join("notes.txt"), "notes, upstream\n").unwrap();
        std::fs::write(d.join("src/up.rs"), "pub fn up() {}\n").unwrap();
    });

    let (code, v) = env.json(&["rebase", wt.as_str(), "--onto", &onto]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["rebased"], true, "{v}");
    assert_eq!(v["onto"], onto.as_str());
    assert_eq!(v["conflicts"], serde_json::json!([]));
    let rebased = v["snapshot"].as_str().unwrap().to_owned();
    let captured = v["captured"].as_str().unwrap().to_owned();
    let mut written: Vec<&str> = v["written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    written.sort_unstable();
    assert_eq!(written, ["lines.txt", "notes.txt", "src/up.rs"], "{v}");
    assert_eq!(v["deleted"], serde_json::json!([]), "{v}");

    // The head: a new snapshot whose parent is SNAP, holding what the worktree holds.
    let entry = head(&env, &wt);
    assert_eq!(entry["id"], rebased.as_str());
    assert_eq!(entry["parents"], serde_json::json!([onto]));
    assert!(
        entry["message"].as_str().unwrap().contains(&onto[..12]),
        "{entry}"
    );
    let (code, status) = env.json(&["status", wt.as_str()]);
    assert_eq!(code, 0, "{status}");
    assert_eq!(
        status["stats"]["files"], 0,
        "the files are the head: {status}"
    );

    // git merges the same trees (the captured live state onto SNAP) to the same tree.
    let git = Scratch::new(&env);
    let tree = |s: &str| git.tree_of(&env, s);
    let expected = git
        .merge(&tree(&base), &tree(&onto), &tree(&captured))
        .expect("git merges them cleanly");
    assert_eq!(git.listing(&tree(&rebased)), git.listing(&expected));
    assert_eq!(
        std::fs::read_to_string(wt.join("lines.txt")).unwrap(),
        LINES
            .replace("two\n", "TWO\n")
            .replace("four\n", "FOUR (unsnapshotted)\n")
            .replace("nine\n", "NINE\n")
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("live.txt")).unwrap(),
        "never snapshotted\n"
    );
    assert!(!wt.join("empty").exists());
    let after = files(&wt);

    // undo: the worktree exactly as it was, unsnapshotted edits included; redo: forward.
    let (code, v) = env.json(&["undo", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(files(&wt), before);
    assert_eq!(head(&env, &wt)["id"], captured.as_str());
    let (code, v) = env.json(&["redo", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(files(&wt), after);
    assert_eq!(head(&env, &wt)["id"], rebased.as_str());

    // Human output.
    let (code, v) = env.json(&["undo", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    let out = env.cairn(&["rebase", wt.as_str(), "--onto", &onto]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("rebased {wt} onto {}", &onto[..12])),
        "{}",
        stdout(&out)
    );
    assert_eq!(files(&wt), after);
}

/// A conflict of `kind` at `path` between the worktree's changes and SNAP's: exit 1 listing
/// it, and the worktree's files, head, history and op log as they were; git agrees.
fn refuses_with(kind: &str, path: &str, ours: fn(&Utf8Path), upstream: fn(&Utf8Path)) {
    let env = Env::new();
    let base = project(&env);
    let wt = env.path().join("agent");
    let (code, v) = env.json(&["checkout", &base, wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    // A snapshotted change that merges, then the conflicting one, live.
    replace(&wt, "lines.txt", "three\n", "THREE\n");
    let (code, v) = env.json(&["snapshot", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    ours(&wt);
    let onto = attempt(&env, &base, "upstream", upstream);
    let before = state(&env, &wt);

    let (code, v) = env.json(&["rebase", wt.as_str(), "--onto", &onto]);
    assert_eq!(code, 1, "{kind}: {v}");
    assert_eq!(v["rebased"], false, "{v}");
    assert_eq!(
        v["conflicts"],
        serde_json::json!([{ "path": path, "kind": kind }]),
        "{kind}"
    );
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("nothing was changed"),
        "{v}"
    );
    assert_eq!(v["captured"], serde_json::Value::Null, "{v}");
    assert_eq!(state(&env, &wt), before, "{kind}: nothing changed");

    let out = env.cairn(&["rebase", wt.as_str(), "--onto", &onto]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains(&format!("CONFLICT ({kind}): {path}")),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("nothing was changed"),
        "{}",
        stderr(&out)
    );
    assert_eq!(state(&env, &wt), before, "{kind}: nothing changed");

    // git finds a conflict too, on the same trees.
    let (code, v) = env.json(&["snapshot", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    let live = v["snapshot"].as_str().unwrap().to_owned();
    let git = Scratch::new(&env);
    let tree = |s: &str| git.tree_of(&env, s);
    assert_eq!(
        git.merge(&tree(&base), &tree(&onto), &tree(&live)),
        None,
        "{kind}"
    );
}

#[test]
fn conflicting_content_is_refused_and_nothing_changes() {
    refuses_with(
        "content",
        "lines.txt",
        |d| replace(d, "lines.txt", "six\n", "six by the agent\n"),
        |d| replace(d, "lines.txt", "six\n", "six upstream\n"),
    );
}

#[test]
fn two_different_additions_of_one_path_are_refused_and_nothing_changes() {
    refuses_with(
        "add/add",
        "src/new.rs",
        |d| std::fs::write(d.join("src/new.rs"), "fn by_the_agent() {}\n").unwrap(),
        |d| std::fs::write(d.join("src/new.rs"), "fn upstream() {}\n").unwrap(),
    );
}

#[test]
fn a_change_and_a_deletion_of_one_file_are_refused_and_nothing_changes() {
    refuses_with(
        "modify/delete",
        "notes.txt",
        |d| std::fs::write(d.join("notes.txt"), "notes, changed by the agent\n").unwrap(),
        |d| std::fs::remove_file(d.join("notes.txt")).unwrap(),
    );
}

#[test]
fn a_head_that_already_descends_from_snap_is_left_as_it_is() {
    let env = Env::new();
    let base = project(&env);
    let wt = env.path().join("agent");
    let (code, v) = env.json(&["checkout", &base, wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    std::fs::write(wt.join("mine.txt"), "mine\n").unwrap();
    let (code, v) = env.json(&["snapshot", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    let mine = v["snapshot"].as_str().unwrap().to_owned();
    std::fs::write(wt.join("live.txt"), "live\n").unwrap();
    let before = state(&env, &wt);

    // Onto its base, and onto its own head: nothing to do, not an error.
    for onto in [&base, &mine] {
        let (code, v) = env.json(&["rebase", wt.as_str(), "--onto", onto]);
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["rebased"], false, "{v}");
        assert_eq!(v["snapshot"], mine.as_str(), "the head it kept: {v}");
        assert_eq!(v["conflicts"], serde_json::json!([]));
        assert_eq!(state(&env, &wt), before);
    }
    let out = env.cairn(&["rebase", wt.as_str(), "--onto", &base]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("nothing to do"), "{}", stdout(&out));
}

#[test]
fn bad_input_is_an_error_naming_it_and_changes_nothing() {
    let env = Env::new();
    let base = project(&env);
    let wt = env.path().join("agent");
    let (code, v) = env.json(&["checkout", &base, wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    std::fs::write(wt.join("live.txt"), "live\n").unwrap();
    let before = state(&env, &wt);

    let (code, v) = env.json(&["rebase", wt.as_str(), "--onto", "0123456789abcdef"]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "unknown_id", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("0123456789abcdef"),
        "{v}"
    );
    let (code, v) = env.json(&["rebase", wt.as_str(), "--onto", "no-such-ref"]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-ref"),
        "{v}"
    );
    let elsewhere = env.path().join("not-a-worktree");
    std::fs::create_dir(&elsewhere).unwrap();
    let (code, v) = env.json(&["rebase", elsewhere.as_str(), "--onto", &base]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "not_a_worktree", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains(elsewhere.as_str()),
        "{v}"
    );
    let out = env.cairn(&["rebase", wt.as_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--onto"), "{}", stderr(&out));

    // A history of its own: no common ancestor with the worktree's head.
    let stranger = env
        .commit(&[("x.txt", b"x\n")], Vec::new(), "unrelated")
        .to_string();
    let (code, v) = env.json(&["rebase", wt.as_str(), "--onto", &stranger]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "no_base", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains(&stranger),
        "{v}"
    );
    assert_eq!(state(&env, &wt), before);
}

#[test]
fn rebase_is_a_route_and_an_mcp_tool() {
    let env = Env::new();
    let base = project(&env);
    let up = attempt(&env, &base, "upstream", |d| {
        std::fs::write(d.join("up.txt"), "up\n").unwrap()
    });
    let clash = attempt(&env, &base, "clash", |d| {
        std::fs::write(d.join("mine.txt"), "not mine\n").unwrap()
    });
    let wt = env.path().join("agent");
    let (code, v) = env.json(&["checkout", &base, wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    std::fs::write(wt.join("mine.txt"), "mine\n").unwrap();
    {
        let server = Server::start(&env);
        let client = server.client();
        let (status, v) = client
            .call(
                "rebase",
                &serde_json::json!({ "worktree": wt, "onto": clash, "cwd": env.path() }),
            )
            .unwrap();
        assert_eq!(status, 409, "a conflict is a refusal: {v}");
        assert_eq!(v["conflicts"][0]["kind"], "add/add", "{v}");
        let (status, v) = client
            .call(
                "rebase",
                &serde_json::json!({ "worktree": wt, "onto": up, "cwd": env.path() }),
            )
            .unwrap();
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["rebased"], true, "{v}");
        server.stop();
    }
    assert_eq!(std::fs::read(wt.join("up.txt")).unwrap(), b"up\n");
    assert_eq!(std::fs::read(wt.join("mine.txt")).unwrap(), b"mine\n");
    let (code, v) = env.json(&["undo", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert!(!wt.join("up.txt").exists());

    let mut mcp = Mcp::start(&env, &[]);
    mcp.call(
        1,
        "rebase",
        serde_json::json!({ "worktree": wt, "onto": up }),
    );
    let (is_error, v) = mcp.tool_answer(1, Duration::from_secs(60));
    assert!(!is_error, "{v}");
    assert_eq!(v["rebased"], true, "{v}");
    assert_eq!(std::fs::read(wt.join("up.txt")).unwrap(), b"up\n");
}

/// Two rebases of one worktree at once (through one server, as agents would send them): the
/// worktree is held for one at a time, so one moves it onto SNAP and the other then finds it
/// there already; one `rebase` entry in the op log, and every file once.
#[test]
fn two_rebases_at_once_move_the_worktree_once() {
    let env = Env::new();
    let base = project(&env);
    let up = attempt(&env, &base, "upstream", |d| {
        std::fs::write(d.join("up.txt"), "up\n").unwrap()
    });
    let wt = env.path().join("agent");
    let (code, v) = env.json(&["checkout", &base, wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    std::fs::write(wt.join("mine.txt"), "mine\n").unwrap();
    let server = Server::start(&env);
    let answers: Vec<serde_json::Value> = std::thread::scope(|s| {
        let calls: Vec<_> = (0..2)
            .map(|_| {
                let client = server.client();
                let args = serde_json::json!({ "worktree": wt, "onto": up, "cwd": env.path() });
                s.spawn(move || {
                    let (status, v) = client.call("rebase", &args).unwrap();
                    assert_eq!(status, 200, "{v}");
                    v
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    server.stop();
    let mut rebased: Vec<bool> = answers
        .iter()
        .map(|v| v["rebased"].as_bool().unwrap())
        .collect();
    rebased.sort_unstable();
    assert_eq!(rebased, [false, true], "{answers:?}");
    let (code, ops) = env.json(&["op", "log", wt.as_str()]);
    assert_eq!(code, 0, "{ops}");
    let rebases = ops["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["op"] == "rebase")
        .count();
    assert_eq!(rebases, 1, "{ops}");
    assert_eq!(std::fs::read(wt.join("up.txt")).unwrap(), b"up\n");
    assert_eq!(std::fs::read(wt.join("mine.txt")).unwrap(), b"mine\n");
}

/// SIGKILL at random moments of a rebase with live edits: after `cairn recover` the
/// worktree is exactly the live state before or the rebased state after, `fsck` is clean,
/// and a finished rebase still undoes to the live state.
#[test]
fn sigkill_during_rebase_then_recover_leaves_before_or_after() {
    let env = Env::new();
    let base = project(&env);
    let wt = env.path().join("agent");
    let (code, v) = env.json(&["checkout", &base, wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    // Enough files on both sides that the kills land in every step.
    for n in 0..300 {
        let path = wt.join(format!("mine/d{}/f{n}.txt", n % 10));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("mine {n}\n").repeat(40)).unwrap();
    }
    replace(&wt, "lines.txt", "two\n", "TWO\n");
    let before = files(&wt);
    let onto = attempt(&env, &base, "upstream", |d| {
        for n in 0..300 {
            let path = d.join(format!("theirs/d{}/f{n}.txt", n % 10));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, format!("theirs {n}\n").repeat(40)).unwrap();
        }
        replace(d, "lines.txt", "nine\n", "NINE\n");
    });
    let rebase = |wt: &Utf8Path| {
        let mut cmd = env.command();
        cmd.args([
            "--store",
            env.store().as_str(),
            "rebase",
            wt.as_str(),
            "--onto",
        ])
        .arg(&onto)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
        cmd
    };

    // Uninterrupted rebases, to spread the kills over one; each undone.
    let mut after = BTreeMap::new();
    let mut span = Duration::ZERO;
    for _ in 0..2 {
        let started = Instant::now();
        assert!(rebase(&wt).status().unwrap().success());
        span += started.elapsed() / 2;
        after = files(&wt);
        assert_ne!(before, after);
        let (code, v) = env.json(&["undo", wt.as_str()]);
        assert_eq!(code, 0, "{v}");
        assert_eq!(files(&wt), before);
    }
    let span = span.max(Duration::from_millis(5));

    let seed = crash_seed();
    eprintln!("rebase crash test seed {seed} (set CAIRN_CRASH_SEED to replay), span {span:?}");
    let mut rng = Rng(seed);
    let (mut done, mut recovered) = (0, 0);
    for run in 0..40 {
        let mut child = rebase(&wt).spawn().unwrap();
        let delay = span.as_micros() as u64 * (rng.next() % 1500) / 1000;
        std::thread::sleep(Duration::from_micros(delay));
        let _ = child.kill();
        child.wait().unwrap();
        let (code, rec) = env.json(&["recover", wt.as_str()]);
        assert_eq!(code, 0, "run {run} (seed {seed}): recover failed: {rec}");
        if !rec["recovered"].is_null() {
            recovered += 1;
        }
        let now = files(&wt);
        if now == after {
            done += 1;
            let (code, v) = env.json(&["undo", wt.as_str()]);
            assert_eq!(code, 0, "run {run} (seed {seed}): {v}");
            assert_eq!(files(&wt), before, "run {run} (seed {seed})");
        } else {
            assert!(now == before, "run {run} (seed {seed}): neither state");
        }
        let (code, fsck) = env.json(&["fsck"]);
        assert_eq!(code, 0, "run {run} (seed {seed}): {fsck}");
    }
    eprintln!("{done} of 40 rebases finished, {recovered} recovered");
    assert!(
        recovered > 0,
        "no kill landed inside a rebase's journaled step (seed {seed})"
    );
}
