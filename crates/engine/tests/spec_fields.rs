//! Every JSON field SPEC.md names for a verb is in its serialized outcome (extra fields are
//! allowed). `run` is the CLI's (not an engine verb; its fields are checked in
//! `tests/cli/run_commands.rs`).
//! The verbs that need git (`onboard`'s source, `onboard --git`, `merge`) are checked in
//! `cairn-git`'s tests.

mod support;

use cairn_engine::*;
use camino::Utf8PathBuf;
use serde_json::Value;
use support::World;

/// `value` has every field in `names`.
#[track_caller]
fn has(value: &Value, names: &[&str]) {
    for name in names {
        assert!(value.get(name).is_some(), "no {name:?} in {value}");
    }
}

/// Every item of the list `value[list]` (which must not be empty) has `names`.
#[track_caller]
fn items_have(value: &Value, list: &str, names: &[&str]) {
    let items = value[list]
        .as_array()
        .unwrap_or_else(|| panic!("{list} is no list: {value}"));
    assert!(!items.is_empty(), "{list} is empty: {value}");
    for item in items {
        has(item, names);
    }
}

fn json(outcome: &impl serde::Serialize) -> Value {
    serde_json::to_value(outcome).expect("an outcome serializes")
}

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
    has(&json(&out), &["store"]);
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
}

#[test]
fn checkout() {
    let w = World::new();
    let out = w
        .engine
        .checkout(&w.call(), CheckoutOptions::new(&w.base, w.dir.join("co")))
        .expect("checkout");
    has(&json(&out), &["worktree", "snapshot", "files", "bytes"]);
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
    assert!(!v["written"].as_array().expect("a list").is_empty(), "{v}");
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
    let v = json(
        &w.engine
            .diff(&w.call(), DiffOptions::new(&after, &w.base))
            .expect("diff"),
    );
    items_have(&v, "removed", CHANGE);
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
    items_have(
        &json(&w.engine.ref_set(&call, set).expect("ref set")),
        "refs",
        &["name", "snapshot"],
    );
    items_have(
        &json(
            &w.engine
                .ref_list(&call, RefListOptions::default())
                .expect("ref list"),
        ),
        "refs",
        &["name", "snapshot"],
    );
    let rm = RefRmOptions {
        name: "keep".into(),
        ..Default::default()
    };
    has(
        &json(&w.engine.ref_rm(&call, rm).expect("ref rm")),
        &["refs"],
    );
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
    let listed = w
        .engine
        .remote_list(&call, RemoteListOptions::default())
        .expect("remote list");
    items_have(&json(&listed), "remotes", &["name", "url"]);
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
    has(
        &json(&pushed),
        &["pushed", "objects_sent", "bytes_sent", "objects_present"],
    );

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
    has(
        &json(&pulled),
        &["pulled", "objects_received", "bytes_received"],
    );
    assert!(json(&pulled)["objects_received"].as_u64() > Some(0));
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
    std::fs::write(w.work.join("NEW"), "new\n").expect("write");
    let options = RewindOptions {
        dir: Some(w.work.clone()),
        ..RewindOptions::default()
    };
    let v = json(&w.engine.rewind(&w.call(), options).expect("rewind"));
    has(&v, &["snapshot", "written", "deleted"]);
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
    let v = json(&w.engine.redo(&w.call(), options()).expect("redo"));
    has(&v, &["reapplied", "refused"]);
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
    has(
        &json(&requested),
        &["policy", "requests", "requested", "message"],
    );
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
    has(&json(&revoked.expect("policy revoke")), &["policy"]);
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
}

#[test]
fn recover() {
    let w = World::new();
    let options = RecoverOptions {
        dir: Some(w.work.clone()),
    };
    let v = json(&w.engine.recover(&w.call(), options).expect("recover"));
    has(&v, &["recovered"]);
}

#[test]
fn worktrees() {
    let w = World::new();
    let call = w.call();
    has(
        &json(
            &w.engine
                .worktree_list(&call, WorktreeListOptions {})
                .expect("list"),
        ),
        &["worktrees"],
    );
    let path = || WorktreePathOptions {
        path: w.work.clone(),
    };
    has(
        &json(&w.engine.worktree_rebind(&call, path()).expect("rebind")),
        &["worktrees"],
    );
    has(
        &json(&w.engine.worktree_remove(&call, path()).expect("remove")),
        &["worktrees"],
    );
}

#[test]
fn fsck_and_gc() {
    let w = World::new();
    let v = json(&w.engine.fsck(&w.call(), FsckOptions {}).expect("fsck"));
    has(&v, &["problems"]);
    let v = json(&w.engine.gc(&w.call(), GcOptions::default()).expect("gc"));
    has(&v, &["removed", "bytes_freed", "ops_pruned", "retained"]);
    let budget = GcOptions {
        keep_within: Some(1),
        max_size: Some(1),
        ..GcOptions::default()
    };
    let v = json(&w.engine.gc(&w.call(), budget).expect("gc --max-size"));
    has(&v, &["removed", "bytes_freed", "ops_pruned", "retained"]);
    items_have(&v, "retained", &["reason", "snapshot", "bytes"]);
}
