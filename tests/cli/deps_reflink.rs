//! A checkout's dependency layer cloned (reflinks) from the store's unpacked copy of it, on
//! real file systems in loop images: btrfs and XFS clone, ext4 and another device copy.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};

use crate::loop_fs::LoopFs;
use crate::reversible_commands::files;
use crate::support::{Env, deps_project, killed_after, noise, stderr};

const LOCK: (&str, &str) = ("package-lock.json", "{\"lockfileVersion\": 3}\n");

/// An [`Env`] whose store and worktrees are on a `kind` file system of their own.
struct On {
    env: Env,
    fs: LoopFs,
    _dir: tempfile::TempDir,
}

fn on(kind: &str) -> On {
    let dir = tempfile::tempdir().unwrap();
    let fs = LoopFs::new(&dir.path().join(kind), kind, 1 << 30)
        .unwrap_or_else(|e| panic!("a {kind} file system in a loop image is needed: {e}"));
    On {
        env: Env {
            dir: tempfile::tempdir_in(&fs.mount).unwrap(),
        },
        fs,
        _dir: dir,
    }
}

/// A project of `files` small files in `node_modules`, two big ones (a small file lives in
/// btrfs's metadata, so only a big one shows shared extents), a script holding the root
/// and a symlink, saved as a layer: its root, snapshot, key and the layer's file count.
fn saved_project(env: &Env, files: usize) -> (Utf8PathBuf, String, String, u64) {
    let (src, snap) = deps_project(env, "src", LOCK, ("node_modules", files));
    let deps = src.join("node_modules");
    std::fs::write(deps.join("pkg1/big.bin"), noise(1, 256 << 10)).unwrap();
    std::fs::write(deps.join("pkg2/big.wasm"), noise(2, 300 << 10)).unwrap();
    std::fs::write(deps.join(".bin/where"), format!("#!/bin/sh\ncd {deps}\n")).unwrap();
    std::os::unix::fs::symlink("../pkg1/big.bin", deps.join(".bin/big")).unwrap();
    let (code, saved) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(code, 0, "{saved}");
    let layer = &saved["layers"][0];
    assert_eq!(layer["relocated"], 1, "{saved}");
    let key = layer["key"].as_str().unwrap().to_owned();
    (src, snap, key, layer["files"].as_u64().unwrap())
}

/// `checkout SNAP DEST`: the worktree's root and the layer's entry in `deps`.
fn checkout(env: &Env, snap: &str, dest: &Utf8Path) -> (Utf8PathBuf, serde_json::Value) {
    let (code, out) = env.json(&["checkout", snap, dest.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["deps"].as_array().unwrap().len(), 1, "{out}");
    let root = Utf8PathBuf::from(out["worktree"].as_str().unwrap());
    (root, out["deps"][0].clone())
}

/// The store's unpacked copy of the layer `key`: its files.
fn copy_of(env: &Env, key: &str) -> Utf8PathBuf {
    env.store().join("deps").join(key).join("files")
}

/// The layer's files as a worktree at `root` must hold them: those of `src`, the root
/// written in the script.
fn expected(src: &Utf8Path, root: &Utf8Path) -> BTreeMap<String, (Vec<u8>, bool)> {
    let mut want = files(&src.join("node_modules"));
    let script = format!("#!/bin/sh\ncd {root}/node_modules\n").into_bytes();
    want.get_mut(".bin/where").unwrap().0 = script;
    want
}

/// Each extent of `path` as FIEMAP reports it (`filefrag -v`): its first physical block,
/// and whether it is shared.
fn extents(path: &Utf8Path) -> Vec<(u64, bool)> {
    let out = Command::new("filefrag")
        .arg("-v")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "filefrag {path}: {}", stderr(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| {
            l.trim_start()
                .split(':')
                .next()
                .unwrap()
                .parse::<u64>()
                .is_ok()
        })
        .map(|l| {
            let fields: Vec<&str> = l.split(':').collect();
            let physical = fields[2]
                .split("..")
                .next()
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            (physical, fields.last().unwrap().contains("shared"))
        })
        .collect()
}

fn mode(path: &Utf8Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_checkout_on_btrfs_or_xfs_clones_its_layer_and_a_write_reaches_no_other_copy() {
    for kind in ["btrfs", "xfs"] {
        let on = on(kind);
        let env = &on.env;
        let (src, snap, key, files_in_layer) = saved_project(env, 300);
        let (one, first) = checkout(env, &snap, &env.path().join("a/wt1"));
        let (two, second) = checkout(env, &snap, &env.path().join("b/wt2"));
        // Every regular file but the script holding the root (written for each worktree);
        // the symlink is made as a symlink.
        for out in [&first, &second] {
            assert_eq!(out["key"], key.as_str(), "{kind}: {out}");
            assert_eq!(out["files"], files_in_layer, "{kind}: {out}");
            assert_eq!(out["cloned"], files_in_layer - 2, "{kind}: {out}");
        }
        let human = env.cairn(&["checkout", &snap, env.path().join("c/wt3").as_str()]);
        assert!(human.status.success(), "{}", stderr(&human));
        let said = String::from_utf8(human.stdout).unwrap();
        assert!(
            said.contains(&format!(", {} cloned)\n", files_in_layer - 2)),
            "{kind}: {said}"
        );
        let copy = copy_of(env, &key);
        for root in [&one, &two] {
            assert!(
                files(&root.join("node_modules")) == expected(&src, root),
                "{kind}: {root}/node_modules differs from the layer"
            );
            assert_eq!(
                std::fs::read_link(root.join("node_modules/.bin/big")).unwrap(),
                Utf8Path::new("../pkg1/big.bin")
            );
            // Writable in the worktree, as a copy would be; read-only in the store.
            assert_eq!(mode(&root.join("node_modules/.bin/tool")), 0o755, "{kind}");
            assert_eq!(
                mode(&root.join("node_modules/pkg1/big.bin")),
                0o644,
                "{kind}"
            );
        }
        assert_eq!(mode(&copy.join(".bin/tool")), 0o555, "{kind}");
        assert_eq!(mode(&copy.join("pkg1/big.bin")), 0o444, "{kind}");

        // The blocks are the store copy's, shared: the same physical extents in all three.
        for file in ["pkg1/big.bin", "pkg2/big.wasm"] {
            let of_copy = extents(&copy.join(file));
            assert!(!of_copy.is_empty(), "{kind}: {file} has no extent");
            assert!(
                of_copy.iter().all(|(_, shared)| *shared),
                "{kind}: {of_copy:?}"
            );
            for root in [&one, &two] {
                assert_eq!(
                    extents(&root.join("node_modules").join(file)),
                    of_copy,
                    "{kind}: {root}'s {file} shares the copy's blocks"
                );
            }
        }

        // A write in one worktree's files reaches neither the other's nor the copy.
        let big = "node_modules/pkg1/big.bin";
        let before = std::fs::read(two.join(big)).unwrap();
        std::fs::write(one.join(big), b"written by an agent\n").unwrap();
        std::fs::write(one.join("node_modules/pkg0/f0.js"), b"changed\n").unwrap();
        assert_eq!(
            std::fs::read(one.join(big)).unwrap(),
            b"written by an agent\n"
        );
        assert_eq!(std::fs::read(two.join(big)).unwrap(), before, "{kind}");
        assert_eq!(
            std::fs::read(copy.join("pkg1/big.bin")).unwrap(),
            before,
            "{kind}"
        );
        assert!(
            files(&two.join("node_modules")) == expected(&src, &two),
            "{kind}: wt2 changed"
        );
        let out = env.cairn(&["fsck"]);
        assert!(out.status.success(), "{kind}: {}", stderr(&out));
    }
}

#[test]
fn on_ext4_or_another_device_the_layer_is_copied_and_nothing_unpacked() {
    // ext4 has no reflinks.
    let ext4 = on("ext4");
    let env = &ext4.env;
    let (src, snap, key, files_in_layer) = saved_project(env, 50);
    let (root, out) = checkout(env, &snap, &env.path().join("wt"));
    assert_eq!(out["files"], files_in_layer, "{out}");
    assert_eq!(out["cloned"], 0, "{out}");
    assert!(files(&root.join("node_modules")) == expected(&src, &root));
    assert!(!env.store().join("deps").join(&key).exists());

    // The store on btrfs, the worktree on the ext4 file system: another device.
    let btrfs = on("btrfs");
    let (src, snap, key, _) = saved_project(&btrfs.env, 50);
    let elsewhere = Utf8PathBuf::from_path_buf(ext4.fs.mount.join("elsewhere")).unwrap();
    let (root, out) = checkout(&btrfs.env, &snap, &elsewhere);
    assert_eq!(out["cloned"], 0, "{out}");
    assert!(files(&root.join("node_modules")) == expected(&src, &root));
    assert!(!btrfs.env.store().join("deps").join(&key).exists());
}

#[test]
fn a_store_copy_changed_since_it_was_unpacked_is_never_cloned_from() {
    let on = on("btrfs");
    let env = &on.env;
    let (src, snap, key, files_in_layer) = saved_project(env, 20);
    let (_, first) = checkout(env, &snap, &env.path().join("wt1"));
    assert_eq!(first["cloned"], files_in_layer - 2, "{first}");

    // Changed in the store's copy, same size: fsck names it, and the next checkout copies
    // that file from the layer, then drops the copy.
    let copy = copy_of(env, &key);
    let tampered = copy.join("pkg1/big.bin");
    let len = std::fs::metadata(&tampered).unwrap().len() as usize;
    std::fs::set_permissions(
        &tampered,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    std::fs::write(&tampered, noise(99, len)).unwrap();
    std::fs::set_permissions(
        &tampered,
        std::os::unix::fs::PermissionsExt::from_mode(0o444),
    )
    .unwrap();
    let (code, fsck) = env.json(&["fsck"]);
    assert_ne!(code, 0, "{fsck}");
    assert_eq!(
        fsck["problems"][0]["kind"], "dependency layer copy",
        "{fsck}"
    );
    assert_eq!(fsck["problems"][0]["name"], key.as_str(), "{fsck}");
    assert!(
        fsck["problems"][0]["message"]
            .as_str()
            .unwrap()
            .contains("pkg1/big.bin"),
        "{fsck}"
    );
    let (two, second) = checkout(env, &snap, &env.path().join("wt2"));
    assert_eq!(second["cloned"], files_in_layer - 3, "{second}");
    assert!(files(&two.join("node_modules")) == expected(&src, &two));
    assert!(!copy.exists(), "the changed copy is dropped");

    // The next checkout unpacks it again and clones every file.
    let (three, third) = checkout(env, &snap, &env.path().join("wt3"));
    assert_eq!(third["cloned"], files_in_layer - 2, "{third}");
    assert!(files(&three.join("node_modules")) == expected(&src, &three));
    let out = env.cairn(&["fsck"]);
    assert!(out.status.success(), "{}", stderr(&out));

    // gc keeps the copy of a layer in use and drops one with its layer; deps rm takes the
    // copy with the record; worktrees keep their files.
    for wt in ["wt1", "wt2", "wt3"] {
        let (code, out) = env.json(&["gc", "--keep-within", "0"]);
        assert_eq!(code, 0, "{out}");
        assert!(copy.exists(), "a layer in use keeps its copy");
        let (code, out) = env.json(&["worktree", "remove", env.path().join(wt).as_str()]);
        assert_eq!(code, 0, "{out}");
    }
    let (code, out) = env.json(&["gc", "--keep-within", "0"]);
    assert_eq!(code, 0, "{out}");
    let (_, list) = env.json(&["deps", "list"]);
    assert_eq!(list["layers"], serde_json::json!([]), "{out}");
    assert!(!copy.exists(), "a dropped layer's copy is removed: {out}");

    let (code, saved) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(code, 0, "{saved}");
    assert_eq!(saved["layers"][0]["key"], key.as_str(), "{saved}");
    let (four, out) = checkout(env, &snap, &env.path().join("wt4"));
    assert_eq!(out["cloned"], files_in_layer - 2, "{out}");
    assert!(copy.exists());
    assert!(env.cairn(&["deps", "rm", &key]).status.success());
    assert!(!copy.exists());
    assert!(files(&four.join("node_modules")) == expected(&src, &four));
}

#[test]
fn sigkill_during_a_first_cloning_attach_never_leaves_a_half_copy_that_is_used_later() {
    let on = on("btrfs");
    let env = &on.env;
    let (src, snap) = deps_project(env, "src", LOCK, ("node_modules", 6000));
    let (code, saved) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(code, 0, "{saved}");
    let key = saved["layers"][0]["key"].as_str().unwrap().to_owned();
    let whole = files(&src.join("node_modules"));
    let deps = env.store().join("deps");
    let unpacking = || {
        std::fs::read_dir(&deps).map_or(0, |entries| {
            entries
                .filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    name.to_string_lossy()
                        .starts_with(&format!(".unpack-{key}-"))
                })
                .count()
        })
    };
    let (mut mid_unpack, mut unpacked) = (0, 0);
    // From before the checkout opens the store to after its attach ends.
    for (i, delay_ms) in [100, 250, 400, 550, 700, 850, 1000, 1300, 1700, 8000]
        .into_iter()
        .enumerate()
    {
        let left_before = unpacking();
        let wt = env.path().join(format!("wt{i}"));
        killed_after(
            env,
            &["checkout", &snap, wt.as_str()],
            Duration::from_millis(delay_ms),
        );
        if unpacking() > left_before {
            mid_unpack += 1;
        }
        let copy = copy_of(env, &key);
        if copy.exists() {
            assert!(
                files(&copy) == whole,
                "a kill at {delay_ms} ms left a half copy at {copy}"
            );
            unpacked += 1;
            // Whole: removed, so the next kill lands in an unpack again.
            std::fs::remove_dir_all(copy.parent().unwrap()).unwrap();
        }
    }
    assert!(
        mid_unpack > 0 && unpacked > 0,
        "{mid_unpack} kills landed while the copy was unpacked, {unpacked} after"
    );
    // What the kills left is never read: the next checkout unpacks anew and clones all.
    let (root, out) = checkout(env, &snap, &env.path().join("last"));
    assert_eq!(out["cloned"], out["files"], "{out}");
    assert!(files(&root.join("node_modules")) == whole);
    assert!(files(&copy_of(env, &key)) == whole);
    let out = env.cairn(&["gc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(unpacking(), 0, "gc removes what the kills left");
    assert!(
        copy_of(env, &key).exists(),
        "gc keeps the copy of a layer in use"
    );
    let out = env.cairn(&["fsck"]);
    assert!(out.status.success(), "{}", stderr(&out));
}
