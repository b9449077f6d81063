//! Every JSON field SPEC.md names for the verbs that need git (`onboard`'s source,
//! `onboard --git`, `merge`) is in their serialized outcome, from an engine with the
//! gitoxide backend; the other verbs are checked in `cairn-engine`'s tests.

#[path = "../../engine/tests/support/mod.rs"]
mod support;

use cairn_engine::*;
use support::{World, git, has, items_have, json};

/// A world whose engine has the gitoxide backend.
fn world() -> World {
    World::with_engine(|store| {
        Engine::create(store)
            .expect("a store")
            .with_git(cairn_git::Gitoxide)
    })
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
    assert_eq!(v["skipped"][0]["path"], ".env", "{v}");
    assert_eq!(v["skipped"][0]["reason"], "denied by pattern .env", "{v}");
    assert_eq!(v["files"], 2, "README and src/lib.rs: {v}");
    let head = git(&w.repo, &["rev-parse", "HEAD"]);
    assert_eq!(v["source"]["git_commit"], head.trim(), "{v}");
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
    let head = git(&w.repo, &["rev-parse", "HEAD"]);
    assert_eq!(v["source"]["git_commit"], head.trim(), "{v}");
    assert_eq!(
        (&v["source"]["dirty"], &v["files"]),
        (&false.into(), &2.into()),
        "{v}"
    );
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
    let branch = v["branch"].as_str().expect("a branch name");
    let tip = git(&w.repo, &["rev-parse", &format!("refs/heads/{branch}")]);
    assert_eq!(v["commit"], tip.trim(), "{v}");
    let merged = git(&w.repo, &["show", &format!("{branch}:src/lib.rs")]);
    assert_eq!(merged, "fn a() { changed }\n");

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
    assert_eq!(v["merged"], false, "{v}");
    assert_eq!(v["conflicts"][0]["path"], "src/lib.rs", "{v}");
}
