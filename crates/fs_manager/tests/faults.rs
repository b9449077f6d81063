//! Fail the Nth write, for every N: an I/O error at each write point of a multi-file step
//! (rollback, undo, redo, checkout) leaves the worktree, after `recover`, exactly as it was
//! before the step or exactly as the step leaves it, and `fsck` clean. Its own test binary:
//! the fail point is process-wide, and no other test may run into it.

#[path = "fs_manager/support.rs"]
#[allow(dead_code)]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use camino::Utf8Path;
use cas::SnapshotId;
use fs_manager::{WorktreeCheckoutOptions, WorktreeOnboardOptions, WorktreeRollbackOptions};

use support::*;

const POINT: &str = "worktree-write";

fn tree(tag: &str) -> Vec<(String, Node)> {
    let mut spec = Vec::new();
    for d in 0..4 {
        for f in 0..5 {
            let n = d * 5 + f;
            let body = match tag {
                // B: some files changed, some gone, a file where a directory was, new ones.
                "b" if n % 3 == 0 => format!("changed {n}\n"),
                "b" if n % 7 == 1 => continue,
                _ => format!("file {n}\n"),
            };
            spec.push((format!("d{d}/f{f}.txt"), file(&body)));
        }
    }
    if tag == "a" {
        spec.push(("becomes-file/inner.txt".into(), file("inner\n")));
        spec.push(("link".into(), Node::Link(b"d0/f0.txt".to_vec())));
    } else {
        spec.push(("becomes-file".into(), file("now a file\n")));
        spec.push(("link".into(), file("now a file, was a link\n")));
        spec.push(("new/deep/n.txt".into(), Node::Exec(b"#!/bin/sh\n".to_vec())));
    }
    spec
}

fn write(root: &Utf8Path, spec: &[(String, Node)]) {
    let refs: Vec<(&str, Node)> = spec.iter().map(|(p, n)| (p.as_str(), n.clone())).collect();
    write_tree(root, &refs);
}

fn fsck_clean(env: &Env, what: &str) {
    let out = env
        .store
        .fsck(
            &cas::StoreFsckOptions::default(),
            &[&fs_manager::Registry::default()],
        )
        .unwrap();
    assert!(out.problems.is_empty(), "{what}: fsck: {:?}", out.problems);
}

/// How many times a step asks the fail point (a run with nothing injected).
fn count_writes(step: &dyn Fn() -> Result<(), String>) -> u64 {
    let calls = Arc::new(AtomicU64::new(0));
    let c = calls.clone();
    fail::cfg_callback(POINT, move || {
        c.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    let result = step();
    fail::remove(POINT);
    result.unwrap();
    calls.load(Ordering::SeqCst)
}

/// Runs `step` with its Nth write failing, for every N it has; after each, `recover`, and
/// the files must be `before` or `after` exactly. `reset` puts `before` back.
fn every_nth(
    env: &Env,
    name: &str,
    root: &Utf8Path,
    step: &dyn Fn() -> Result<(), String>,
    reset: &dyn Fn(),
    before: &BTreeMap<Vec<u8>, Node>,
    after: &BTreeMap<Vec<u8>, Node>,
) -> (u64, u64) {
    let writes = count_writes(step);
    assert!(
        writes > 10,
        "{name}: only {writes} writes: the step did not write"
    );
    reset();
    let (mut ended_before, mut ended_after) = (0, 0);
    for n in 0..writes {
        fail::cfg(POINT, &format!("{n}*off->return")).unwrap();
        let result = step();
        fail::remove(POINT);
        assert!(
            result.is_err(),
            "{name}: write {n} of {writes} failed, yet the step succeeded"
        );
        let recovered = env.worktrees.recover(&env.store, root);
        assert!(
            recovered.is_ok(),
            "{name}, write {n}: recover: {recovered:?}"
        );
        let now = disk(root, &[]);
        if &now == before {
            ended_before += 1;
        } else if &now == after {
            ended_after += 1;
        } else {
            panic!(
                "{name}, write {n} of {writes} failed: the worktree is neither before nor after; {} files: {:?}",
                now.len(),
                keys(&now)
            );
        }
        fsck_clean(env, &format!("{name}, write {n}"));
        reset();
        assert_eq!(&disk(root, &[]), before, "{name}: reset");
    }
    eprintln!(
        "{name}: {writes} writes failed one by one: {ended_before} ended before, {ended_after} after"
    );
    (ended_before, ended_after)
}

#[test]
fn an_io_error_at_any_write_leaves_before_or_after_once_recovered() {
    let _scenario = fail::FailScenario::setup();
    let env = Env::new();
    let wt = env.path("w");
    write(&wt, &tree("a"));
    let a = env
        .worktrees
        .onboard(&env.store, &wt, &WorktreeOnboardOptions::default())
        .unwrap()
        .snapshot;
    for entry in std::fs::read_dir(&wt).unwrap() {
        let path = entry.unwrap().path();
        match path.symlink_metadata().unwrap().is_dir() {
            true => std::fs::remove_dir_all(&path).unwrap(),
            false => std::fs::remove_file(&path).unwrap(),
        }
    }
    write(&wt, &tree("b"));
    let b = env
        .worktrees
        .snapshot(&env.store, &wt, &fs_manager::CaptureOptions::default())
        .unwrap()
        .snapshot;
    let files_a = snapshot_files(&env.store, a);
    let files_b = snapshot_files(&env.store, b);
    assert_eq!(disk(&wt, &[]), files_b);
    let rollback = |to: SnapshotId| {
        env.worktrees
            .rollback(&env.store, &wt, to, &WorktreeRollbackOptions::default())
            .map(drop)
            .map_err(|e| e.to_string())
    };
    let to_a = || rollback(a).unwrap();
    let to_b = || rollback(b).unwrap();

    // Rollback, both ways.
    every_nth(
        &env,
        "rollback b->a",
        &wt,
        &|| rollback(a),
        &to_b,
        &files_b,
        &files_a,
    );
    to_a();
    every_nth(
        &env,
        "rollback a->b",
        &wt,
        &|| rollback(b),
        &to_a,
        &files_a,
        &files_b,
    );

    // Undo of a rollback (b -> a), and redo of that undo.
    let undo = || {
        env.worktrees
            .undo(&env.store, &wt)
            .map_err(|e| e.to_string())
            .and_then(|o| match o.refused.is_empty() {
                true => Ok(()),
                false => Err(format!("refused: {:?}", o.refused)),
            })
    };
    let redo = || {
        env.worktrees
            .redo(&env.store, &wt)
            .map_err(|e| e.to_string())
            .and_then(|o| match o.refused.is_empty() {
                true => Ok(()),
                false => Err(format!("refused: {:?}", o.refused)),
            })
    };
    // Before each try: at A, with "rollback b->a" the newest change set to undo.
    let at_a_undoable = || {
        to_b();
        to_a();
    };
    at_a_undoable();
    every_nth(&env, "undo", &wt, &undo, &at_a_undoable, &files_a, &files_b);
    let at_b_redoable = || {
        at_a_undoable();
        undo().unwrap();
    };
    at_b_redoable();
    every_nth(&env, "redo", &wt, &redo, &at_b_redoable, &files_b, &files_a);

    // Checkout into a new folder: nothing there, or all of it.
    let dest = env.path("co");
    let checkout = || {
        env.worktrees
            .checkout(&env.store, b, &dest, &WorktreeCheckoutOptions::default())
            .map(drop)
            .map_err(|e| e.to_string())
    };
    let clear = || {
        if dest.exists() {
            std::fs::remove_dir_all(&dest).unwrap();
        }
        let _ = env.worktrees.remove(&env.store, &dest);
    };
    let writes = count_writes(&checkout);
    clear();
    for n in 0..writes {
        fail::cfg(POINT, &format!("{n}*off->return")).unwrap();
        let result = checkout();
        fail::remove(POINT);
        assert!(
            result.is_err(),
            "checkout: write {n} failed, yet it succeeded"
        );
        env.worktrees.recover(&env.store, &dest).unwrap();
        let now = if dest.exists() {
            disk(&dest, &[])
        } else {
            BTreeMap::new()
        };
        assert!(
            now.is_empty() || now == files_b,
            "checkout, write {n} of {writes}: {} of {} files",
            now.len(),
            files_b.len()
        );
        fsck_clean(&env, &format!("checkout, write {n}"));
        clear();
    }
    eprintln!("checkout: {writes} writes failed one by one");
}

#[test]
fn an_io_error_attaching_dependency_layers_leaves_no_layer_folder_and_no_record_of_it() {
    use fs_manager::RegistryRead;
    let _scenario = fail::FailScenario::setup();
    let env = Env::new();
    let src = env.path("src");
    write(&src, &tree("a"));
    let snap = env
        .worktrees
        .onboard(&env.store, &src, &WorktreeOnboardOptions::default())
        .unwrap()
        .snapshot;
    // A layer's tree, stored as `deps save` stores one.
    let deps = env.path("deps");
    write(&deps, &tree("b"));
    let captured = fs_manager::capture_dir(&env.store, &deps, &cas::Silent).unwrap();
    let mut batch = captured.unstored;
    for t in captured.trees.into_values() {
        batch.add_tree(t);
    }
    env.store.write(&batch).unwrap();
    let layer = fs_manager::AttachedLayer {
        path: "vendor/bundle".into(),
        key: "k".into(),
        tree: captured.tree,
    };
    let checkout = |n: u64| {
        env.worktrees
            .checkout(
                &env.store,
                snap,
                &env.path(&format!("co{n}")),
                &WorktreeCheckoutOptions::default(),
            )
            .unwrap()
            .worktree
    };
    let root = checkout(u64::MAX);
    let to_write = fs_manager::LayerToWrite {
        attached: layer.clone(),
        stored: layer.tree,
    };
    let attach = |root: &Utf8Path| {
        env.worktrees.attach_deps(
            &env.store,
            root,
            std::slice::from_ref(&to_write),
            &cas::Silent,
        )
    };
    let writes = count_writes(&|| attach(&root).map(|_| ()).map_err(|e| e.to_string()));
    assert!(writes > 10, "only {writes} writes");
    assert_eq!(disk(&root.join("vendor/bundle"), &[]), disk(&deps, &[]));
    let record = env
        .store
        .reader()
        .unwrap()
        .worktree(&root)
        .unwrap()
        .unwrap();
    assert_eq!(record.deps, std::slice::from_ref(&layer));
    for n in 0..writes {
        let root = checkout(n);
        fail::cfg(POINT, &format!("{n}*off->return")).unwrap();
        let result = attach(&root);
        fail::remove(POINT);
        assert!(
            result.is_err(),
            "write {n} of {writes} failed, yet attach succeeded"
        );
        assert!(
            !root.join("vendor/bundle").exists(),
            "write {n}: a layer folder stays"
        );
        let record = env
            .store
            .reader()
            .unwrap()
            .worktree(&root)
            .unwrap()
            .unwrap();
        assert_eq!(
            record.deps,
            [],
            "write {n}: the record names a layer not written"
        );
        fsck_clean(&env, &format!("attach, write {n}"));
    }
}
