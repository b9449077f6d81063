//! Hostile worktrees and crafted trees: a canary outside must never change, and every case
//! either fails with an error naming the path or id, or safely replaces what was planted.

use camino::{Utf8Path, Utf8PathBuf};
use cas::{EntryKind, PreparedBlob, Snapshot, SnapshotId, Tree, TreeEntry, WriteBatch};
use fs_manager::{WorktreeCheckoutOptions, WorktreeOnboardOptions, WorktreeRollbackOptions};

use crate::support::*;

struct Scene {
    env: Env,
    root: Utf8PathBuf,
    outside: Utf8PathBuf,
    snap: SnapshotId,
}

fn scene() -> Scene {
    let env = Env::new();
    let outside = env.path("outside");
    write_tree(
        &outside,
        &[
            ("canary.txt", file("must never change")),
            ("f", file("outside f")),
            ("x", file("outside x")),
        ],
    );
    let root = env.path("w");
    write_tree(
        &root,
        &[
            ("f", file("inside f")),
            ("d/x", file("inside x")),
            ("d/e/y", file("deep y")),
            ("keep", file("k")),
        ],
    );
    let snap = env
        .worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap()
        .snapshot;
    Scene {
        env,
        root,
        outside,
        snap,
    }
}

fn canary(s: &Scene) -> std::collections::BTreeMap<Vec<u8>, Node> {
    disk(&s.outside, &[])
}

fn link(target: &Utf8Path, at: &Utf8Path) {
    let _ = std::fs::remove_file(at);
    let _ = std::fs::remove_dir_all(at);
    std::os::unix::fs::symlink(target, at).unwrap();
}

type Plant = fn(&Scene);

/// Rollback cases: plant something, roll back to the clean snapshot; either the plant is
/// replaced and the worktree equals the snapshot, or the rollback is refused naming it.
fn rollback_cases() -> Vec<(&'static str, Plant)> {
    vec![
        ("final path is a link to an outside file", |s| {
            link(&s.outside.join("f"), &s.root.join("f"))
        }),
        ("leading directory is a link outside", |s| {
            link(&s.outside, &s.root.join("d"))
        }),
        ("leading directory is a relative escape ../../..", |s| {
            link(Utf8Path::new("../../.."), &s.root.join("d"))
        }),
        ("chain of links ending outside", |s| {
            link(&s.outside, &s.root.join("l1"));
            link(Utf8Path::new("l1"), &s.root.join("d"));
        }),
        ("deep directory is a link outside", |s| {
            link(&s.outside, &s.root.join("d/e"))
        }),
        ("hard link to the canary at a final path", |s| {
            std::fs::remove_file(s.root.join("keep")).unwrap();
            std::fs::hard_link(s.outside.join("canary.txt"), s.root.join("keep")).unwrap();
        }),
        ("hard link to an outside file in a subdirectory", |s| {
            std::fs::remove_file(s.root.join("d/x")).unwrap();
            std::fs::hard_link(s.outside.join("x"), s.root.join("d/x")).unwrap();
        }),
        (
            "file deleted and a link to the outside file of that name planted",
            |s| link(&s.outside.join("x"), &s.root.join("d/x")),
        ),
        ("directory replaced by a file", |s| {
            std::fs::remove_dir_all(s.root.join("d")).unwrap();
            std::fs::write(s.root.join("d"), "now a file").unwrap();
        }),
        ("file replaced by a directory holding a link outside", |s| {
            std::fs::remove_file(s.root.join("f")).unwrap();
            std::fs::create_dir(s.root.join("f")).unwrap();
            link(&s.outside, &s.root.join("f/escape"));
        }),
        ("new link to outside created beside the files", |s| {
            link(&s.outside, &s.root.join("new-link"))
        }),
        ("dangling link where a directory belongs", |s| {
            link(Utf8Path::new("/nonexistent/dir"), &s.root.join("d"))
        }),
        ("link to the root itself where a directory belongs", |s| {
            link(&s.root.clone(), &s.root.join("d"))
        }),
        ("ignored link outside where a directory belongs", |s| {
            std::fs::write(s.root.join(".gitignore"), "d\n").unwrap();
            link(&s.outside, &s.root.join("d"));
        }),
    ]
}

#[test]
fn rollback_never_reaches_outside() {
    for (name, plant) in rollback_cases() {
        let s = scene();
        let before = canary(&s);
        plant(&s);
        let result = s.env.worktrees.rollback(
            &s.env.store,
            &s.root,
            s.snap,
            &WorktreeRollbackOptions::default(),
        );
        assert_eq!(canary(&s), before, "{name}: the outside changed");
        match result {
            Ok(_) => {
                let now = disk(&s.root, &[".gitignore"]);
                assert_eq!(
                    now,
                    snapshot_files(&s.env.store, s.snap),
                    "{name}: worktree differs from the snapshot"
                );
            }
            Err(e) => {
                let message = e.to_string();
                assert!(
                    message.contains(s.root.as_str()),
                    "{name}: error names no path: {message}"
                );
            }
        }
    }
}

#[test]
fn checkout_refuses_a_destination_that_is_a_link() {
    let s = scene();
    let before = canary(&s);
    let empty_outside = s.env.path("empty-outside");
    std::fs::create_dir_all(&empty_outside).unwrap();
    let dest = s.env.path("dest");
    std::os::unix::fs::symlink(&empty_outside, &dest).unwrap();
    let err = s
        .env
        .worktrees
        .checkout(
            &s.env.store,
            s.snap,
            &dest,
            &WorktreeCheckoutOptions::default(),
        )
        .unwrap_err();
    assert!(err.to_string().contains(dest.as_str()), "{err}");
    assert_eq!(std::fs::read_dir(&empty_outside).unwrap().count(), 0);
    assert_eq!(canary(&s), before);
}

/// Stores a tree holding `placeholder` entries, then rewrites those bytes in the database
/// file to `bad`, as a crafted store or a received object would hold them.
fn crafted(
    store: cas::Store,
    entries: &[(&[u8], EntryKind)],
    patch: &[(&[u8], &[u8])],
) -> (cas::Store, SnapshotId) {
    let mut batch = WriteBatch::new();
    let blob = batch.add_blob(PreparedBlob::new(b"payload"));
    let sub = batch.add_tree(
        Tree::new(vec![TreeEntry {
            name: b"inner".to_vec(),
            kind: EntryKind::File,
            id: blob.into(),
            size: 7,
        }])
        .unwrap(),
    );
    let tree = Tree::new(
        entries
            .iter()
            .map(|(name, kind)| match kind {
                EntryKind::Tree => TreeEntry {
                    name: name.to_vec(),
                    kind: EntryKind::Tree,
                    id: sub.into(),
                    size: 7,
                },
                k => TreeEntry {
                    name: name.to_vec(),
                    kind: *k,
                    id: blob.into(),
                    size: 7,
                },
            })
            .collect(),
    )
    .unwrap();
    // Patch only inside this tree's encoding, which its ids make unique in the file.
    let encoded = tree.encode();
    let mut patched = encoded.clone();
    for (from, to) in patch {
        assert_eq!(from.len(), to.len());
        let at = patched
            .windows(from.len())
            .position(|w| w == *from)
            .expect("placeholder in the tree");
        patched[at..at + to.len()].copy_from_slice(to);
    }
    let tree = batch.add_tree(tree);
    let snap = batch.add_snapshot(Snapshot {
        tree,
        parents: vec![],
        created: jiff::Timestamp::now(),
        message: "crafted".into(),
        labels: Default::default(),
        source: None,
    });
    store.write(&batch).unwrap();
    let db = store.database_path();
    let root = store.root().to_owned();
    drop(store);
    let mut bytes = std::fs::read(&db).unwrap();
    let hits: Vec<usize> = bytes
        .windows(encoded.len())
        .enumerate()
        .filter(|(_, w)| *w == encoded.as_slice())
        .map(|(i, _)| i)
        .collect();
    assert!(!hits.is_empty(), "the tree's encoding is in the file");
    for at in hits {
        bytes[at..at + patched.len()].copy_from_slice(&patched);
    }
    std::fs::write(&db, bytes).unwrap();
    (
        cas::Store::open(&root, &cas::OpenOptions::default()).unwrap(),
        snap,
    )
}

/// A crafted case: label, entries stored, and byte patches applied to the tree.
type Crafted = (String, Vec<(Vec<u8>, EntryKind)>, Vec<(Vec<u8>, Vec<u8>)>);

#[test]
fn crafted_trees_are_refused_and_nothing_is_written() {
    let names: Vec<(&str, &[u8])> = vec![
        ("dot", b"."),
        ("dot-dot", b".."),
        (".git", b".git"),
        (".GIT", b".GIT"),
        ("git~1", b"git~1"),
        (".git.", b".git."),
        ("NTFS stream", b".git::$INDEX_ALLOCATION"),
        ("slash", b"a/b"),
        ("NUL", b"nu\0l"),
        ("control", b"ct\x01l"),
    ];
    let mut cases: Vec<Crafted> = Vec::new();
    for (i, (label, bad)) in names.iter().enumerate() {
        let placeholder: Vec<u8> = (0..bad.len())
            .map(|j| b'J' + ((i + j) % 10) as u8)
            .collect();
        let kind = if i % 2 == 0 {
            EntryKind::Tree
        } else {
            EntryKind::File
        };
        cases.push((
            format!("name {label}"),
            vec![(placeholder.clone(), kind)],
            vec![(placeholder, bad.to_vec())],
        ));
    }
    // A file and a directory under one name; entries out of order.
    cases.push((
        "duplicate names".into(),
        vec![
            (b"Qdup1".to_vec(), EntryKind::File),
            (b"Qdup2".to_vec(), EntryKind::Tree),
        ],
        vec![(b"Qdup2".to_vec(), b"Qdup1".to_vec())],
    ));
    cases.push((
        "unsorted entries".into(),
        vec![
            (b"Qsrt1".to_vec(), EntryKind::File),
            (b"Qsrt2".to_vec(), EntryKind::File),
        ],
        vec![(b"Qsrt1".to_vec(), b"Qsrt3".to_vec())],
    ));
    assert!(cases.len() + rollback_cases().len() + 1 >= 25);

    for (label, entries, patch) in cases {
        let dir = tempfile::tempdir().unwrap();
        let base = Utf8Path::from_path(dir.path()).unwrap().to_owned();
        let outside = base.join("outside");
        write_tree(&outside, &[("canary.txt", file("must never change"))]);
        let before = disk(&outside, &[]);
        let root = base.join("w");
        write_tree(&root, &[("f", file("inside f")), ("d/x", file("inside x"))]);
        let options = cas::OpenOptions {
            create: true,
            ..Default::default()
        };
        let store = cas::Store::open(&base.join("store"), &options).unwrap();
        fs_manager::Worktrees::new()
            .onboard(&store, &root, &WorktreeOnboardOptions::default())
            .unwrap();
        let entries: Vec<(&[u8], EntryKind)> =
            entries.iter().map(|(n, k)| (n.as_slice(), *k)).collect();
        let patch: Vec<(&[u8], &[u8])> = patch
            .iter()
            .map(|(a, b)| (a.as_slice(), b.as_slice()))
            .collect();
        let (store, snap) = crafted(store, &entries, &patch);
        let dest = base.join("dest");
        let err = fs_manager::Worktrees::new()
            .checkout(&store, snap, &dest, &WorktreeCheckoutOptions::default())
            .unwrap_err();
        assert!(
            err.to_string().contains("tree") && err.to_string().contains("corrupt"),
            "{label}: {err}"
        );
        assert!(
            !dest.exists() || std::fs::read_dir(&dest).unwrap().count() == 0,
            "{label}: checkout wrote something"
        );
        let live = disk(&root, &[]);
        let err = fs_manager::Worktrees::new()
            .rollback(&store, &root, snap, &WorktreeRollbackOptions::default())
            .unwrap_err();
        assert!(err.to_string().contains("corrupt"), "{label}: {err}");
        assert_eq!(
            disk(&root, &[]),
            live,
            "{label}: rollback changed the worktree"
        );
        assert_eq!(disk(&outside, &[]), before, "{label}: the outside changed");
    }
}

#[test]
fn a_path_deeper_than_the_rules_allow_is_refused_cleanly() {
    let env = Env::new();
    let mut batch = WriteBatch::new();
    let blob = batch.add_blob(PreparedBlob::new(b"deep"));
    let mut entry = TreeEntry {
        name: b"leaf".to_vec(),
        kind: EntryKind::File,
        id: blob.into(),
        size: 4,
    };
    for _ in 0..2100 {
        let tree = Tree::new(vec![entry]).unwrap();
        let id = batch.add_tree(tree);
        entry = TreeEntry {
            name: b"d".to_vec(),
            kind: EntryKind::Tree,
            id: id.into(),
            size: 4,
        };
    }
    let root = batch.add_tree(Tree::new(vec![entry]).unwrap());
    let snap = batch.add_snapshot(Snapshot {
        tree: root,
        parents: vec![],
        created: jiff::Timestamp::now(),
        message: "deep".into(),
        labels: Default::default(),
        source: None,
    });
    env.store.write(&batch).unwrap();
    let dest = env.path("dest");
    let err = env
        .worktrees
        .checkout(&env.store, snap, &dest, &WorktreeCheckoutOptions::default())
        .unwrap_err();
    assert!(
        err.to_string().contains("longer than 4096 bytes") || err.to_string().contains("deeper"),
        "{err}"
    );
    assert!(
        !dest.exists() || std::fs::read_dir(&dest).unwrap().count() == 0,
        "nothing was written"
    );
    // Rolling a worktree back to it is refused the same way, before anything changes.
    let w = env.path("w");
    write_tree(&w, &[("a", file("1"))]);
    env.worktrees
        .onboard(&env.store, &w, &WorktreeOnboardOptions::default())
        .unwrap();
    let err = env
        .worktrees
        .rollback(&env.store, &w, snap, &WorktreeRollbackOptions::default())
        .unwrap_err();
    assert!(err.to_string().contains("longer than 4096 bytes"), "{err}");
    assert_eq!(disk(&w, &[]), [(b"a".to_vec(), file("1"))].into());
}
