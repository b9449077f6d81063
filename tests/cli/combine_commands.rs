//! `cairn combine SNAP SNAP…`: attempts' changes merged into one snapshot inside the store,
//! checked against `git merge-tree --write-tree` on the same trees.

use std::time::Duration;

use camino::Utf8Path;

use crate::mcp_client::Mcp;
use crate::support::{
    Env, LINES, Scratch, Server, attempt, project, replace, set_executable, stderr, stdout,
    store_counts,
};

fn refs(env: &Env) -> serde_json::Value {
    let (code, v) = env.json(&["ref", "list"]);
    assert_eq!(code, 0, "{v}");
    v
}

fn ids(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn two_attempts_on_different_files_and_hunks_combine_as_git_merges_them() {
    let env = Env::new();
    let base = project(&env);
    let a = attempt(&env, &base, "a", |d| {
        replace(d, "lines.txt", "two\n", "TWO\n");
        std::fs::write(d.join("src/a.rs"), "pub fn a() {}\n").unwrap();
    });
    let b = attempt(&env, &base, "b", |d| {
        replace(d, "lines.txt", "nine\n", "NINE\n");
        std::fs::write(d.join("notes.txt"), "notes, by b\n").unwrap();
    });

    let (code, v) = env.json(&["combine", &a, &b, "-m", "a and b"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["combined"], true, "{v}");
    assert_eq!(v["conflicts"], serde_json::json!([]));
    assert_eq!(v["base"], base.as_str(), "the nearest common ancestor");
    assert_eq!(ids(&v["parents"]), [a.clone(), b.clone()]);
    let combined = v["snapshot"].as_str().unwrap().to_owned();

    // The same merge by git, on the same trees.
    let git = Scratch::new(&env);
    let (tb, ta, tbb) = (
        git.tree_of(&env, &base),
        git.tree_of(&env, &a),
        git.tree_of(&env, &b),
    );
    let expected = git.merge(&tb, &ta, &tbb).expect("git merges them cleanly");
    assert_eq!(
        git.listing(&git.tree_of(&env, &combined)),
        git.listing(&expected)
    );
    let lines = std::fs::read_to_string(git.views.join(&combined[..16]).join("lines.txt")).unwrap();
    assert_eq!(
        lines,
        LINES.replace("two\n", "TWO\n").replace("nine\n", "NINE\n")
    );

    // A snapshot with those parents, in that order, and the message given.
    let (code, log) = env.json(&["log", &combined, "-n", "1"]);
    assert_eq!(code, 0, "{log}");
    let entry = &log["snapshots"][0];
    assert_eq!(entry["id"], combined.as_str());
    assert_eq!(ids(&entry["parents"]), [a, b]);
    assert_eq!(entry["message"], "a and b");
    // Kept by gc (an op-log entry), not collected as garbage.
    let (code, gc) = env.json(&["gc"]);
    assert_eq!(code, 0, "{gc}");
    let (code, show) = env.json(&["show", &combined]);
    assert_eq!(code, 0, "gc kept the combined snapshot: {show}");
}

#[test]
fn three_attempts_combine_one_after_the_other_as_git_would() {
    let env = Env::new();
    let base = project(&env);
    let a = attempt(&env, &base, "a", |d| {
        replace(d, "lines.txt", "one\n", "ONE\n");
        // The same file, the same bytes as c adds: agreement, not a conflict.
        std::fs::write(d.join("src/shared.rs"), "pub fn shared() {}\n").unwrap();
    });
    let b = attempt(&env, &base, "b", |d| {
        replace(d, "lines.txt", "five\n", "FIVE\n");
        set_executable(&d.join("run.sh"), false);
        std::fs::remove_file(d.join("notes.txt")).unwrap();
        std::fs::write(d.join("new-empty"), "").unwrap();
    });
    let c = attempt(&env, &base, "c", |d| {
        replace(d, "lines.txt", "ten\n", "TEN\n");
        std::fs::write(d.join("src/shared.rs"), "pub fn shared() {}\n").unwrap();
        std::fs::remove_file(d.join("link")).unwrap();
        std::os::unix::fs::symlink("src/lib.rs", d.join("link")).unwrap();
        std::fs::write(d.join("tool"), "#!/bin/sh\n").unwrap();
        set_executable(&d.join("tool"), true);
    });

    // Given out of their creation order: the parents keep the order given.
    let (code, v) = env.json(&["combine", &c, &a, &b]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(ids(&v["parents"]), [c.clone(), a.clone(), b.clone()]);
    let combined = v["snapshot"].as_str().unwrap().to_owned();

    // git: c and a merged, then b merged into that, each against the base.
    let git = Scratch::new(&env);
    let tree = |s: &str| git.tree_of(&env, s);
    let tb = tree(&base);
    let ca = git.merge(&tb, &tree(&c), &tree(&a)).expect("c and a merge");
    let cab = git.merge(&tb, &ca, &tree(&b)).expect("then b");
    let listing = git.listing(&tree(&combined));
    assert_eq!(listing, git.listing(&cab));

    // Modes, links and empty files as the attempts left them.
    let mode_of = |path: &str| {
        listing
            .lines()
            .find(|l| l.ends_with(&format!("\t{path}")))
            .unwrap_or_else(|| panic!("{path} missing from {listing}"))
            .split(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(mode_of("run.sh"), "100644", "b's chmod -x");
    assert_eq!(mode_of("tool"), "100755", "c's new executable");
    assert_eq!(mode_of("link"), "120000");
    assert_eq!(mode_of("empty"), "100644");
    assert_eq!(mode_of("new-empty"), "100644");
    assert!(!listing.contains("\tnotes.txt"), "b deleted it: {listing}");
    let view = git.views.join(&combined[..16]);
    assert_eq!(
        std::fs::read_link(view.join("link")).unwrap(),
        Utf8Path::new("src/lib.rs")
    );
    assert_eq!(std::fs::read(view.join("new-empty")).unwrap(), b"");
    assert_eq!(
        std::fs::read_to_string(view.join("lines.txt")).unwrap(),
        LINES
            .replace("one\n", "ONE\n")
            .replace("five\n", "FIVE\n")
            .replace("ten\n", "TEN\n")
    );
    let (code, show) = env.json(&["show", &combined]);
    assert_eq!(code, 0, "{show}");
    let text = show.to_string();
    assert!(text.contains("tool"), "{text}");
}

/// A conflict of `kind` between two attempts: exit 1 listing it with both attempts,
/// git agrees it conflicts, and the store holds exactly what it held.
fn refuses_with(kind: &str, path: &str, edit_a: fn(&Utf8Path), edit_b: fn(&Utf8Path)) {
    let env = Env::new();
    let base = project(&env);
    let a = attempt(&env, &base, "a", |d| {
        edit_a(d);
        // A change of its own elsewhere, which merges.
        replace(d, "lines.txt", "three\n", "THREE\n");
    });
    let b = attempt(&env, &base, "b", edit_b);
    let counts = store_counts(&env);
    let before_refs = refs(&env);

    let (code, v) = env.json(&["combine", &a, &b]);
    assert_eq!(code, 1, "{kind}: {v}");
    assert_eq!(v["combined"], false, "{v}");
    assert_eq!(v["snapshot"], serde_json::Value::Null);
    assert_eq!(
        v["conflicts"],
        serde_json::json!([{ "path": path, "kind": kind, "inputs": [a, b] }]),
        "{kind}"
    );
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("nothing was recorded"),
        "{v}"
    );
    // Human output names the path and kind, and the refusal.
    let out = env.cairn(&["combine", &a, &b]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains(&format!(
            "CONFLICT ({kind}): {path} (changed by {}, {})",
            &a[..12],
            &b[..12]
        )),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("nothing was recorded"),
        "{}",
        stderr(&out)
    );

    // Nothing recorded: no snapshot, tree, blob or op-log entry, no ref.
    assert_eq!(store_counts(&env), counts, "{kind}");
    assert_eq!(refs(&env), before_refs);

    // git finds a conflict too.
    let git = Scratch::new(&env);
    let tree = |s: &str| git.tree_of(&env, s);
    assert_eq!(
        git.merge(&tree(&base), &tree(&a), &tree(&b)),
        None,
        "{kind}"
    );
}

#[test]
fn conflicting_content_is_refused_and_nothing_is_recorded() {
    refuses_with(
        "content",
        "lines.txt",
        |d| replace(d, "lines.txt", "six\n", "six by a\n"),
        |d| replace(d, "lines.txt", "six\n", "six by b\n"),
    );
}

#[test]
fn two_different_additions_of_one_path_are_refused_and_nothing_is_recorded() {
    refuses_with(
        "add/add",
        "src/new.rs",
        |d| std::fs::write(d.join("src/new.rs"), "fn by_a() {}\n").unwrap(),
        |d| std::fs::write(d.join("src/new.rs"), "fn by_b() {}\n").unwrap(),
    );
}

#[test]
fn a_change_and_a_deletion_of_one_file_are_refused_and_nothing_is_recorded() {
    refuses_with(
        "modify/delete",
        "notes.txt",
        |d| std::fs::write(d.join("notes.txt"), "notes, changed by a\n").unwrap(),
        |d| std::fs::remove_file(d.join("notes.txt")).unwrap(),
    );
}

#[test]
fn a_third_attempt_that_conflicts_is_named_with_those_it_conflicts_with() {
    let env = Env::new();
    let base = project(&env);
    let a = attempt(&env, &base, "a", |d| {
        replace(d, "lines.txt", "four\n", "4 by a\n")
    });
    let b = attempt(&env, &base, "b", |d| {
        std::fs::write(d.join("src/b.rs"), "fn b() {}\n").unwrap()
    });
    let c = attempt(&env, &base, "c", |d| {
        replace(d, "lines.txt", "four\n", "4 by c\n")
    });
    let counts = store_counts(&env);
    let (code, v) = env.json(&["combine", &a, &b, &c]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(
        v["conflicts"],
        serde_json::json!([{ "path": "lines.txt", "kind": "content", "inputs": [a, c] }])
    );
    assert_eq!(store_counts(&env), counts);
}

#[test]
fn bad_inputs_are_usage_errors_naming_them() {
    let env = Env::new();
    let base = project(&env);
    let a = attempt(&env, &base, "a", |d| {
        std::fs::write(d.join("a.txt"), "a\n").unwrap()
    });
    let counts = store_counts(&env);

    // One snapshot: nothing to combine.
    let out = env.cairn(&["combine", &a]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let (code, v) = env.json(&["combine", &a]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "usage", "{v}");

    // The same snapshot twice, by id and by prefix.
    let (code, v) = env.json(&["combine", &a, &a[..10]]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "usage", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&a) && message.contains("twice"),
        "{message}"
    );

    // An id the store does not know.
    let (code, v) = env.json(&["combine", &a, "0123456789abcdef"]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "unknown_id", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("0123456789abcdef"),
        "{v}"
    );

    // Histories that never meet: no base, unless one is named.
    let other = env.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("o.txt"), "o\n").unwrap();
    let (code, v) = env.json(&["onboard", other.as_str()]);
    assert_eq!(code, 0, "{v}");
    let lone = v["snapshot"].as_str().unwrap().to_owned();
    let counts_with_lone = store_counts(&env);
    let (code, v) = env.json(&["combine", &a, &lone]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "no_base", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains(&a) && message.contains(&lone), "{message}");
    assert_ne!(counts, counts_with_lone);
    assert_eq!(store_counts(&env), counts_with_lone, "nothing recorded");

    // With --base named, the same two combine: both sides' files.
    let (code, v) = env.json(&["combine", &a, &lone, "--base", &base]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["base"], base.as_str());
}

#[test]
fn combine_is_a_route_and_an_mcp_tool() {
    let env = Env::new();
    let base = project(&env);
    let a = attempt(&env, &base, "a", |d| {
        std::fs::write(d.join("a.txt"), "a\n").unwrap()
    });
    let b = attempt(&env, &base, "b", |d| {
        std::fs::write(d.join("b.txt"), "b\n").unwrap()
    });
    let c = attempt(&env, &base, "c", |d| {
        std::fs::write(d.join("a.txt"), "not a\n").unwrap()
    });
    {
        let server = Server::start(&env);
        let client = server.client();
        let (status, v) = client
            .call(
                "combine",
                &serde_json::json!({ "snapshots": [a, b], "cwd": env.path() }),
            )
            .unwrap();
        assert_eq!(status, 200, "{v}");
        assert_eq!(ids(&v["parents"]), [a.clone(), b.clone()]);
        let (status, v) = client
            .call(
                "combine",
                &serde_json::json!({ "snapshots": [a, c], "cwd": env.path() }),
            )
            .unwrap();
        assert_eq!(status, 409, "a conflict is a refusal: {v}");
        assert_eq!(v["conflicts"][0]["kind"], "add/add", "{v}");
        server.stop();
    }
    let mut mcp = Mcp::start(&env, &[]);
    mcp.call(
        1,
        "combine",
        serde_json::json!({ "snapshots": [b, a], "message": "by mcp" }),
    );
    let (is_error, v) = mcp.tool_answer(1, Duration::from_secs(60));
    assert!(!is_error, "{v}");
    assert_eq!(ids(&v["parents"]), [b, a]);
}

#[test]
fn the_base_is_the_nearest_snapshot_all_inputs_descend_from() {
    let env = Env::new();
    let base = project(&env);
    let a = attempt(&env, &base, "a", |d| {
        std::fs::write(d.join("a.txt"), "a\n").unwrap()
    });
    // a's worktree goes on: a2 descends from a, which descends from the base.
    std::fs::write(env.path().join("a/a2.txt"), "a2\n").unwrap();
    let (code, v) = env.json(&["snapshot", env.path().join("a").as_str()]);
    assert_eq!(code, 0, "{v}");
    let a2 = v["snapshot"].as_str().unwrap().to_owned();
    let b = attempt(&env, &base, "b", |d| {
        std::fs::write(d.join("b.txt"), "b\n").unwrap()
    });

    let (code, v) = env.json(&["combine", &a2, &b]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["base"], base.as_str(), "{v}");
    // An input and its own descendant: the base is the input, the result the descendant's tree.
    let (code, v) = env.json(&["combine", &a, &a2]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["base"], a.as_str(), "{v}");
    let (_, log) = env.json(&["log", &a2, "-n", "1"]);
    assert_eq!(v["tree"], log["snapshots"][0]["tree"], "{v}");
}

/// The `cairn-combine-*` scratch folders in `tmp`.
fn scratch_folders(tmp: &Utf8Path) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("cairn-combine-"))
        .collect();
    found.sort();
    found
}

/// gix merges in a repository folder, even with its objects in memory: a `combine` killed
/// while merging left its empty `cairn-combine-*` folder in `$TMPDIR` for good. The next
/// combination now removes it (and its own, as before).
#[test]
fn a_scratch_folder_a_killed_combine_left_is_removed_by_the_next() {
    let env = Env::new();
    let base = project(&env);
    // Enough files that the merge is still under way once its folder is there.
    let a = attempt(&env, &base, "a", |d| {
        std::fs::create_dir(d.join("many")).unwrap();
        for i in 0..4000 {
            std::fs::write(d.join(format!("many/{i}.txt")), format!("{i}\n")).unwrap();
        }
    });
    let b = attempt(&env, &base, "b", |d| {
        replace(d, "lines.txt", "two\n", "TWO\n")
    });
    let tmp = env.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let combine = || {
        let mut cmd = env.command();
        cmd.env("TMPDIR", &tmp)
            .args(["--store", env.store().as_str(), "combine", &a, &b]);
        cmd
    };

    // kill -9 once its scratch folder is there.
    let mut left = Vec::new();
    for _ in 0..5 {
        let mut child = combine()
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let killed = loop {
            if !scratch_folders(&tmp).is_empty() {
                child.kill().unwrap();
                break true;
            }
            if child.try_wait().unwrap().is_some() {
                break false;
            }
            std::thread::sleep(Duration::from_micros(200));
        };
        child.wait().unwrap();
        left = scratch_folders(&tmp);
        if killed && !left.is_empty() {
            break;
        }
    }
    assert!(!left.is_empty(), "no combine was killed while merging");

    let out = combine().output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        scratch_folders(&tmp),
        Vec::<String>::new(),
        "left: {left:?}"
    );
}
