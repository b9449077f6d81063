//! An engine opened without a git backend: `onboard` records no git source, and what needs
//! git (`onboard --git`, `merge`, recovering a `merge --checkout`) is refused, naming the
//! repository.

mod support;

use cairn_engine::*;
use support::World;

#[track_caller]
fn refused_for_no_git(e: &Error, repo: &camino::Utf8Path) {
    assert_eq!((e.exit(), e.code()), (EXIT_USAGE, "no_git"), "{e}");
    let message = e.to_string();
    assert!(message.contains(repo.as_str()), "{message}");
    assert!(message.contains("no git support"), "{message}");
}

#[test]
fn onboard_of_a_git_repository_records_no_source() {
    let w = World::new();
    let out = w
        .engine
        .onboard(&w.call(), OnboardOptions::new(&w.repo))
        .expect("onboard");
    assert!(out.source.is_none(), "{out:?}");
}

#[test]
fn merge_and_import_are_refused_naming_the_repository() {
    let w = World::new();
    let snap = w.edit();
    let e = w
        .engine
        .merge(&w.call(), MergeOptions::new(&snap, &w.repo))
        .expect_err("no git");
    refused_for_no_git(&e, &w.repo);
    let import = ImportOptions {
        src: w.repo.clone(),
        rev: "HEAD".into(),
        ..ImportOptions::default()
    };
    let e = w.engine.import(&w.call(), import).expect_err("no git");
    refused_for_no_git(&e, &w.repo);
}

#[test]
fn recover_of_an_interrupted_merge_is_refused_and_other_recovers_still_run() {
    let w = World::new();
    // Nothing interrupted: recover runs as ever.
    let options = || RecoverOptions {
        dir: Some(w.repo.clone()),
    };
    let out = w.engine.recover(&w.call(), options()).expect("recover");
    assert_eq!(out.recovered, None);
    // The header every intent journal has, as an interrupted `merge --checkout` leaves it.
    let journal = serde_json::json!({
        "kind": "git-checkout",
        "op": "merge --checkout",
        "started": "2026-01-01T00:00:00Z",
    });
    w.engine
        .with_store(|store| {
            let mut batch = cas::WriteBatch::new();
            batch.set_journal(&w.repo, Some(journal.to_string().into_bytes()));
            store.write(&batch)
        })
        .expect("a store")
        .expect("journal written");
    let e = w.engine.recover(&w.call(), options()).expect_err("no git");
    refused_for_no_git(&e, &w.repo);
}
