//! `undo` and `redo` across every change of kind at one path: file, executable file,
//! directory with content, symlink, nothing.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};

use camino::Utf8Path;
use fs_manager::{WorktreeOnboardOptions, WorktreeRollbackOptions};

use crate::support::Env;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Exec,
    Dir,
    Link,
    Absent,
}

const KINDS: [Kind; 5] = [Kind::File, Kind::Exec, Kind::Dir, Kind::Link, Kind::Absent];

/// What one path below the root holds, as exactly as undo must bring it back.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir,
    File { mode: u32, bytes: Vec<u8> },
    Link(Vec<u8>),
}

fn write_file(path: &Utf8Path, bytes: &[u8], executable: bool) {
    // Created as cairn creates files (0o666 or 0o777 less the umask), so modes compare
    // exactly whatever the umask.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if executable { 0o777 } else { 0o666 })
        .open(path)
        .unwrap();
    f.write_all(bytes).unwrap();
}

/// Puts `kind` at `root/a`; `variant` makes the two states of one kind differ.
fn put(root: &Utf8Path, kind: Kind, variant: u8) {
    let a = root.join("a");
    match kind {
        Kind::File => write_file(&a, format!("file {variant}\n").as_bytes(), false),
        Kind::Exec => write_file(&a, format!("#!/bin/sh\necho {variant}\n").as_bytes(), true),
        Kind::Link => std::os::unix::fs::symlink(format!("target-{variant}"), &a).unwrap(),
        Kind::Dir if variant == 0 => {
            std::fs::create_dir_all(a.join("sub")).unwrap();
            write_file(&a.join("x"), b"x 0\n", false);
            write_file(&a.join("sub/y"), b"y 0\n", true);
            std::os::unix::fs::symlink("../x", a.join("sub/l")).unwrap();
        }
        Kind::Dir => {
            std::fs::create_dir_all(a.join("other/deep")).unwrap();
            write_file(&a.join("x"), b"x 1, longer\n", false);
            write_file(&a.join("other/deep/z"), b"z 1\n", false);
            std::os::unix::fs::symlink("x", a.join("l")).unwrap();
        }
        Kind::Absent => {}
    }
}

/// Removes whatever is at `root/a`.
fn clear(root: &Utf8Path) {
    let a = root.join("a");
    match a.symlink_metadata() {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(&a).unwrap(),
        Ok(_) => std::fs::remove_file(&a).unwrap(),
        Err(_) => {}
    }
}

/// Every path below `root` (directories included, links not followed).
fn listing(root: &Utf8Path) -> BTreeMap<Vec<u8>, Entry> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.as_std_path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec();
            let meta = p.symlink_metadata().unwrap();
            let entry = if meta.file_type().is_symlink() {
                Entry::Link(
                    std::fs::read_link(&p)
                        .unwrap()
                        .as_os_str()
                        .as_bytes()
                        .to_vec(),
                )
            } else if meta.is_dir() {
                stack.push(p.clone());
                Entry::Dir
            } else {
                Entry::File {
                    mode: meta.permissions().mode() & 0o7777,
                    bytes: std::fs::read(&p).unwrap(),
                }
            };
            out.insert(rel, entry);
        }
    }
    out
}

/// State A onboarded, the live tree changed to B without a snapshot, rolled back to A:
/// undo brings back exactly B, redo exactly A, and the store stays sound.
fn refusals(refused: &[fs_manager::Refusal]) -> Vec<String> {
    refused
        .iter()
        .map(|r| {
            format!(
                "{}: {}",
                String::from_utf8_lossy(r.path.as_bytes()),
                r.reason
            )
        })
        .collect()
}

fn undo_and_redo_restore(from: Kind, to: Kind) -> Result<(), String> {
    let env = Env::new();
    let root = env.path("w");
    std::fs::create_dir_all(&root).unwrap();
    write_file(&root.join("keep.txt"), b"unchanged\n", false);
    put(&root, from, 0);
    let first = env
        .worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .map_err(|e| format!("onboard: {e}"))?
        .snapshot;
    let state_a = listing(&root);
    clear(&root);
    put(&root, to, 1);
    let state_b = listing(&root);

    env.worktrees
        .rollback(
            &env.store,
            &root,
            first,
            &WorktreeRollbackOptions::default(),
        )
        .map_err(|e| format!("rollback: {e}"))?;
    if listing(&root) != state_a {
        return Err(format!("rollback left {:?}", listing(&root)));
    }
    let undone = env
        .worktrees
        .undo(&env.store, &root)
        .map_err(|e| format!("undo: {e}"))?;
    if !undone.refused.is_empty() {
        return Err(format!("undo refused: {:?}", refusals(&undone.refused)));
    }
    if listing(&root) != state_b {
        return Err(format!(
            "undo left {:?}, expected {state_b:?}",
            listing(&root)
        ));
    }
    let redone = env
        .worktrees
        .redo(&env.store, &root)
        .map_err(|e| format!("redo: {e}"))?;
    if !redone.refused.is_empty() {
        return Err(format!("redo refused: {:?}", refusals(&redone.refused)));
    }
    if listing(&root) != state_a {
        return Err(format!(
            "redo left {:?}, expected {state_a:?}",
            listing(&root)
        ));
    }
    // And back once more: undo after redo still holds.
    let again = env
        .worktrees
        .undo(&env.store, &root)
        .map_err(|e| format!("second undo: {e}"))?;
    if !again.refused.is_empty() || listing(&root) != state_b {
        return Err(format!(
            "second undo: refused {:?}, left {:?}",
            refusals(&again.refused),
            listing(&root)
        ));
    }
    let fsck = env
        .store
        .fsck(
            &cas::StoreFsckOptions::default(),
            &[&fs_manager::Registry::default()],
        )
        .map_err(|e| format!("fsck: {e}"))?;
    if !fsck.problems.is_empty() {
        return Err(format!("fsck: {:?}", fsck.problems));
    }
    Ok(())
}

#[test]
fn undo_and_redo_bring_back_every_change_of_kind_in_both_directions() {
    let mut failures = Vec::new();
    for from in KINDS {
        for to in KINDS {
            if from == Kind::Absent && to == Kind::Absent {
                continue;
            }
            if let Err(e) = undo_and_redo_restore(from, to) {
                failures.push(format!("{from:?} -> {to:?}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn undo_refuses_a_file_made_since_where_its_directory_goes_and_changes_nothing() {
    let env = Env::new();
    let root = env.path("w");
    std::fs::create_dir_all(&root).unwrap();
    write_file(&root.join("keep.txt"), b"unchanged\n", false);
    let first = env
        .worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap()
        .snapshot;
    put(&root, Kind::Dir, 0);
    env.worktrees
        .rollback(
            &env.store,
            &root,
            first,
            &WorktreeRollbackOptions::default(),
        )
        .unwrap();
    // Not left by the rollback: a new file where undo would recreate the directory.
    write_file(&root.join("a"), b"made after the rollback\n", false);
    let before = listing(&root);
    let out = env.worktrees.undo(&env.store, &root).unwrap();
    assert!(
        refusals(&out.refused)
            .iter()
            .any(|r| r.starts_with("a/") && r.contains("a file where a directory must be")),
        "{:?}",
        refusals(&out.refused)
    );
    assert_eq!(listing(&root), before);
}
