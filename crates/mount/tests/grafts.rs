//! Grafts: a stored tree shown read-only at a path under a mount (a dependency layer),
//! read from the store, written to the mount's own layer only, never captured, and shown
//! again when the layer is attached again. Trees made by hand from plain directories.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use camino::{Utf8Path, Utf8PathBuf};
use fs_manager::MountedTree;

struct Setup {
    _tmp: tempfile::TempDir,
    dir: Utf8PathBuf,
    store: Arc<cas::Store>,
    /// The snapshot: `README`, `src/main.js`, `sub/lock`, `vendor/own.txt`.
    base: cas::TreeId,
    /// The layer: `pkg/index.js`, `pkg/lib/a.js`, `.bin/tool` (executable).
    layer: cas::TreeId,
}

fn write(root: &Utf8Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Utf8Path::from_path(tmp.path()).unwrap().to_owned();
    let store = Arc::new(
        cas::Store::open(
            &dir.join("store"),
            &cas::OpenOptions {
                create: true,
                ..cas::OpenOptions::default()
            },
        )
        .unwrap(),
    );
    let ws = fs_manager::Worktrees::new();
    let tree_of = |name: &str, files: &[(&str, &str)]| {
        let root = dir.join(name);
        write(&root, files);
        if name == "layer" {
            std::fs::set_permissions(
                root.join(".bin/tool"),
                std::fs::Permissions::from_mode(0o755),
            )
            .unwrap();
        }
        ws.onboard(
            &store,
            &root,
            &fs_manager::WorktreeOnboardOptions::default(),
        )
        .unwrap()
        .tree
    };
    let base = tree_of(
        "plain",
        &[
            ("README", "read me\n"),
            ("src/main.js", "main\n"),
            ("sub/lock", "lock\n"),
            ("vendor/own.txt", "the snapshot's own\n"),
        ],
    );
    let layer = tree_of(
        "layer",
        &[
            ("pkg/index.js", "module.exports = 1;\n"),
            ("pkg/lib/a.js", "a\n"),
            (".bin/tool", "#!/bin/sh\necho tool\n"),
        ],
    );
    Setup {
        _tmp: tmp,
        dir,
        store,
        base,
        layer,
    }
}

fn graft(path: &str, tree: cas::TreeId) -> mount::Graft {
    mount::Graft {
        path: path.into(),
        tree,
    }
}

/// Mounts the snapshot at `DIR/NAME` with its layer in `DIR/NAME.layer`.
fn start(s: &Setup, name: &str, grafts: Vec<mount::Graft>) -> mount::Mounted {
    let root = s.dir.join(name);
    std::fs::create_dir_all(&root).unwrap();
    let store = s.store.clone();
    let readers: mount::Readers = Arc::new(move || store.reader());
    mount::Mounted::start(
        mount::FuseMountOptions {
            root,
            layer: s.dir.join(format!("{name}.layer")),
            base: Some(s.base),
            base_time: std::time::SystemTime::now(),
            read_only: false,
            lazy: None,
            grafts,
        },
        readers,
    )
    .expect("FUSE must be available for the mount tests (/dev/fuse, root or fusermount3)")
}

/// Every path a tree holds, read from `made` (a capture's new trees) or the store.
fn flat(
    store: &cas::Store,
    made: &std::collections::HashMap<cas::TreeId, cas::Tree>,
    tree: cas::TreeId,
) -> Vec<String> {
    let reader = store.reader().unwrap();
    let mut out = Vec::new();
    let mut stack = vec![(String::new(), tree)];
    while let Some((dir, t)) = stack.pop() {
        let tree = match made.get(&t) {
            Some(tree) => tree.clone(),
            None => reader.tree(t).unwrap(),
        };
        for e in tree.entries() {
            let p = format!("{dir}{}", String::from_utf8_lossy(&e.name));
            if let Some(sub) = e.tree() {
                stack.push((format!("{p}/"), sub));
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The mount's tree as a snapshot stores it (stored, and settled: the next capture builds
/// on it), or as a status sees it (`dry_run`: nothing stored).
fn capture(s: &Setup, mounted: &mount::Mounted, dry_run: bool) -> Vec<String> {
    let record = fs_manager::WorktreeRecord::new(
        mounted.root().to_owned(),
        fs_manager::WorktreeKind::Mounted,
    );
    let settings = fs_manager::ScopeSettings::load(&s.store, &record).unwrap();
    let mut batch = cas::WriteBatch::new();
    let got = mounted
        .capture(&s.store, &mut batch, &settings, dry_run)
        .unwrap();
    assert!(got.skipped.is_empty(), "skipped {:?}", got.skipped);
    if !dry_run {
        for t in got.trees.values() {
            batch.add_tree(t.clone());
        }
        s.store.write(&batch).unwrap();
        mounted.settle(got.token);
    }
    flat(&s.store, &got.trees, got.tree)
}

fn read(path: impl AsRef<std::path::Path>) -> String {
    let path = path.as_ref();
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The snapshot's paths, and `extra`.
fn base_paths(extra: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = [
        "README",
        "src",
        "src/main.js",
        "sub",
        "sub/lock",
        "vendor",
        "vendor/own.txt",
    ]
    .iter()
    .chain(extra)
    .map(|p| p.to_string())
    .collect();
    out.sort();
    out
}

#[test]
fn two_mounts_of_one_graft_read_it_and_neither_sees_the_others_writes() {
    let s = setup();
    let a = start(&s, "a", vec![graft("node_modules", s.layer)]);
    let b = start(&s, "b", vec![graft("node_modules", s.layer)]);
    let (ra, rb) = (a.root().to_owned(), b.root().to_owned());
    for root in [&ra, &rb] {
        assert_eq!(
            read(root.join("node_modules/pkg/index.js")),
            "module.exports = 1;\n"
        );
        let tool = std::fs::metadata(root.join("node_modules/.bin/tool")).unwrap();
        assert_eq!(tool.permissions().mode() & 0o777, 0o755);
        assert_eq!(read(root.join("README")), "read me\n");
    }

    // Every kind of change under the graft, in a only.
    let nm = ra.join("node_modules");
    std::fs::write(nm.join("pkg/index.js"), "changed\n").unwrap();
    std::fs::write(nm.join("new.txt"), "new\n").unwrap();
    std::fs::rename(nm.join("pkg/lib/a.js"), nm.join("pkg/lib/b.js")).unwrap();
    std::fs::remove_file(nm.join(".bin/tool")).unwrap();
    std::fs::set_permissions(nm.join("pkg"), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::create_dir(nm.join("made")).unwrap();

    assert_eq!(read(nm.join("pkg/index.js")), "changed\n");
    assert_eq!(read(nm.join("pkg/lib/b.js")), "a\n");
    let nb = rb.join("node_modules");
    assert_eq!(read(nb.join("pkg/index.js")), "module.exports = 1;\n");
    assert_eq!(read(nb.join("pkg/lib/a.js")), "a\n");
    assert!(!nb.join("pkg/lib/b.js").exists());
    assert!(!nb.join("new.txt").exists());
    assert!(!nb.join("made").exists());
    assert_eq!(read(nb.join(".bin/tool")), "#!/bin/sh\necho tool\n");
    let mode = std::fs::metadata(nb.join("pkg"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);

    // Neither a status nor a snapshot holds the graft, changed or not.
    assert_eq!(capture(&s, &a, true), base_paths(&[]));
    assert_eq!(capture(&s, &b, false), base_paths(&[]));
    std::fs::write(ra.join("mine.txt"), "mine\n").unwrap();
    assert_eq!(capture(&s, &a, true), base_paths(&["mine.txt"]));
    assert_eq!(capture(&s, &a, false), base_paths(&["mine.txt"]));
    // A write under the graft after a settled capture is still not taken.
    std::fs::write(nm.join("later.txt"), "later\n").unwrap();
    assert_eq!(capture(&s, &a, false), base_paths(&["mine.txt"]));
    a.unmount(false).unwrap();
    b.unmount(false).unwrap();
}

#[test]
fn writes_under_a_graft_survive_attaching_again_and_a_moved_graft_is_never_captured() {
    let s = setup();
    let grafts = || vec![graft("node_modules", s.layer), graft("sub/.venv", s.layer)];
    let m = start(&s, "m", grafts());
    let root = m.root().to_owned();
    std::fs::write(root.join("node_modules/pkg/index.js"), "changed\n").unwrap();
    std::fs::write(root.join("node_modules/new.txt"), "new\n").unwrap();
    std::fs::remove_file(root.join("node_modules/pkg/lib/a.js")).unwrap();
    assert_eq!(read(root.join("sub/.venv/pkg/lib/a.js")), "a\n");
    std::fs::rename(root.join("sub/.venv"), root.join("moved")).unwrap();
    assert_eq!(
        read(root.join("moved/pkg/index.js")),
        "module.exports = 1;\n"
    );
    assert_eq!(capture(&s, &m, false), base_paths(&[]));
    m.unmount(false).unwrap();
    drop(m);

    // Attached again twice: the first replays the journal and writes it again as its
    // difference from the base, the second replays that.
    for round in 0..2 {
        let m = start(&s, "m", grafts());
        let root = m.root().to_owned();
        assert_eq!(
            read(root.join("node_modules/pkg/index.js")),
            "changed\n",
            "{round}"
        );
        assert_eq!(read(root.join("node_modules/new.txt")), "new\n", "{round}");
        assert!(!root.join("node_modules/pkg/lib/a.js").exists(), "{round}");
        assert_eq!(
            read(root.join("node_modules/.bin/tool")),
            "#!/bin/sh\necho tool\n"
        );
        assert_eq!(read(root.join("moved/pkg/lib/a.js")), "a\n", "{round}");
        assert!(!root.join("sub/.venv").exists(), "{round}");
        assert_eq!(capture(&s, &m, true), base_paths(&[]), "{round}");
        assert_eq!(capture(&s, &m, false), base_paths(&[]), "{round}");
        m.unmount(false).unwrap();
    }
}

/// The journal written again on attach holds a record of a stored blob (or tree) moved into
/// a directory no other record reads first (here the root); attached once more, the tree
/// read must still show it.
#[test]
fn a_file_moved_into_the_root_survives_attaching_twice() {
    let s = setup();
    let m = start(&s, "m", Vec::new());
    let root = m.root().to_owned();
    std::fs::rename(root.join("sub/lock"), root.join("lock2")).unwrap();
    m.unmount(false).unwrap();
    drop(m);
    for round in 0..2 {
        let m = start(&s, "m", Vec::new());
        let root = m.root().to_owned();
        assert_eq!(read(root.join("lock2")), "lock\n", "{round}");
        assert!(!root.join("sub/lock").exists(), "{round}");
        m.unmount(false).unwrap();
    }
}

#[test]
fn the_snapshot_wins_over_a_graft_at_a_path_it_holds() {
    let s = setup();
    let m = start(
        &s,
        "m",
        vec![
            graft("vendor", s.layer),
            graft("README/node_modules", s.layer),
        ],
    );
    let root = m.root().to_owned();
    let mut names: Vec<_> = std::fs::read_dir(root.join("vendor"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["own.txt"]);
    // Under a file: not shown.
    assert_eq!(read(root.join("README")), "read me\n");
    assert_eq!(capture(&s, &m, true), base_paths(&[]));
    m.unmount(false).unwrap();
}

/// A graft deeper than the snapshot's directories (`vendor/bundle` where the snapshot has
/// no `vendor`): the directories above it are shown, and taken only once something of the
/// worktree's own is written in them.
#[test]
fn a_graft_below_directories_the_snapshot_lacks_is_shown_and_they_are_not_captured_empty() {
    let s = setup();
    let grafts = || vec![graft("deep/er/bundle", s.layer)];
    let m = start(&s, "m", grafts());
    let root = m.root().to_owned();
    assert_eq!(
        read(root.join("deep/er/bundle/pkg/index.js")),
        "module.exports = 1;\n"
    );
    assert_eq!(capture(&s, &m, true), base_paths(&[]));
    std::fs::write(root.join("deep/er/bundle/pkg/index.js"), "changed\n").unwrap();
    std::fs::write(root.join("deep/mine.txt"), "mine\n").unwrap();
    assert_eq!(
        capture(&s, &m, false),
        base_paths(&["deep", "deep/mine.txt"])
    );
    m.unmount(false).unwrap();
    drop(m);
    for round in 0..2 {
        let m = start(&s, "m", grafts());
        let root = m.root().to_owned();
        assert_eq!(
            read(root.join("deep/er/bundle/pkg/index.js")),
            "changed\n",
            "{round}"
        );
        assert_eq!(read(root.join("deep/mine.txt")), "mine\n", "{round}");
        assert_eq!(
            read(root.join("deep/er/bundle/pkg/lib/a.js")),
            "a\n",
            "{round}"
        );
        assert_eq!(
            capture(&s, &m, true),
            base_paths(&["deep", "deep/mine.txt"]),
            "{round}"
        );
        if round == 1 {
            std::fs::remove_dir_all(root.join("deep/er")).unwrap();
        }
        m.unmount(false).unwrap();
    }
    // Removed, it stays removed when attached again (twice: the compacted journal too).
    for round in 0..2 {
        let m = start(&s, "m", grafts());
        let root = m.root().to_owned();
        assert!(!root.join("deep/er").exists(), "{round}");
        assert_eq!(read(root.join("deep/mine.txt")), "mine\n", "{round}");
        m.unmount(false).unwrap();
    }
}

#[test]
fn a_graft_path_that_is_not_plain_names_is_refused_naming_it() {
    let s = setup();
    for bad in ["../out", "/abs", "", "a/../b"] {
        let root = s.dir.join("bad");
        std::fs::create_dir_all(&root).unwrap();
        let store = s.store.clone();
        let readers: mount::Readers = Arc::new(move || store.reader());
        let err = mount::Mounted::start(
            mount::FuseMountOptions {
                root,
                layer: s.dir.join("bad.layer"),
                base: Some(s.base),
                base_time: std::time::SystemTime::now(),
                read_only: false,
                lazy: None,
                grafts: vec![graft(bad, s.layer)],
            },
            readers,
        )
        .expect_err(bad);
        let shown = err.to_string();
        assert!(shown.contains(&format!("graft {bad}:")), "{shown}");
    }
}
