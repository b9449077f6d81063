//! `cairn mount` with dependency layers: a layer saved by `cairn deps save` from a
//! hand-made folder shows in every mount of a snapshot whose lockfile names it, copy-on-write
//! (a write in one mount is invisible in another), written for each mount's root; never in
//! a snapshot or a status; kept when the mount is attached again (after an unmount or a
//! killed server); left out with `--no-deps`, and for a lockfile that changed.

use camino::Utf8Path;

use crate::mount_commands::{Mounts, is_mounted, kill_mount_server, wait_unmounted};
use crate::support::{Env, stderr};

const LOCK: &str = "{\"lockfileVersion\": 3, \"packages\": {}}\n";

/// A project with a lockfile (and no `.gitignore`: the layer stays out all the same), onboarded
/// before its `node_modules` is made, then that saved as a layer; the snapshot's id and the
/// layer's key.
fn project_with_layer(env: &Env) -> (String, String) {
    let proj = env.path().join("proj");
    std::fs::create_dir_all(proj.join("src")).unwrap();
    std::fs::write(proj.join("package-lock.json"), LOCK).unwrap();
    std::fs::write(proj.join("src/index.js"), "require('pkg');\n").unwrap();
    let (code, out) = env.json(&["onboard", proj.as_str()]);
    assert_eq!(code, 0, "{out}");
    let snap = out["snapshot"].as_str().unwrap().to_owned();
    let nm = proj.join("node_modules");
    std::fs::create_dir_all(nm.join("pkg")).unwrap();
    std::fs::create_dir_all(nm.join(".bin")).unwrap();
    std::fs::write(nm.join("pkg/index.js"), "module.exports = 1;\n").unwrap();
    // Names the worktree's root: relocated, it names each mount's own.
    std::fs::write(nm.join("pkg/where.txt"), format!("{nm}/pkg\n")).unwrap();
    std::os::unix::fs::symlink("../pkg/index.js", nm.join(".bin/pkg")).unwrap();
    let (code, out) = env.json(&["deps", "save", proj.as_str()]);
    assert_eq!(code, 0, "{out}");
    let layers = out["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{out}");
    assert_eq!(layers[0]["path"], "node_modules", "{out}");
    (snap, layers[0]["key"].as_str().unwrap().to_owned())
}

fn mount_json(env: &Env, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["mount"];
    all.extend_from_slice(args);
    let (code, out) = env.json(&all);
    assert_eq!(code, 0, "{out}");
    out
}

/// The paths of the tree of `snap` (its listing by `show`, recursively).
fn paths_of(env: &Env, snap: &str) -> Vec<String> {
    let out = env.cairn(&["--json", "show", snap]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut names: Vec<String> = shown["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("{shown}"))
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

fn read(path: &Utf8Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn status_is_clean(env: &Env, dir: &Utf8Path) {
    let (code, status) = env.json(&["status", dir.as_str()]);
    assert_eq!(code, 0, "{status}");
    let text = status.to_string();
    assert!(!text.contains("node_modules"), "{status}");
}

#[test]
fn a_layer_shows_in_two_mounts_copy_on_write_and_is_never_captured() {
    let env = Env::new();
    let (snap, key) = project_with_layer(&env);
    let (a, b) = (env.path().join("a"), env.path().join("b"));
    let _guard = Mounts {
        env: &env,
        dirs: vec![a.clone(), b.clone()],
    };
    for m in [&a, &b] {
        let out = mount_json(&env, &[&snap, m.as_str()]);
        let deps = out["deps"].as_array().unwrap_or_else(|| panic!("{out}"));
        assert_eq!(deps.len(), 1, "{out}");
        assert_eq!(deps[0]["path"], "node_modules", "{out}");
        assert_eq!(deps[0]["key"], key.as_str(), "{out}");
        assert_eq!(deps[0]["files"], 3, "{out}");
        assert_eq!(
            read(&m.join("node_modules/pkg/index.js")),
            "module.exports = 1;\n"
        );
        assert_eq!(
            read(&m.join("node_modules/pkg/where.txt")),
            format!("{m}/node_modules/pkg\n"),
            "written for the mount's own root"
        );
        assert_eq!(
            std::fs::read_link(m.join("node_modules/.bin/pkg")).unwrap(),
            std::path::Path::new("../pkg/index.js")
        );
    }

    // A write, a new file and a removal in a: none of it in b.
    std::fs::write(a.join("node_modules/pkg/index.js"), "changed\n").unwrap();
    std::fs::write(a.join("node_modules/new.js"), "new\n").unwrap();
    std::fs::remove_file(a.join("node_modules/.bin/pkg")).unwrap();
    assert_eq!(read(&a.join("node_modules/pkg/index.js")), "changed\n");
    assert_eq!(
        read(&b.join("node_modules/pkg/index.js")),
        "module.exports = 1;\n"
    );
    assert!(!b.join("node_modules/new.js").exists());
    assert!(b.join("node_modules/.bin/pkg").exists());

    // Neither status nor a snapshot holds the layer, changed or not.
    for m in [&a, &b] {
        status_is_clean(&env, m);
        let (code, out) = env.json(&["snapshot", m.as_str(), "-m", "with deps"]);
        assert_eq!(code, 0, "{out}");
        let taken = out["snapshot"].as_str().unwrap();
        assert_eq!(paths_of(&env, taken), ["package-lock.json", "src"], "{out}");
    }
    std::fs::write(a.join("src/more.js"), "more\n").unwrap();
    let (code, out) = env.json(&["snapshot", a.as_str(), "-m", "more"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        paths_of(&env, out["snapshot"].as_str().unwrap()),
        ["package-lock.json", "src"]
    );

    // Attached again after an unmount, then after a killed server: the layer is there, with
    // what a wrote under it.
    let out = env.cairn(&["unmount", a.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!is_mounted(&a));
    for round in 0..2 {
        let out = mount_json(&env, &[a.as_str()]);
        assert_eq!(out["deps"][0]["key"], key.as_str(), "{round}: {out}");
        assert_eq!(
            read(&a.join("node_modules/pkg/index.js")),
            "changed\n",
            "{round}"
        );
        assert_eq!(read(&a.join("node_modules/new.js")), "new\n", "{round}");
        assert!(!a.join("node_modules/.bin/pkg").exists(), "{round}");
        assert_eq!(
            read(&a.join("node_modules/pkg/where.txt")),
            format!("{a}/node_modules/pkg\n")
        );
        status_is_clean(&env, &a);
        if round == 0 {
            kill_mount_server(&env);
            wait_unmounted(&a);
        }
    }
    // b's server was killed too: attached again, it still has the layer, unchanged.
    let out = mount_json(&env, &[b.as_str()]);
    assert_eq!(out["deps"][0]["key"], key.as_str(), "{out}");
    assert_eq!(
        read(&b.join("node_modules/pkg/index.js")),
        "module.exports = 1;\n"
    );

    // A rollback leaves the layer alone (it is out of the worktree's scope).
    let out = env.cairn(&["rollback", a.as_str(), &snap]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!a.join("src/more.js").exists());
    assert_eq!(read(&a.join("node_modules/new.js")), "new\n");
}

#[test]
fn no_deps_and_a_changed_lockfile_mount_without_the_layer() {
    let env = Env::new();
    let (snap, _) = project_with_layer(&env);
    let proj = env.path().join("proj");
    let [with, plain, changed] = ["with", "plain", "changed"].map(|d| env.path().join(d));
    let _guard = Mounts {
        env: &env,
        dirs: vec![with.clone(), plain.clone(), changed.clone()],
    };
    let layers = |out: &serde_json::Value| out["deps"].as_array().map_or(0, Vec::len);
    let out = env.cairn(&["mount", &snap, with.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = crate::support::stdout(&out);
    assert!(said.contains("dependency layer"), "{said}");
    assert!(said.contains(" at node_modules (3 files)"), "{said}");
    assert!(with.join("node_modules/pkg/index.js").exists());
    let out = mount_json(&env, &[&snap, plain.as_str(), "--no-deps"]);
    assert_eq!(layers(&out), 0, "{out}");
    assert!(!plain.join("node_modules").exists());

    // Another lockfile, another key: no layer is stored under it.
    std::fs::remove_dir_all(proj.join("node_modules")).unwrap();
    std::fs::write(
        proj.join("package-lock.json"),
        "{\"lockfileVersion\": 3, \"packages\": {\"x\": {}}}\n",
    )
    .unwrap();
    let (code, out) = env.json(&["snapshot", proj.as_str(), "-m", "new lock"]);
    assert_eq!(code, 0, "{out}");
    let new = out["snapshot"].as_str().unwrap().to_owned();
    let out = mount_json(&env, &[&new, changed.as_str()]);
    assert_eq!(layers(&out), 0, "{out}");
    assert!(!changed.join("node_modules").exists());
    assert!(read(&changed.join("package-lock.json")).contains("\"x\""));

    // Attached again, the mount made without layers is still without (its record has none).
    let out = env.cairn(&["unmount", plain.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = mount_json(&env, &[plain.as_str()]);
    assert_eq!(layers(&out), 0, "{out}");
    assert!(!plain.join("node_modules").exists());
}

/// A snapshot only a remote holds, with a `.cairn-deps`: the mount reads that file (its
/// blob fetched from the remote, as the mount would when it is read) to find the layers,
/// and is made.
#[test]
fn a_remote_only_mount_of_a_snapshot_with_pairs_of_its_own_is_made() {
    use crate::remote_commands::{Machine, RemoteTarget};
    let env = Env::new();
    let target = RemoteTarget {
        url: format!("file://{}", env.path().join("remote")),
        endpoint: None,
        env: Vec::new(),
        conditional: true,
    };
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    let b = Machine::new(env.path(), "b", Vec::new(), &target);
    let proj = a.dir.join("proj");
    std::fs::create_dir_all(proj.join("tools")).unwrap();
    std::fs::write(proj.join(".cairn-deps"), "tools/deps.lock tools/deps\n").unwrap();
    std::fs::write(proj.join("tools/deps.lock"), "pinned\n").unwrap();
    let snap = a.ok(&["onboard", proj.as_str()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    a.add_remote(&target);
    a.ok(&["push", &snap]);
    b.add_remote(&target);
    let m = env.path().join("m");
    let _guard = Mounts {
        env: &env,
        dirs: vec![m.clone()],
    };
    let (code, out) = b.json(&["mount", &snap, m.as_str()]);
    let _ = b.run(&["unmount", m.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["deps"].as_array().map_or(1, Vec::len), 0, "{out}");
}
