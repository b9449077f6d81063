//! Every JSON field SPEC.md names for the verbs that need git (`onboard`'s source,
//! `onboard --git`, `merge`) is in their serialized outcome, from an engine with the
//! gitoxide backend; the other verbs are checked in `cairn-engine`'s tests.

#[path = "../../engine/tests/support/mod.rs"]
mod support;

use cairn_engine::*;
use serde_json::Value;
use support::{World, git};

/// A world whose engine has the gitoxide backend.
fn world() -> World {
    World::with_engine(|store| {
        Engine::create(store)
            .expect("a store")
            .with_git(cairn_git::Gitoxide)
    })
}

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

#[test]
fn onboard() {
    let w = world();
    std::fs::write(w.repo.join(".env"), "SECRET=1\n").expect("write");
    let out = w
        .engine
        .onboard(&w.call(), OnboardOptions::new(&w.repo))
        .expect("onboard");
    let v = json(&out);
    has(
        &v,
        &["snapshot", "tree", "files", "bytes", "skipped", "source"],
    );
    items_have(&v, "skipped", &["path", "reason"]);
    has(&v["source"], &["git_commit", "dirty"]);
}

#[test]
fn import() {
    let w = world();
    let options = ImportOptions {
        src: w.repo.clone(),
        rev: "HEAD".into(),
        ..ImportOptions::default()
    };
    let v = json(&w.engine.import(&w.call(), options).expect("import"));
    has(
        &v,
        &["snapshot", "tree", "files", "bytes", "skipped", "source"],
    );
    has(&v["source"], &["git_commit", "dirty"]);
}

#[test]
fn merge() {
    let w = world();
    let snap = w.edit();
    let v = json(
        &w.engine
            .merge(&w.call(), MergeOptions::new(&snap, &w.repo))
            .expect("merge"),
    );
    has(&v, &["merged", "commit", "branch", "conflicts", "dirty"]);
    assert_eq!(v["merged"], true, "{v}");

    // A conflicting commit in the repository: the conflicts are listed.
    std::fs::write(w.repo.join("src/lib.rs"), "fn a() { theirs }\n").expect("write");
    git(&w.repo, &["commit", "-q", "-am", "theirs"]);
    let options = MergeOptions {
        branch: Some("again".into()),
        ..MergeOptions::new(&snap, &w.repo)
    };
    let v = json(&w.engine.merge(&w.call(), options).expect("merge"));
    items_have(&v, "conflicts", &["path", "kind"]);
    has(&v, &["message"]);
}
