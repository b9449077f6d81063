use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use fs_manager::{CaptureOptions, WorktreeCheckoutOptions, WorktreeOnboardOptions};

use crate::support::*;

#[test]
fn snapshots_record_changes_labels_and_skip_unchanged_trees() {
    let env = Env::new();
    let root = env.path("w");
    write_tree(
        &root,
        &[("a", file("1")), ("b", file("2")), ("dir/c", file("3"))],
    );
    let first = env
        .worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap();
    assert!(first.changed);

    let same = env
        .worktrees
        .snapshot(&env.store, &root, &CaptureOptions::default())
        .unwrap();
    assert!(!same.changed);
    assert_eq!(same.snapshot, first.snapshot);

    write_tree(&root, &[("a", file("1 changed")), ("new", file("4"))]);
    std::fs::remove_file(root.join("dir/c")).unwrap();
    let labels: BTreeMap<String, String> =
        [("task".into(), "42".into()), ("turn".into(), "3".into())].into();
    let opts = CaptureOptions {
        message: "turn 3",
        labels: &labels,
        ..Default::default()
    };
    let next = env
        .worktrees
        .snapshot(&env.store, &root.join("new"), &opts)
        .unwrap();
    assert!(next.changed);
    assert_eq!(next.parent, Some(first.snapshot));
    assert_eq!((next.added, next.modified, next.removed), (1, 1, 1));
    let snap = env.store.reader().unwrap().snapshot(next.snapshot).unwrap();
    assert_eq!(snap.labels, labels);
    assert_eq!(snap.message, "turn 3");
    assert_eq!(snap.parents, vec![first.snapshot]);
    assert_eq!(
        keys(&snapshot_files(&env.store, next.snapshot)),
        ["a", "b", "new"]
    );
    let log = env
        .store
        .reader()
        .unwrap()
        .log(next.snapshot, None)
        .unwrap();
    assert_eq!(log.len(), 2);
}

#[test]
fn the_stat_cache_means_unchanged_files_are_not_read() {
    let env = Env::new();
    let root = env.path("w");
    let spec: Vec<(String, Node)> = (0..50)
        .map(|i| (format!("f{i}"), file(&format!("content {i}"))))
        .collect();
    let spec: Vec<(&str, Node)> = spec.iter().map(|(n, c)| (n.as_str(), c.clone())).collect();
    write_tree(&root, &spec);
    settle();
    env.worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap();
    let again = env
        .worktrees
        .snapshot(&env.store, &root, &CaptureOptions::default())
        .unwrap();
    assert_eq!(again.read_files, 0, "nothing changed, nothing read");
    settle();
    std::fs::write(root.join("f7"), "changed!!").unwrap();
    let after = env
        .worktrees
        .snapshot(&env.store, &root, &CaptureOptions::default())
        .unwrap();
    assert_eq!(after.read_files, 1);
    assert_eq!(after.modified, 1);

    // A checkout fills the cache. Files it wrote within the racy margin of its end are read
    // once more by the next snapshot (as git re-hashes racily clean entries); after that,
    // nothing is read.
    let wt = env.path("checkout");
    env.worktrees
        .checkout(
            &env.store,
            after.snapshot,
            &wt,
            &WorktreeCheckoutOptions::default(),
        )
        .unwrap();
    settle();
    let s = env
        .worktrees
        .snapshot(&env.store, &wt, &CaptureOptions::default())
        .unwrap();
    assert!(!s.changed);
    let s = env
        .worktrees
        .snapshot(&env.store, &wt, &CaptureOptions::default())
        .unwrap();
    assert_eq!(s.read_files, 0);
}

#[test]
fn a_same_size_rewrite_right_after_a_snapshot_is_seen() {
    let env = Env::new();
    let root = env.path("w");
    write_tree(&root, &[("f", file("aaaa"))]);
    env.worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap();
    for round in 0..20 {
        let content = format!("{:04}", round);
        std::fs::write(root.join("f"), &content).unwrap();
        let s = env
            .worktrees
            .snapshot(&env.store, &root, &CaptureOptions::default())
            .unwrap();
        assert_eq!(
            snapshot_files(&env.store, s.snapshot)[&b"f".to_vec()],
            file(&content),
            "round {round}"
        );
    }
}

#[test]
fn files_edited_during_snapshots_never_poison_the_cache() {
    let env = Env::new();
    let root = env.path("w");
    let names: Vec<String> = (0..8).map(|i| format!("f{i}")).collect();
    for n in &names {
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join(n), vec![b'0'; 200_000]).unwrap();
    }
    env.worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let n = &names[(i % 8) as usize];
                // Same size every time, so only timestamps and content tell.
                let byte = b'a' + (i % 26) as u8;
                std::fs::write(root.join(n), vec![byte; 200_000]).unwrap();
            }
        });
        for _ in 0..25 {
            env.worktrees
                .snapshot(&env.store, &root, &CaptureOptions::default())
                .unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let last = env
        .worktrees
        .snapshot(&env.store, &root, &CaptureOptions::default())
        .unwrap();
    settle();
    let settled = env
        .worktrees
        .snapshot(&env.store, &root, &CaptureOptions::default())
        .unwrap();
    let on_disk = disk(&root, &[]);
    assert_eq!(
        snapshot_files(&env.store, last.snapshot),
        on_disk,
        "the final snapshot equals the final files"
    );
    assert_eq!(snapshot_files(&env.store, settled.snapshot), on_disk);
}

#[test]
fn round_trip_preserves_bytes_modes_links_and_odd_names() {
    let env = Env::new();
    let src = env.path("src");
    write_tree(
        &src,
        &[
            ("README", file("hello\n")),
            ("bin/tool", Node::Exec(b"#!/bin/sh\necho hi\n".to_vec())),
            ("docs/link-to-readme", Node::Link(b"../README".to_vec())),
            ("dangling", Node::Link(b"/nowhere/at/all".to_vec())),
            ("empty", file("")),
            ("caf\u{e9} \"quoted\" \\ name", file("utf-8 name")),
            (
                "big.bin",
                Node::File((0..3_000_000u32).map(|i| (i % 251) as u8).collect()),
            ),
            ("deep/a/b/c/d/e/f.txt", file("deep")),
        ],
    );
    std::os::unix::fs::symlink("x", src.join("self-ref")).unwrap();
    let raw = src
        .as_std_path()
        .join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"latin1-\xe9"));
    std::fs::write(&raw, "non-UTF-8 name").unwrap();
    std::fs::create_dir_all(src.join("empty-dir")).unwrap();

    let out = env
        .worktrees
        .onboard(&env.store, &src, &WorktreeOnboardOptions::default())
        .unwrap();
    let dest = env.path("dest");
    let co = env
        .worktrees
        .checkout(
            &env.store,
            out.snapshot,
            &dest,
            &WorktreeCheckoutOptions::default(),
        )
        .unwrap();
    assert_eq!(co.files, out.files);
    assert_eq!(disk(&dest, &[]), disk(&src, &[]));
    assert!(
        !dest.join("empty-dir").exists(),
        "empty directories are not kept"
    );
}
