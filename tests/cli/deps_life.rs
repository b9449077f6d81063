//! A dependency layer's lifetime: `gc` keeps it while a worktree uses it or it was used
//! within `--keep-within`, `--max-size` drops the unused ones least recently used first
//! and before any history, `retained` names what it keeps; a layer goes to a remote only
//! with `push --deps` and comes back only with `pull --deps`.

use camino::{Utf8Path, Utf8PathBuf};
use serde_json::Value;

use crate::remote_commands::{Machine, RemoteTarget, tree_of};
use crate::support::{Env, Rng};

/// A project at `dir` whose `package-lock.json` says `lock`, onboarded, with a
/// `node_modules` of `size` bytes of noise installed beside it and saved as a layer; its
/// snapshot and the layer's key.
fn project_with_layer(
    run: &dyn Fn(&[&str]) -> (i32, Value),
    dir: &Utf8Path,
    lock: &str,
    size: usize,
) -> (String, String) {
    std::fs::create_dir_all(dir.join("node_modules/pkg/bin")).unwrap();
    std::fs::write(dir.join("package-lock.json"), lock).unwrap();
    std::fs::write(dir.join(".gitignore"), "node_modules/\n").unwrap();
    std::fs::write(dir.join("index.js"), "require('pkg')\n").unwrap();
    // Noise of its own per lockfile: no two layers share a blob.
    let seed = (lock.bytes()).fold(0x5eed_u64, |h, b| {
        h.wrapping_mul(31).wrapping_add(u64::from(b))
    });
    let mut rng = Rng(seed);
    let noise: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
    std::fs::write(dir.join("node_modules/pkg/blob.bin"), noise).unwrap();
    std::fs::write(
        dir.join("node_modules/pkg/index.js"),
        format!("// {lock}\n"),
    )
    .unwrap();
    std::os::unix::fs::symlink("../index.js", dir.join("node_modules/pkg/bin/pkg")).unwrap();
    let (code, out) = run(&["onboard", dir.as_str()]);
    assert_eq!(code, 0, "{out}");
    let snap = out["snapshot"].as_str().unwrap().to_owned();
    let (code, saved) = run(&["deps", "save", dir.as_str()]);
    assert_eq!(code, 0, "{saved}");
    let layers = saved["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{saved}");
    assert_eq!(layers[0]["path"], "node_modules");
    (snap, layers[0]["key"].as_str().unwrap().to_owned())
}

fn listed(env: &Env) -> Vec<String> {
    let (code, out) = env.json(&["deps", "list"]);
    assert_eq!(code, 0, "{out}");
    let mut keys: Vec<String> = out["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["key"].as_str().unwrap().to_owned())
        .collect();
    keys.sort();
    keys
}

fn sorted(mut keys: Vec<&String>) -> Vec<String> {
    keys.sort();
    keys.into_iter().cloned().collect()
}

fn attached(out: &Value) -> Vec<String> {
    out["deps"]
        .as_array()
        .unwrap_or_else(|| panic!("no deps in {out}"))
        .iter()
        .map(|l| l["key"].as_str().unwrap().to_owned())
        .collect()
}

/// The layers `retained` names.
fn retained_layers(gc: &Value) -> Vec<String> {
    let mut keys: Vec<String> = gc["retained"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["reason"] == "dependency layer")
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect();
    keys.sort();
    keys
}

fn gc(env: &Env, args: &[&str]) -> Value {
    let mut all = vec!["gc"];
    all.extend_from_slice(args);
    let (code, out) = env.json(&all);
    assert_eq!(code, 0, "{out}");
    let (code, fsck) = env.json(&["fsck"]);
    assert_eq!(code, 0, "fsck after gc {args:?}: {fsck}");
    out
}

#[test]
fn gc_keeps_a_layer_while_a_worktree_uses_it_or_it_was_used_within_keep_within() {
    let env = Env::new();
    let run = |args: &[&str]| env.json(args);
    let (snap_a, a) = project_with_layer(&run, &env.path().join("a"), "{\"a\":1}", 4096);
    let (snap_b, b) = project_with_layer(&run, &env.path().join("b"), "{\"b\":1}", 4096);
    let user = env.path().join("user");
    let (code, out) = env.json(&["checkout", &snap_a, user.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(attached(&out), std::slice::from_ref(&a));

    // Without --keep-within every layer stays.
    let out = gc(&env, &[]);
    assert_eq!(listed(&env), sorted(vec![&a, &b]), "{out}");
    assert_eq!(retained_layers(&out), std::slice::from_ref(&a), "{out}");

    // Both were used a moment ago: within a day.
    let out = gc(&env, &["--keep-within", "1"]);
    assert_eq!(listed(&env), sorted(vec![&a, &b]), "{out}");
    assert_eq!(retained_layers(&out), sorted(vec![&a, &b]), "{out}");

    // Within no time: only the layer a worktree uses stays.
    let out = gc(&env, &["--keep-within", "0"]);
    assert_eq!(listed(&env), std::slice::from_ref(&a), "{out}");
    assert_eq!(retained_layers(&out), std::slice::from_ref(&a), "{out}");
    assert!(out["bytes_freed"].as_u64().unwrap() >= 4096, "{out}");
    let other = env.path().join("other-b");
    let (code, out) = env.json(&["checkout", &snap_b, other.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert!(attached(&out).is_empty(), "a dropped layer attaches: {out}");
    assert!(!other.join("node_modules").exists());

    // The worktree's layer is written out whole for it, and stays with it.
    let files = tree_of(&user.join("node_modules"));
    assert_eq!(files.len(), 3, "{files:?}");

    // Once no worktree uses it, it goes too.
    let (code, out) = env.json(&["worktree", "remove", user.as_str()]);
    assert_eq!(code, 0, "{out}");
    let out = gc(&env, &["--keep-within", "0"]);
    assert!(listed(&env).is_empty(), "{out}");
    assert!(retained_layers(&out).is_empty(), "{out}");
}

#[test]
fn max_size_drops_unused_layers_least_recently_used_first_before_any_history() {
    let env = Env::new();
    let run = |args: &[&str]| env.json(args);
    const MB: usize = 1 << 20;
    let (snap1, first) = project_with_layer(&run, &env.path().join("p1"), "{\"n\":1}", MB);
    let (_, second) = project_with_layer(&run, &env.path().join("p2"), "{\"n\":2}", MB);
    let (_, third) = project_with_layer(&run, &env.path().join("p3"), "{\"n\":3}", MB);
    let (snap4, used) = project_with_layer(&run, &env.path().join("p4"), "{\"n\":4}", MB);
    // Used since: the second (saved again), then the first (attached, and the worktree
    // let go), so the most recently used is the first and the least the third, the
    // newest saved.
    let (code, out) = env.json(&["deps", "save", env.path().join("p2").as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["layers"][0]["new"], false, "{out}");
    let gone = env.path().join("gone");
    let (code, out) = env.json(&["checkout", &snap1, gone.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(attached(&out), std::slice::from_ref(&first));
    assert_eq!(env.json(&["worktree", "remove", gone.as_str()]).0, 0);
    // The fourth stays attached to a worktree.
    let user = env.path().join("user");
    let (code, out) = env.json(&["checkout", &snap4, user.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(attached(&out), std::slice::from_ref(&used));
    // History: snapshots of a worktree, newer than every layer's use; a budget drops
    // the layers first all the same.
    for i in 0..3 {
        std::fs::write(env.path().join("p1/index.js"), format!("// {i}\n")).unwrap();
        assert_eq!(env.json(&["snapshot", env.path().join("p1").as_str()]).0, 0);
    }

    let all = gc(&env, &[]);
    let file = all["file_bytes_after"].as_u64().unwrap();
    assert_eq!(listed(&env).len(), 4, "{all}");

    // Room for all but one and a half layers: the two least recently used go, the third
    // (the newest saved) first, then the second.
    let budget = file - (3 * MB as u64) / 2;
    let out = gc(&env, &["--max-size", &budget.to_string()]);
    assert_eq!(listed(&env), sorted(vec![&first, &used]), "{out}");
    assert!(out["file_bytes_after"].as_u64().unwrap() <= budget, "{out}");
    assert_eq!(out["ops_pruned"], 0, "no history went: {out}");
    assert_eq!(out["checkpoints_pruned"], 0, "{out}");
    assert!(!listed(&env).contains(&second) && !listed(&env).contains(&third));

    // However small the budget, the layer a worktree uses stays, named in `retained`.
    let out = gc(&env, &["--max-size", "1"]);
    assert_eq!(listed(&env), std::slice::from_ref(&used), "{out}");
    assert_eq!(retained_layers(&out), std::slice::from_ref(&used), "{out}");
    let kept = out["retained"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["reason"] == "dependency layer")
        .unwrap();
    assert!(kept["bytes"].as_u64().unwrap() >= MB as u64, "{out}");
}

#[test]
fn a_layer_travels_only_with_push_deps_and_pull_deps() {
    let env = Env::new();
    let remote_dir: Utf8PathBuf = env.path().join("remote");
    let target = RemoteTarget {
        url: format!("file://{remote_dir}"),
        endpoint: None,
        env: Vec::new(),
        conditional: true,
    };
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    let b = Machine::new(env.path(), "b", Vec::new(), &target);
    a.add_remote(&target);
    b.add_remote(&target);
    let run = |args: &[&str]| a.json(args);
    let (snap, key) = project_with_layer(&run, &a.dir.join("p"), "{\"t\":1}", 64 << 10);
    let layer_files = tree_of(&a.dir.join("p/node_modules"));
    let record = remote_dir.join("deps").join(&key);

    // A plain push sends the snapshot and no layer.
    let out = a.ok(&["push", &snap]);
    assert!(!record.exists(), "{out}");
    let sent_plain = out["bytes_sent"].as_u64().unwrap();
    assert!(sent_plain < 64 << 10, "the layer's bytes went: {out}");

    // With --deps its layer goes too: its snapshot by id and its record.
    let out = a.ok(&["push", "--deps", &snap]);
    assert!(record.exists(), "{out}");
    assert!(out["bytes_sent"].as_u64().unwrap() >= 64 << 10, "{out}");
    assert_eq!(out["layers"], serde_json::json!([key]), "{out}");

    // A plain pull brings the snapshot, never the layer, though the remote has it.
    let out = b.ok(&["pull", &snap]);
    assert_eq!(
        b.ok(&["deps", "list"])["layers"],
        serde_json::json!([]),
        "{out}"
    );
    let bare = b.dir.join("bare");
    let out = b.ok(&["checkout", &snap, bare.as_str()]);
    assert!(attached(&out).is_empty(), "{out}");

    // With --deps the layer comes and attaches, the same files.
    let out = b.ok(&["pull", "--deps", &snap]);
    assert_eq!(out["layers"], serde_json::json!([key]), "{out}");
    let list = b.ok(&["deps", "list"]);
    assert_eq!(list["layers"][0]["key"], key.as_str(), "{list}");
    let full = b.dir.join("full");
    let out = b.ok(&["checkout", &snap, full.as_str()]);
    assert_eq!(attached(&out), std::slice::from_ref(&key), "{out}");
    assert_eq!(tree_of(&full.join("node_modules")), layer_files);
    let fsck = b.ok(&["fsck"]);
    assert_eq!(fsck["problems"], serde_json::json!([]), "{fsck}");

    // The remote's gc keeps the layer: it was pushed by id.
    a.ok(&["gc", "--remote", "origin", "--grace", "0"]);
    let c = Machine::new(env.path(), "c", Vec::new(), &target);
    c.add_remote(&target);
    let out = c.ok(&["pull", "--deps", &snap]);
    assert_eq!(out["layers"], serde_json::json!([key]), "{out}");
}
