//! `deps save|list|rm` and the dependency layers `checkout` attaches, with hand-made
//! dependency folders (the real installers' tests are in their own module).

use std::collections::BTreeMap;
use std::time::Duration;

use camino::Utf8Path;

use crate::reversible_commands::files;
use crate::support::{Env, deps_project, fill_deps, killed_after, stderr};

const LOCK: (&str, &str) = ("package-lock.json", "{\"lockfileVersion\": 3}\n");

fn under(root: &Utf8Path, dir: &str) -> BTreeMap<String, (Vec<u8>, bool)> {
    files(&root.join(dir))
}

fn paths(v: &serde_json::Value, list: &str) -> Vec<String> {
    v[list]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|c| c["path"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_saved_layer_is_attached_to_a_checkout_once_and_never_captured() {
    let env = Env::new();
    let (src, snap) = deps_project(&env, "src", LOCK, ("node_modules", 300));
    let (code, saved) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(code, 0, "{saved}");
    let layer = &saved["layers"][0];
    assert_eq!(saved["layers"].as_array().unwrap().len(), 1, "{saved}");
    assert_eq!(layer["path"], "node_modules");
    assert_eq!(layer["new"], true);
    // 300 files, the package's own .gitignore and .bin/tool: no scope rule drops any.
    assert_eq!(layer["files"], 302, "{saved}");
    assert_eq!(layer["lockfiles"][0]["path"], "package-lock.json");
    let key = layer["key"].as_str().unwrap().to_owned();

    let (code, again) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["layers"][0]["key"], key.as_str());
    assert_eq!(
        again["layers"][0]["new"], false,
        "a key stored is not stored again"
    );

    let wt = env.path().join("elsewhere/wt");
    let (code, out) = env.json(&["checkout", &snap, wt.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["deps"][0]["key"], key.as_str(), "{out}");
    assert_eq!(out["deps"][0]["path"], "node_modules");
    assert_eq!(out["deps"][0]["files"], 302);
    assert_eq!(under(&wt, "node_modules"), under(&src, "node_modules"));

    let (code, list) = env.json(&["deps", "list"]);
    assert_eq!(code, 0, "{list}");
    let used_by: Vec<&str> = (list["layers"][0]["used_by"].as_array().unwrap().iter())
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(used_by, [wt.as_str()]);

    // Even with the .gitignore no longer ignoring it, the layer is out of scope: status
    // and the next snapshot see the .gitignore change only.
    std::fs::write(wt.join(".gitignore"), "# nothing ignored\n").unwrap();
    std::fs::write(wt.join("node_modules/pkg1/new.js"), "written by an agent\n").unwrap();
    let (code, status) = env.json(&["status", wt.as_str()]);
    assert_eq!(code, 0, "{status}");
    assert_eq!(paths(&status, "modified"), [".gitignore"], "{status}");
    assert!(paths(&status, "added").is_empty(), "{status}");
    let (code, next) = env.json(&["snapshot", wt.as_str()]);
    assert_eq!(code, 0, "{next}");
    let (code, diff) = env.json(&["diff", &snap, next["snapshot"].as_str().unwrap()]);
    assert_eq!(code, 0, "{diff}");
    assert_eq!(paths(&diff, "modified"), [".gitignore"], "{diff}");
    assert!(paths(&diff, "added").is_empty(), "{diff}");
    // A write in one worktree's layer reaches neither the store's layer nor the source.
    assert!(!src.join("node_modules/pkg1/new.js").exists());

    // --no-deps leaves it out.
    let bare = env.path().join("bare");
    let (code, out) = env.json(&["checkout", "--no-deps", &snap, bare.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["deps"], serde_json::json!([]));
    assert!(!bare.join("node_modules").exists());
}

#[test]
fn a_changed_lockfile_gets_no_layer_and_a_snapshot_holding_the_folder_keeps_its_own() {
    let env = Env::new();
    let (src, _) = deps_project(&env, "src", LOCK, ("node_modules", 20));
    let (code, saved) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(code, 0, "{saved}");
    std::fs::write(src.join("package-lock.json"), "{\"changed\": true}\n").unwrap();
    let (code, changed) = env.json(&["snapshot", src.as_str()]);
    assert_eq!(code, 0, "{changed}");
    let wt = env.path().join("wt");
    let (code, out) = env.json(&[
        "checkout",
        changed["snapshot"].as_str().unwrap(),
        wt.as_str(),
    ]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["deps"], serde_json::json!([]));
    assert!(!wt.join("node_modules").exists());

    // A project whose snapshot holds node_modules itself (not ignored) gets no layer.
    let own = env.path().join("own");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(own.join(LOCK.0), LOCK.1).unwrap();
    fill_deps(&own, "node_modules", 5);
    std::fs::write(own.join("node_modules/pkg0/.gitignore"), "").unwrap();
    let (code, onboarded) = env.json(&["onboard", own.as_str()]);
    assert_eq!(code, 0, "{onboarded}");
    let wt = env.path().join("wt2");
    let (code, out) = env.json(&[
        "checkout",
        onboarded["snapshot"].as_str().unwrap(),
        wt.as_str(),
    ]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["deps"], serde_json::json!([]), "{out}");
    assert_eq!(under(&wt, "node_modules"), under(&own, "node_modules"));
}

#[test]
fn the_root_in_a_text_file_is_written_for_each_worktree_and_in_a_binary_one_roots_the_layer() {
    let env = Env::new();
    let (src, snap) = deps_project(&env, "src", ("uv.lock", "version = 1\n"), (".venv", 10));
    let script = format!("#!{src}/.venv/bin/python\nhome = {src}/.venv\nnot {src}x\n");
    std::fs::create_dir_all(src.join(".venv/bin")).unwrap();
    std::fs::write(src.join(".venv/bin/tool"), &script).unwrap();
    crate::support::set_executable(&src.join(".venv/bin/tool"), true);
    std::os::unix::fs::symlink(src.join(".venv/bin/tool"), src.join(".venv/bin/link")).unwrap();
    let (code, saved) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(code, 0, "{saved}");
    assert_eq!(saved["layers"][0]["relocated"], 2, "{saved}");
    assert!(saved["layers"][0].get("rooted").is_none(), "{saved}");

    let wt = env.path().join("other/place");
    let (code, out) = env.json(&["checkout", &snap, wt.as_str()]);
    assert_eq!(code, 0, "{out}");
    let wt = Utf8Path::new(out["worktree"].as_str().unwrap()).to_owned();
    let written = std::fs::read_to_string(wt.join(".venv/bin/tool")).unwrap();
    assert_eq!(
        written,
        script
            .replace(&format!("{src}/"), &format!("{wt}/"))
            .replace(&format!("{src}\n"), &format!("{wt}\n"))
    );
    assert!(
        written.contains(&format!("not {src}x")),
        "a longer name is not the root"
    );
    assert_eq!(
        std::fs::read_link(wt.join(".venv/bin/link")).unwrap(),
        wt.join(".venv/bin/tool").as_std_path()
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(wt.join(".venv/bin/tool"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o100, 0, "still executable");

    // A binary file holding the root: the layer attaches at that root only.
    let (bin, bin_snap) = deps_project(&env, "bin", ("uv.lock", "version = 2\n"), (".venv", 3));
    let mut elf = b"\x7fELF\0\0".to_vec();
    elf.extend_from_slice(bin.as_str().as_bytes());
    std::fs::write(bin.join(".venv/lib.so"), &elf).unwrap();
    let (code, saved) = env.json(&["deps", "save", bin.as_str()]);
    assert_eq!(code, 0, "{saved}");
    assert_eq!(saved["layers"][0]["rooted"], bin.as_str(), "{saved}");
    let wt = env.path().join("bin2");
    let (code, out) = env.json(&["checkout", &bin_snap, wt.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out["deps"],
        serde_json::json!([]),
        "another root gets no rooted layer"
    );
}

#[test]
fn bad_input_is_refused_naming_the_path_or_key() {
    let env = Env::new();
    let (src, _) = deps_project(&env, "src", LOCK, ("node_modules", 5));

    let (code, v) = env.json(&["deps", "rm", "feedbeef"]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("unknown_id")),
        "{v}"
    );
    assert!(
        v["error"]["message"].as_str().unwrap().contains("feedbeef"),
        "{v}"
    );

    std::fs::write(src.join(".cairn-deps"), "# pairs\nonly-one-word\n").unwrap();
    let (code, v) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("invalid_config")),
        "{v}"
    );
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains(".cairn-deps line 2"), "{message}");
    std::fs::remove_file(src.join(".cairn-deps")).unwrap();

    let loose = env.path().join("loose");
    std::fs::create_dir_all(&loose).unwrap();
    let (code, v) = env.json(&["deps", "save", loose.as_str()]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("not_a_worktree")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains(loose.as_str()),
        "{v}"
    );

    // A dependency folder that is a file, or a symlink out of the worktree.
    let modules = src.join("node_modules");
    std::fs::rename(&modules, env.path().join("moved")).unwrap();
    std::fs::write(&modules, "a file\n").unwrap();
    let (code, v) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("invalid_path")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains(modules.as_str()),
        "{v}"
    );
    std::fs::remove_file(&modules).unwrap();
    std::os::unix::fs::symlink(env.path().join("moved"), &modules).unwrap();
    let (code, v) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("invalid_path")),
        "{v}"
    );
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(modules.as_str()) && message.contains("symbolic link"),
        "{message}"
    );
    let (code, list) = env.json(&["deps", "list"]);
    assert_eq!(code, 0, "{list}");
    assert_eq!(
        list["layers"],
        serde_json::json!([]),
        "nothing saved through the link"
    );

    // A unique prefix removes; the layer is gone from the list.
    std::fs::remove_file(&modules).unwrap();
    std::fs::rename(env.path().join("moved"), &modules).unwrap();
    let (code, saved) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(code, 0, "{saved}");
    let key = saved["layers"][0]["key"].as_str().unwrap();
    let (code, v) = env.json(&["deps", "rm", &key[..10]]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["layers"][0]["key"], key);
    let (_, list) = env.json(&["deps", "list"]);
    assert_eq!(list["layers"], serde_json::json!([]));
}

#[test]
fn sigkill_during_deps_save_leaves_the_layer_whole_or_absent_and_fsck_clean() {
    let env = Env::new();
    let (src, _) = deps_project(&env, "src", LOCK, ("node_modules", 4000));
    let (mut whole, mut absent) = (0, 0);
    // From before the store is open to well after the save ends (some 0.4 s in a debug
    // build): the first kills leave nothing, the last a whole layer.
    for delay_ms in [5, 40, 100, 200, 300, 3000] {
        killed_after(
            &env,
            &["deps", "save", src.as_str()],
            Duration::from_millis(delay_ms),
        );
        let (code, list) = env.json(&["deps", "list"]);
        assert_eq!(code, 0, "{list}");
        match list["layers"].as_array().unwrap().as_slice() {
            [] => absent += 1,
            [one] => {
                assert_eq!(one["files"], 4002, "{list}");
                whole += 1;
            }
            more => panic!("{more:?}"),
        }
        let out = env.cairn(&["fsck"]);
        assert!(
            out.status.success(),
            "after a kill at {delay_ms} ms: {}",
            stderr(&out)
        );
        if let Some(key) = list["layers"][0]["key"].as_str() {
            // Stored whole: remove it, so the next kill lands in a save again.
            assert!(env.cairn(&["deps", "rm", key]).status.success());
        }
    }
    assert!(
        absent > 0 && whole > 0,
        "{absent} kills left nothing, {whole} a whole layer"
    );
    let (code, saved) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(code, 0, "{saved}");
    assert_eq!(saved["layers"][0]["files"], 4002);
}

#[test]
fn sigkill_during_a_checkouts_attach_never_leaves_a_half_layer_in_place() {
    let env = Env::new();
    let (src, snap) = deps_project(&env, "src", LOCK, ("node_modules", 6000));
    let (code, saved) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(code, 0, "{saved}");
    let whole = under(&src, "node_modules");
    let (mut placed, mut missing) = (0, 0);
    // From before the checkout opens the store to after its attach ends: every kill
    // leaves the layer's folder whole or absent, never part of it.
    for (i, delay_ms) in [20, 100, 200, 300, 400, 600, 800, 5000]
        .into_iter()
        .enumerate()
    {
        let wt = env.path().join(format!("wt{i}"));
        killed_after(
            &env,
            &["checkout", &snap, wt.as_str()],
            Duration::from_millis(delay_ms),
        );
        if wt.join("node_modules").symlink_metadata().is_ok() {
            assert!(
                under(&wt, "node_modules") == whole,
                "a kill at {delay_ms} ms left a half layer in {wt}/node_modules"
            );
            placed += 1;
        } else {
            missing += 1;
        }
    }
    assert!(
        placed > 0 && missing > 0,
        "{placed} kills left the layer in place, {missing} none"
    );
    let out = env.cairn(&["fsck"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_cairn_deps_pair_attaches_at_any_depth_and_a_bad_file_never_stops_a_checkout() {
    let env = Env::new();
    let (src, _) = deps_project(&env, "src", LOCK, ("node_modules", 5));
    std::fs::create_dir_all(src.join("tools")).unwrap();
    std::fs::write(src.join("tools/uv.lock"), "version = 1\n").unwrap();
    std::fs::write(
        src.join(".cairn-deps"),
        "# extra pairs\ntools/uv.lock tools/.venv\n",
    )
    .unwrap();
    std::fs::write(src.join(".gitignore"), "/node_modules/\n/tools/.venv/\n").unwrap();
    fill_deps(&src, "tools/.venv", 7);
    let (code, saved) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(code, 0, "{saved}");
    let dirs: Vec<&str> = (saved["layers"].as_array().unwrap().iter())
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    assert_eq!(dirs, ["node_modules", "tools/.venv"], "{saved}");
    let (code, snap) = env.json(&["snapshot", src.as_str()]);
    assert_eq!(code, 0, "{snap}");
    let snap = snap["snapshot"].as_str().unwrap().to_owned();
    let wt = env.path().join("wt");
    let (code, out) = env.json(&["checkout", &snap, wt.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["deps"].as_array().unwrap().len(), 2, "{out}");
    assert_eq!(under(&wt, "tools/.venv"), under(&src, "tools/.venv"));

    // A snapshot whose .cairn-deps is bad still checks out, with the built-in layers.
    std::fs::write(src.join(".cairn-deps"), "one-word\n").unwrap();
    let (code, bad) = env.json(&["snapshot", src.as_str()]);
    assert_eq!(code, 0, "{bad}");
    let wt = env.path().join("wt-bad");
    let out = env.cairn(&[
        "--json",
        "checkout",
        bad["snapshot"].as_str().unwrap(),
        wt.as_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(".cairn-deps line 1"),
        "{}",
        stderr(&out)
    );
    let out: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dirs: Vec<&str> = (out["deps"].as_array().unwrap().iter())
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    assert_eq!(dirs, ["node_modules"], "{out}");
    assert!(!wt.join("tools/.venv").exists());
}

#[test]
fn a_layer_is_not_attached_where_the_snapshot_has_a_file_on_its_way() {
    let env = Env::new();
    let (src, _) = deps_project(&env, "src", LOCK, ("node_modules", 3));
    std::fs::write(src.join(".cairn-deps"), "lock.txt conf/deps\n").unwrap();
    std::fs::write(src.join("lock.txt"), "pinned\n").unwrap();
    std::fs::write(src.join(".gitignore"), "/node_modules/\n/conf/\n").unwrap();
    fill_deps(&src, "conf/deps", 3);
    let (code, saved) = env.json(&["deps", "save", src.as_str()]);
    assert_eq!(code, 0, "{saved}");
    assert_eq!(saved["layers"][0]["path"], "conf/deps", "{saved}");
    // Another project with the same lockfiles, where `conf` is a file.
    let other = env.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    for name in [".cairn-deps", "lock.txt", LOCK.0] {
        std::fs::copy(src.join(name), other.join(name)).unwrap();
    }
    std::fs::write(other.join("conf"), "a file\n").unwrap();
    let (code, onboarded) = env.json(&["onboard", other.as_str()]);
    assert_eq!(code, 0, "{onboarded}");
    let wt = env.path().join("wt");
    let (code, out) = env.json(&[
        "checkout",
        onboarded["snapshot"].as_str().unwrap(),
        wt.as_str(),
    ]);
    assert_eq!(code, 0, "{out}");
    let dirs: Vec<&str> = (out["deps"].as_array().unwrap().iter())
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    assert_eq!(dirs, ["node_modules"], "{out}");
    assert_eq!(
        std::fs::read_to_string(wt.join("conf")).unwrap(),
        "a file\n"
    );
}
