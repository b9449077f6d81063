//! Every JSON field SPEC.md names for a verb is in its serialized outcome (extra fields are
//! allowed), with the values the call must give: a verb that answered with the right keys
//! and wrong values fails here. `run` is the CLI's (not an engine verb; its fields are checked in
//! `tests/cli/run_commands.rs`).
//! The verbs that need git (`onboard`'s source, `onboard --git`, `merge`) are checked in
//! `cairn-git`'s tests.

mod support;

use cairn_engine::*;
use camino::Utf8PathBuf;
use serde_json::{Value, json as j};
use support::{World, has, items_have, json, paths};

const DIFF: &[&str] = &["added", "removed", "modified", "renamed", "stats"];
const CHANGE: &[&str] = &[
    "path",
    "old_blob",
    "new_blob",
    "old_mode",
    "new_mode",
    "kind",
    "size",
    "insertions",
    "deletions",
];

#[track_caller]
fn is_diff(v: &Value) {
    has(v, DIFF);
    has(&v["stats"], &["files", "insertions", "deletions"]);
}

#[test]
fn init() {
    let w = World::new();
    let out = init_store(&w.dir.join("other"), &cas::OpenOptions::default()).expect("init");
    let v = json(&out);
    has(&v, &["store"]);
    assert_eq!(v["store"], w.dir.join("other").as_str(), "{v}");
}

#[test]
fn snapshot() {
    let w = World::new();
    std::fs::write(w.work.join("NEW"), "new\n").expect("write");
    let v = json(
        &w.engine
            .snapshot(&w.call(), SnapshotOptions::new(&w.work))
            .expect("snapshot"),
    );
    has(
        &v,
        &[
            "snapshot", "tree", "parent", "changed", "added", "modified", "removed", "skipped",
        ],
    );
    assert_eq!(v["parent"], w.base.as_str(), "{v}");
    assert_eq!(
        (&v["changed"], &v["added"], &v["modified"], &v["removed"]),
        (&j!(true), &j!(1), &j!(0), &j!(0)),
        "{v}"
    );
    assert_eq!(v["skipped"], j!([]), "{v}");
    // The snapshot it names holds the new file, and its tree is the one reported.
    let shown = json(
        &w.engine
            .show(
                &w.call(),
                ShowOptions {
                    object: v["snapshot"].as_str().expect("an id").to_owned(),
                    contents: false,
                },
            )
            .expect("show"),
    );
    assert_eq!(shown["tree"], v["tree"], "{shown}");
    let names: Vec<&str> = shown["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(names, ["NEW", "README", "src"], "{shown}");
}

#[test]
fn checkout() {
    let w = World::new();
    let out = w
        .engine
        .checkout(&w.call(), CheckoutOptions::new(&w.base, w.dir.join("co")))
        .expect("checkout");
    let v = json(&out);
    has(&v, &["worktree", "snapshot", "files", "bytes", "deps"]);
    assert_eq!(v["worktree"], w.dir.join("co").as_str(), "{v}");
    assert_eq!(v["deps"], j!([]), "no lockfile, no layer: {v}");
    assert_eq!(v["snapshot"], w.base.as_str(), "{v}");
    // `src/lib.rs` (10 bytes) and `README` (6).
    assert_eq!((&v["files"], &v["bytes"]), (&j!(2), &j!(16)), "{v}");
    assert_eq!(
        std::fs::read_to_string(w.dir.join("co/src/lib.rs")).expect("written"),
        "fn a() {}\n"
    );
}

#[test]
fn rollback() {
    let w = World::new();
    w.edit();
    let options = RollbackOptions {
        worktree: w.work.clone(),
        snapshot: w.base.clone(),
        ..RollbackOptions::default()
    };
    let v = json(&w.engine.rollback(&w.call(), options).expect("rollback"));
    has(&v, &["snapshot", "written", "deleted"]);
    assert_eq!(v["snapshot"], w.base.as_str(), "{v}");
    assert_eq!(v["written"], j!(["src/lib.rs"]), "{v}");
    assert_eq!(v["deleted"], j!(["NEW"]), "{v}");
    assert!(!w.work.join("NEW").exists());
}

#[test]
fn diff() {
    let w = World::new();
    let after = w.edit();
    std::fs::rename(w.work.join("README"), w.work.join("README.md")).expect("rename");
    let renamed = w
        .engine
        .snapshot(&w.call(), SnapshotOptions::new(&w.work))
        .expect("snapshot")
        .snapshot
        .to_string();
    let v = json(
        &w.engine
            .diff(&w.call(), DiffOptions::new(&w.base, &renamed))
            .expect("diff"),
    );
    is_diff(&v);
    items_have(&v, "added", CHANGE);
    items_have(&v, "modified", CHANGE);
    items_have(&v, "renamed", &["path", "from", "to"]);
    assert_eq!(paths(&v, "added"), ["NEW"], "{v}");
    assert_eq!(paths(&v, "modified"), ["src/lib.rs"], "{v}");
    assert_eq!(v["renamed"][0]["from"], "README", "{v}");
    assert_eq!(v["renamed"][0]["to"], "README.md", "{v}");
    let modified = &v["modified"][0];
    assert_eq!(
        (&modified["insertions"], &modified["deletions"]),
        (&j!(1), &j!(1)),
        "{v}"
    );
    assert_eq!(v["stats"]["files"], 3, "{v}");
    let v = json(
        &w.engine
            .diff(&w.call(), DiffOptions::new(&after, &w.base))
            .expect("diff"),
    );
    items_have(&v, "removed", CHANGE);
    assert_eq!(paths(&v, "removed"), ["NEW"], "{v}");
    assert!(v["removed"][0]["old_blob"].is_string(), "{v}");
    assert_eq!(v["removed"][0]["new_blob"], Value::Null, "{v}");

    // `a` left out: `b` against its first parent; a first snapshot has none.
    let against_parent = |b: &str| {
        let options = DiffOptions {
            a: None,
            ..DiffOptions::new("", b)
        };
        json(&w.engine.diff(&w.call(), options).expect("diff"))
    };
    let with_parent = json(
        &w.engine
            .diff(&w.call(), DiffOptions::new(&after, &renamed))
            .expect("diff"),
    );
    assert_eq!(against_parent(&renamed), with_parent);
    assert_eq!(
        paths(&with_parent, "renamed"),
        ["README.md"],
        "{with_parent}"
    );
    let first = against_parent(&w.base);
    is_diff(&first);
    assert_eq!(first["stats"]["files"], 0, "{first}");
    assert!(
        first["message"]
            .as_str()
            .is_some_and(|m| m.contains("a first snapshot")),
        "{first}"
    );
}

#[test]
fn status() {
    let w = World::new();
    std::fs::write(w.work.join("NEW"), "new\n").expect("write");
    let options = StatusOptions {
        worktree: Some(w.work.clone()),
    };
    let v = json(&w.engine.status(&w.call(), options).expect("status"));
    is_diff(&v);
    items_have(&v, "added", CHANGE);
    assert_eq!(paths(&v, "added"), ["NEW"], "{v}");
    assert_eq!(v["added"][0]["insertions"], 1, "{v}");
    assert_eq!(v["modified"], j!([]), "{v}");
    assert_eq!(v["stats"]["files"], 1, "{v}");
}

#[test]
fn log() {
    let w = World::new();
    w.edit();
    let options = LogOptions {
        target: Some(w.work.to_string()),
        ..LogOptions::default()
    };
    let v = json(&w.engine.log(&w.call(), options).expect("log"));
    items_have(
        &v,
        "snapshots",
        &["id", "tree", "parents", "message", "labels", "created"],
    );
    // Newest first: the edit, then the onboarded base it came from.
    let snapshots = v["snapshots"].as_array().expect("a list");
    assert_eq!(snapshots.len(), 2, "{v}");
    assert_eq!(snapshots[0]["message"], "edit", "{v}");
    assert_eq!(snapshots[0]["parents"], j!([w.base]), "{v}");
    assert_eq!(snapshots[1]["id"], w.base.as_str(), "{v}");
}

#[test]
fn show() {
    let w = World::new();
    let options = ShowOptions {
        object: w.base.clone(),
        contents: false,
    };
    let v = json(&w.engine.show(&w.call(), options).expect("show"));
    // SPEC: a tree listing only.
    has(&v, &["tree", "entries"]);
    items_have(&v, "entries", &["name", "kind", "id", "size"]);
    assert_eq!(
        v["entries"][0],
        j!({"name": "README", "kind": "file", "id": v["entries"][0]["id"], "size": 6}),
        "{v}"
    );
    assert_eq!(v["entries"][1]["name"], "src", "{v}");
    assert_eq!(v["entries"][1]["kind"], "tree", "{v}");
}

#[test]
fn refs() {
    let w = World::new();
    let call = w.call();
    let set = RefSetOptions {
        name: "keep".into(),
        snapshot: w.base.clone(),
        ..Default::default()
    };
    let keep = j!([{"name": "keep", "snapshot": w.base}]);
    let v = json(&w.engine.ref_set(&call, set).expect("ref set"));
    items_have(&v, "refs", &["name", "snapshot"]);
    assert_eq!(v["refs"], keep, "{v}");
    let v = json(
        &w.engine
            .ref_list(&call, RefListOptions::default())
            .expect("ref list"),
    );
    items_have(&v, "refs", &["name", "snapshot"]);
    assert_eq!(v["refs"], keep, "{v}");
    let rm = RefRmOptions {
        name: "keep".into(),
        ..Default::default()
    };
    // `ref rm` names what it removed; nothing is left.
    let v = json(&w.engine.ref_rm(&call, rm).expect("ref rm"));
    has(&v, &["refs"]);
    assert_eq!(v["refs"], keep, "{v}");
    let v = json(
        &w.engine
            .ref_list(&call, RefListOptions::default())
            .expect("ref list"),
    );
    assert_eq!(v["refs"], j!([]), "{v}");
}

#[test]
fn remotes_push_and_pull() {
    let w = World::new();
    let call = w.call();
    let url = format!("file://{}", w.dir.join("remote"));
    let added = w
        .engine
        .remote_add(
            &call,
            RemoteAddOptions {
                name: "origin".into(),
                url,
                ..Default::default()
            },
        )
        .expect("remote add");
    items_have(&json(&added), "remotes", &["name", "url"]);
    let listed = json(
        &w.engine
            .remote_list(&call, RemoteListOptions::default())
            .expect("remote list"),
    );
    items_have(&listed, "remotes", &["name", "url"]);
    assert_eq!(listed["remotes"][0]["name"], "origin", "{listed}");
    assert_eq!(
        listed["remotes"][0]["url"],
        format!("file://{}", w.dir.join("remote")),
        "{listed}"
    );
    let pushed = w
        .engine
        .push(
            &call,
            PushOptions {
                snapshots: vec![w.base.clone()],
                ..Default::default()
            },
        )
        .expect("push");
    let pushed = json(&pushed);
    has(
        &pushed,
        &["pushed", "objects_sent", "bytes_sent", "objects_present"],
    );
    // The snapshot, its two trees and two blobs, none there before.
    assert_eq!(pushed["objects_sent"], 5, "{pushed}");
    assert_eq!(pushed["objects_present"], 0, "{pushed}");
    assert!(pushed["bytes_sent"].as_u64() > Some(16), "{pushed}");

    let other = Engine::create(w.dir.join("other-store")).expect("a second store");
    other
        .remote_add(
            &call,
            RemoteAddOptions {
                name: "origin".into(),
                url: format!("file://{}", w.dir.join("remote")),
                ..Default::default()
            },
        )
        .expect("remote add");
    let pulled = other
        .pull(
            &call,
            PullOptions {
                snapshots: vec![w.base.clone()],
                ..Default::default()
            },
        )
        .expect("pull");
    let pulled = json(&pulled);
    has(&pulled, &["pulled", "objects_received", "bytes_received"]);
    assert_eq!(
        pulled["objects_received"], pushed["objects_sent"],
        "{pulled}"
    );
    // The second store now shows what was pushed.
    let shown = other
        .show(
            &call,
            ShowOptions {
                object: format!("{}:README", w.base),
                contents: true,
            },
        )
        .expect("show in the second store");
    let shown = json(&shown);
    // "hello\n", base64.
    assert_eq!(
        (&shown["contents"], &shown["size"]),
        (&j!("aGVsbG8K"), &j!(6)),
        "{shown}"
    );
}

#[test]
fn checkpoint_and_rewind() {
    let w = World::new();
    let options = CheckpointOptions {
        dir: Some(w.work.clone()),
        name: Some("start".into()),
        ..CheckpointOptions::default()
    };
    let v = json(&w.engine.checkpoint(&w.call(), options).expect("checkpoint"));
    has(
        &v,
        &[
            "snapshot", "tree", "parent", "changed", "added", "modified", "removed", "skipped",
            "name",
        ],
    );
    assert_eq!(v["name"], "start", "{v}");
    assert_eq!(v["parent"], w.base.as_str(), "{v}");
    let start = v["snapshot"].clone();
    std::fs::write(w.work.join("NEW"), "new\n").expect("write");
    let options = RewindOptions {
        dir: Some(w.work.clone()),
        ..RewindOptions::default()
    };
    let v = json(&w.engine.rewind(&w.call(), options).expect("rewind"));
    has(&v, &["snapshot", "written", "deleted"]);
    assert_eq!(v["snapshot"], start, "{v}");
    assert_eq!(v["deleted"], j!(["NEW"]), "{v}");
    assert_eq!(v["written"], j!([]), "{v}");
    assert!(!w.work.join("NEW").exists());
}

#[test]
fn undo_and_redo() {
    let w = World::new();
    w.edit();
    let options = || UndoOptions {
        worktree: Some(w.work.clone()),
    };
    let v = json(&w.engine.undo(&w.call(), options()).expect("undo"));
    has(&v, &["reverted", "refused"]);
    assert_eq!(v["reverted"], j!(["NEW", "src/lib.rs"]), "{v}");
    assert_eq!(v["refused"], j!([]), "{v}");
    assert!(!w.work.join("NEW").exists());
    let v = json(&w.engine.redo(&w.call(), options()).expect("redo"));
    has(&v, &["reapplied", "refused"]);
    assert_eq!(v["reapplied"], j!(["NEW", "src/lib.rs"]), "{v}");
    assert!(w.work.join("NEW").exists());
    // Nothing left to redo: a refusal, with the same fields.
    let out = w.engine.redo(&w.call(), options()).expect("redo");
    assert!(matches!(out, UndoOutcome::Nothing(_)));
    has(&json(&out), &["reapplied", "refused", "message"]);
}

#[test]
fn op_log() {
    let w = World::new();
    w.edit();
    let options = OpLogOptions {
        dir: Some(w.work.clone()),
    };
    let v = json(&w.engine.op_log(&w.call(), options).expect("op log"));
    items_have(&v, "ops", &["seq", "time", "op", "before", "after"]);
    // The last op is the edit's snapshot, from the base to the new head.
    let ops = v["ops"].as_array().expect("a list");
    let last = ops.iter().max_by_key(|o| o["seq"].as_u64()).expect("an op");
    assert_eq!(last["op"], "snapshot", "{v}");
    assert_eq!(last["before"], w.base.as_str(), "{v}");
    assert_ne!(last["after"], last["before"], "{v}");
}

#[test]
fn policy() {
    let w = World::new();
    let extra = w.dir.join("extra");
    std::fs::create_dir_all(&extra).expect("mkdir");
    let extra = Utf8PathBuf::from_path_buf(std::fs::canonicalize(&extra).expect("canonical"))
        .expect("utf-8");
    let allowed = w
        .engine
        .policy_allow(
            &w.call(),
            PolicyAllowOptions {
                worktree: w.work.clone(),
                write: vec![extra.clone()],
                network: true,
                once: true,
                yes: true,
                ..PolicyAllowOptions::default()
            },
        )
        .expect("policy allow");
    let v = json(&allowed);
    has(&v, &["policy", "requests"]);
    has(&v["policy"], &["writable", "network", "once"]);
    has(&v["policy"]["once"], &["writable", "network"]);
    assert_eq!(v["policy"]["once"]["writable"], j!([extra]), "{v}");
    assert_eq!(v["policy"]["once"]["network"], true, "{v}");
    assert_eq!(v["policy"]["writable"], j!([]), "{v}");
    let requested = w
        .engine
        .policy_request(
            &w.call(),
            PolicyRequestOptions {
                worktree: w.work.clone(),
                write: vec![extra.clone()],
                reason: Some("a cache".into()),
                by: "an agent".into(),
                ..PolicyRequestOptions::default()
            },
        )
        .expect("policy request");
    let requested = json(&requested);
    has(&requested, &["policy", "requests", "requested", "message"]);
    assert_eq!(requested["requests"][0]["by"], "an agent", "{requested}");
    assert_eq!(requested["requests"][0]["reason"], "a cache", "{requested}");
    let options = PolicyOptions {
        worktree: Some(w.work.clone()),
        ..PolicyOptions::default()
    };
    let v = json(&w.engine.policy(&w.call(), options).expect("policy"));
    has(&v, &["policy", "requests"]);
    items_have(
        &v,
        "requests",
        &["id", "writable", "network", "once", "by", "reason", "asked"],
    );
    has(&v["policy"], &["writable", "network", "once"]);
    assert_eq!(v["policy"]["once"]["writable"][0], extra.as_str(), "{v}");
    let revoked = w.engine.policy_revoke(
        &w.call(),
        PolicyRevokeOptions {
            worktree: w.work.clone(),
            write: vec![extra],
            once: true,
            ..PolicyRevokeOptions::default()
        },
    );
    let revoked = json(&revoked.expect("policy revoke"));
    has(&revoked, &["policy"]);
    assert_eq!(revoked["policy"]["once"]["writable"], j!([]), "{revoked}");
}

/// A worktree with a task (a first checkpoint) and a change since.
fn task(w: &World) {
    let options = CheckpointOptions {
        dir: Some(w.work.clone()),
        ..CheckpointOptions::default()
    };
    w.engine.checkpoint(&w.call(), options).expect("checkpoint");
    std::fs::write(w.work.join("NEW"), "new\n").expect("write");
}

#[test]
fn review() {
    let w = World::new();
    task(&w);
    let options = ReviewOptions {
        dir: Some(w.work.clone()),
        ..ReviewOptions::default()
    };
    let v = json(&w.engine.review(&w.call(), options).expect("review"));
    is_diff(&v);
    items_have(&v, "added", CHANGE);
    assert_eq!(paths(&v, "added"), ["NEW"], "{v}");
    assert_eq!(v["modified"], j!([]), "{v}");
}

#[test]
fn accept() {
    let w = World::new();
    task(&w);
    let options = AcceptOptions {
        dir: Some(w.work.clone()),
        ..AcceptOptions::default()
    };
    let v = json(&w.engine.accept(&w.call(), options).expect("accept"));
    has(&v, &["accepted"]);
    assert_eq!(v["accepted"], j!(["NEW"]), "{v}");
    assert!(w.work.join("NEW").exists(), "accepted work stays");
}

#[test]
fn discard() {
    let w = World::new();
    task(&w);
    let options = DiscardOptions {
        dir: Some(w.work.clone()),
        yes: true,
        ..DiscardOptions::default()
    };
    let v = json(&w.engine.discard(&w.call(), options).expect("discard"));
    has(&v, &["discarded"]);
    assert_eq!(v["discarded"], j!(["NEW"]), "{v}");
    assert!(!w.work.join("NEW").exists(), "discarded work goes");
}

#[test]
fn recover() {
    let w = World::new();
    let options = RecoverOptions {
        dir: Some(w.work.clone()),
    };
    let v = json(&w.engine.recover(&w.call(), options).expect("recover"));
    has(&v, &["recovered"]);
    // Nothing was interrupted.
    assert_eq!(
        (&v["recovered"], &v["paths"]),
        (&Value::Null, &j!(0)),
        "{v}"
    );
}

#[test]
fn worktrees() {
    let w = World::new();
    let call = w.call();
    let roots = |v: &Value| -> Vec<String> {
        v["worktrees"]
            .as_array()
            .unwrap_or_else(|| panic!("no worktrees: {v}"))
            .iter()
            .map(|t| t["path"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let v = json(
        &w.engine
            .worktree_list(&call, WorktreeListOptions {})
            .expect("list"),
    );
    has(&v, &["worktrees"]);
    assert!(roots(&v).contains(&w.work.to_string()), "{v}");
    let path = || WorktreePathOptions {
        path: w.work.clone(),
    };
    let v = json(&w.engine.worktree_rebind(&call, path()).expect("rebind"));
    has(&v, &["worktrees"]);
    assert!(roots(&v).contains(&w.work.to_string()), "{v}");
    // `worktree remove` names what it removed; the list no longer has it.
    let v = json(&w.engine.worktree_remove(&call, path()).expect("remove"));
    has(&v, &["worktrees"]);
    assert_eq!(roots(&v), [w.work.to_string()], "{v}");
    let v = json(
        &w.engine
            .worktree_list(&call, WorktreeListOptions {})
            .expect("list"),
    );
    assert!(!roots(&v).contains(&w.work.to_string()), "{v}");
}

#[test]
fn deps() {
    let w = World::new();
    let call = w.call();
    std::fs::write(w.work.join(".gitignore"), "node_modules/\n").expect("write");
    std::fs::write(w.work.join("package-lock.json"), "{}\n").expect("write");
    std::fs::create_dir_all(w.work.join("node_modules/a")).expect("mkdir");
    std::fs::write(w.work.join("node_modules/a/index.js"), "1;\n").expect("write");
    let save = || DepsSaveOptions {
        worktree: Some(w.work.clone()),
    };
    let v = json(&w.engine.deps_save(&call, save()).expect("save"));
    items_have(
        &v,
        "layers",
        &["path", "key", "lockfiles", "files", "bytes", "new"],
    );
    let layer = &v["layers"][0];
    assert_eq!(
        (
            &layer["path"],
            &layer["files"],
            &layer["bytes"],
            &layer["new"]
        ),
        (&j!("node_modules"), &j!(1), &j!(3), &j!(true)),
        "{v}"
    );
    assert_eq!(layer["lockfiles"][0]["path"], "package-lock.json", "{v}");
    let key = layer["key"].as_str().expect("a key").to_owned();
    let v = json(&w.engine.deps_save(&call, save()).expect("save again"));
    assert_eq!(
        (&v["layers"][0]["key"], &v["layers"][0]["new"]),
        (&j!(key), &j!(false)),
        "{v}"
    );

    let snap = w
        .engine
        .snapshot(&call, SnapshotOptions::new(&w.work))
        .expect("snapshot");
    let co = w.dir.join("co");
    let v = json(
        &w.engine
            .checkout(&call, CheckoutOptions::new(snap.snapshot.to_string(), &co))
            .expect("checkout"),
    );
    items_have(&v, "deps", &["path", "key", "files", "bytes"]);
    assert_eq!(v["deps"][0]["key"], key.as_str(), "{v}");
    assert_eq!(
        std::fs::read_to_string(co.join("node_modules/a/index.js")).expect("attached"),
        "1;\n"
    );

    let v = json(&w.engine.deps_list(&call, DepsListOptions {}).expect("list"));
    items_have(
        &v,
        "layers",
        &[
            "path",
            "key",
            "lockfiles",
            "files",
            "bytes",
            "saved",
            "used",
            "used_by",
        ],
    );
    assert_eq!(v["layers"][0]["used_by"], j!([co.as_str()]), "{v}");
    let v = json(
        &w.engine
            .deps_rm(
                &call,
                DepsRmOptions {
                    key: key[..8].to_owned(),
                },
            )
            .expect("rm"),
    );
    assert_eq!(v["layers"][0]["key"], key.as_str(), "{v}");
    let v = json(&w.engine.deps_list(&call, DepsListOptions {}).expect("list"));
    assert_eq!(v["layers"], j!([]), "{v}");
}

#[test]
fn fsck_and_gc() {
    let w = World::new();
    let v = json(&w.engine.fsck(&w.call(), FsckOptions {}).expect("fsck"));
    has(&v, &["problems"]);
    assert_eq!(v["problems"], j!([]), "{v}");
    let v = json(&w.engine.gc(&w.call(), GcOptions::default()).expect("gc"));
    has(&v, &["removed", "bytes_freed", "ops_pruned", "retained"]);
    // Everything is reachable (the worktrees' heads).
    assert_eq!((&v["removed"], &v["bytes_freed"]), (&j!([]), &j!(0)), "{v}");
    let budget = GcOptions {
        keep_within: Some(1),
        max_size: Some(1),
        ..GcOptions::default()
    };
    let v = json(&w.engine.gc(&w.call(), budget).expect("gc --max-size"));
    has(&v, &["removed", "bytes_freed", "ops_pruned", "retained"]);
    items_have(&v, "retained", &["reason", "snapshot", "bytes"]);
    assert!(
        v["retained"]
            .as_array()
            .expect("a list")
            .iter()
            .any(|r| r["snapshot"] == w.base.as_str() && r["reason"] == "worktree head"),
        "the base is kept as a worktree head: {v}"
    );
}
