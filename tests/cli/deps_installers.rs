//! Dependency layers made by real installers: `npm ci` of `fixtures/deps/npm-small` (four
//! packages from the npm registry, semver with its `bin`) and `uv sync` of
//! `fixtures/deps/uv-small` (six from PyPI, a console script of its own, the project
//! installed editable) in one worktree, `deps save`, then in a checkout and in a mount at
//! other paths: `require` finds the packages, the npm `bin` runs, the venv's python
//! imports both, and the console script (whose `#!` line named the first worktree) runs;
//! and in `verify`'s view, where a check needing them fails with `--no-deps`. The layers are never in a snapshot. The machine's node and npm are used; uv comes from
//! PyPI into a virtualenv under the target directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use camino::{Utf8Path, Utf8PathBuf};

use crate::mount_commands::Mounts;
use crate::support::{Env, python_venv};
use crate::verify_commands::{NO_FUSE, verify_in_with};

const UV: &str = "uv==0.13.9";

/// The `uv` binary, installed once per target directory (once per run: the tests here
/// run at once and would make the same virtualenv together).
fn uv() -> &'static Path {
    static UV_BIN: OnceLock<PathBuf> = OnceLock::new();
    UV_BIN.get_or_init(|| {
        let python = python_venv("uv-venv", UV);
        python.parent().expect("the venv's bin").join("uv")
    })
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/deps")
        .join(name)
}

/// Copies the fixture `name`'s files (dotfiles too) into `dest`.
fn copy_fixture(name: &str, dest: &Utf8Path) {
    std::fs::create_dir_all(dest).unwrap();
    ok(Command::new("cp")
        .arg("-R")
        .arg(fixture(name).join("."))
        .arg(dest));
}

/// Runs `cmd`, failing the test with its output unless it succeeds; its stdout.
fn ok(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} did not start: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A command with the installers' caches under the target directory (warm after the
/// first run) and nothing downloaded but packages.
fn tool(program: impl AsRef<std::ffi::OsStr>, dir: &Utf8Path) -> Command {
    let caches = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let mut cmd = Command::new(program);
    cmd.current_dir(dir)
        .env("npm_config_cache", caches.join("npm-cache"))
        .env("npm_config_update_notifier", "false")
        .env("UV_CACHE_DIR", caches.join("uv-cache"))
        .env("UV_PYTHON_DOWNLOADS", "never")
        .env("UV_LINK_MODE", "copy")
        .env_remove("VIRTUAL_ENV");
    cmd
}

/// A worktree with both projects in it (one root: `node_modules` and `.venv` beside each
/// other), onboarded, then installed; its snapshot.
fn installed(env: &Env, root: &Utf8Path) -> String {
    std::fs::create_dir_all(root).unwrap();
    copy_fixture("npm-small", root);
    copy_fixture("uv-small", root);
    std::fs::write(root.join(".gitignore"), "node_modules/\n.venv/\n").unwrap();
    let (code, out) = env.json(&["onboard", root.as_str()]);
    assert_eq!(code, 0, "{out}");
    let snap = out["snapshot"].as_str().unwrap().to_owned();
    ok(tool("npm", root).args(["ci", "--no-audit", "--no-fund", "--loglevel=error"]));
    ok(tool(uv(), root).args(["sync", "--frozen", "--quiet"]));
    snap
}

/// [`installed`] at `first` in `env`, its layers saved: that folder and the snapshot.
fn installed_and_saved(env: &Env) -> (Utf8PathBuf, String) {
    let first = env.path().join("first");
    let snap = installed(env, &first);
    let (code, saved) = env.json(&["deps", "save", first.as_str()]);
    assert_eq!(code, 0, "{saved}");
    (first, snap)
}

/// Everything an agent would run in a worktree at `root` works there.
fn assert_runs(root: &Utf8Path) {
    let here = std::fs::canonicalize(root).unwrap();
    let out = ok(tool("node", root).args([
        "-e",
        "const s = require('semver'); const ms = require('ms'); \
         console.log(s.valid('1.2.3'), ms('2s'), require.resolve('semver'))",
    ]));
    assert!(out.starts_with("1.2.3 2000 "), "{out}");
    assert!(
        Path::new(out.split_whitespace().nth(2).unwrap()).starts_with(&here),
        "semver resolved inside {}: {out}",
        here.display()
    );
    let out = ok(tool(root.join("node_modules/.bin/semver"), root).args(["-r", ">=1.0", "1.4.0"]));
    assert_eq!(out.trim(), "1.4.0");
    let out = ok(tool(root.join(".venv/bin/python"), root).args([
        "-c",
        "import sys, six, cairn_fixture_uv_small as m; print(six.__version__, m.__file__, sys.prefix)",
    ]));
    let words: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"1.17.0"), "{out}");
    assert!(
        Path::new(words[1]).starts_with(&here),
        "the editable project is this worktree's: {out}"
    );
    assert!(
        Path::new(words[2]).starts_with(&here),
        "the venv is this worktree's: {out}"
    );
    let out = ok(&mut tool(root.join(".venv/bin/uv-small"), root));
    assert_eq!(out.trim(), "uv-small ok, six 1.17.0");
    let script = std::fs::read_to_string(root.join(".venv/bin/uv-small")).unwrap();
    assert!(
        script.starts_with(&format!("#!{root}/.venv/bin/python")),
        "the console script names this worktree: {script}"
    );
}

/// `SNAP:PATH` names something in the snapshot.
fn holds(env: &Env, snap: &str, path: &str) -> bool {
    let (code, out) = env.json(&["show", &format!("{snap}:{path}")]);
    assert!(
        code == 0 || code == 1 || code == 2,
        "show {snap}:{path}: {out}"
    );
    code == 0
}

fn layers_of(out: &serde_json::Value) -> Vec<(String, u64)> {
    out["deps"]
        .as_array()
        .unwrap_or_else(|| panic!("no deps in {out}"))
        .iter()
        .map(|l| {
            (
                l["path"].as_str().unwrap().to_owned(),
                l["files"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The layers are never captured, whatever `.gitignore` says.
fn assert_not_captured(env: &Env, root: &Utf8Path) {
    std::fs::remove_file(root.join(".gitignore")).unwrap();
    std::fs::write(root.join("new.txt"), "a change\n").unwrap();
    let (code, out) = env.json(&["snapshot", root.as_str()]);
    assert_eq!(code, 0, "{out}");
    let snap = out["snapshot"].as_str().unwrap();
    assert!(holds(env, snap, "new.txt"), "the change is captured");
    for layer in ["node_modules", ".venv"] {
        assert!(!holds(env, snap, layer), "{layer} captured in {snap}");
    }
    let (code, status) = env.json(&["status", root.as_str()]);
    assert_eq!(code, 0, "{status}");
    let text = status.to_string();
    assert!(
        !text.contains("node_modules") && !text.contains(".venv"),
        "status shows a layer: {status}"
    );
}

#[test]
fn npm_and_uv_layers_run_in_a_checkout_at_another_path() {
    let env = Env::new();
    let first = env.path().join("first");
    let snap = installed(&env, &first);
    assert_runs(&first);

    let (code, saved) = env.json(&["deps", "save", first.as_str()]);
    assert_eq!(code, 0, "{saved}");
    let mut paths: Vec<&str> = saved["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    paths.sort();
    assert_eq!(paths, [".venv", "node_modules"], "{saved}");
    assert!(
        saved["layers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["new"] == true),
        "{saved}"
    );
    // Saved from the worktree it was installed in: the snapshot never held them.
    assert!(!holds(&env, &snap, "node_modules") && !holds(&env, &snap, ".venv"));

    // A checkout at another path, deeper than the first (the root's length changes).
    let other: Utf8PathBuf = env.path().join("elsewhere/a-longer-name/second");
    let (code, out) = env.json(&["checkout", &snap, other.as_str()]);
    assert_eq!(code, 0, "{out}");
    let mut layers = layers_of(&out);
    layers.sort();
    assert_eq!(layers.len(), 2, "{out}");
    assert_eq!(layers[0].0, ".venv");
    assert_eq!(layers[1].0, "node_modules");
    assert!(layers.iter().all(|(_, files)| *files > 0), "{out}");
    assert_runs(&other);
    assert_not_captured(&env, &other);

    // `--no-deps` leaves them out.
    let bare = env.path().join("bare");
    let (code, out) = env.json(&["checkout", "--no-deps", &snap, bare.as_str()]);
    assert_eq!(code, 0, "{out}");
    assert!(layers_of(&out).is_empty(), "{out}");
    assert!(!bare.join("node_modules").exists() && !bare.join(".venv").exists());
}

#[test]
fn npm_and_uv_layers_run_in_a_mount_at_another_path() {
    let env = Env::new();
    let (_, snap) = installed_and_saved(&env);

    let m = env.path().join("mounted/elsewhere/third");
    let (code, out) = env.json(&["mount", &snap, m.as_str()]);
    let _mounts = Mounts {
        env: &env,
        dirs: vec![m.clone()],
    };
    assert_eq!(code, 0, "{out}");
    assert_eq!(layers_of(&out).len(), 2, "{out}");
    assert_runs(&m);
    assert_not_captured(&env, &m);
}

/// `verify` attaches the layers in its view as `mount` and `checkout` do: a check that
/// needs both (`require` of an npm package, the venv's console script, whose `#!` line
/// names the view) passes in a checkout (FUSE turned off) and in a mount (the command line
/// starts a server for it), and fails with `--no-deps`.
#[test]
fn verify_runs_its_check_with_the_layers_and_not_with_no_deps() {
    let env = Env::new();
    let (_, snap) = installed_and_saved(&env);
    let tmp = env.path().join("tmp");
    let script = "node -e \"console.log(require('semver').valid('1.2.3'))\" && .venv/bin/uv-small";
    let log = |name: &str| {
        let (code, v) = env.json(&["checks", &snap, "--log", name]);
        assert_eq!(code, 0, "{v}");
        v["log"]["stdout"].as_str().unwrap().to_owned()
    };
    // The checkout first: the command line with FUSE turned off starts no server, and a
    // server started for a mount would serve the next verify.
    for (vars, view) in [(NO_FUSE, "checkout"), (&[][..], "mount")] {
        let name = format!("tests-{view}");
        let args = [&snap, "--check", &name, "--", "sh", "-c", script];
        let (code, out) = verify_in_with(&env, &tmp, vars, &args);
        assert_eq!(code, 0, "{out}");
        assert_eq!(out["view"], view, "{out}");
        let mut layers = layers_of(&out);
        layers.sort();
        assert_eq!(
            layers.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
            [".venv", "node_modules"],
            "{out}"
        );
        assert!(layers.iter().all(|(_, files)| *files > 0), "{out}");
        assert_eq!(log(&name), "1.2.3\nuv-small ok, six 1.17.0\n");

        let bare = format!("{name}-no-deps");
        let args = [
            &snap,
            "--check",
            &bare,
            "--no-deps",
            "--",
            "sh",
            "-c",
            script,
        ];
        let (code, out) = verify_in_with(&env, &tmp, vars, &args);
        assert_eq!(code, 1, "{out}");
        assert_eq!(out["passed"], false, "{out}");
        assert_eq!(out["view"], view, "{out}");
        assert!(layers_of(&out).is_empty(), "{out}");
    }
}

/// A changed lockfile gets no layer: the key is the lockfile's bytes.
#[test]
fn a_changed_lockfile_gets_no_layer() {
    let env = Env::new();
    let (first, _) = installed_and_saved(&env);

    let lock = first.join("package-lock.json");
    let text = std::fs::read_to_string(&lock).unwrap();
    std::fs::write(
        &lock,
        text.replace("\"version\": \"1.0.0\"", "\"version\": \"1.0.1\""),
    )
    .unwrap();
    let (code, out) = env.json(&["snapshot", first.as_str()]);
    assert_eq!(code, 0, "{out}");
    let changed = out["snapshot"].as_str().unwrap().to_owned();
    let other = env.path().join("other");
    let (code, out) = env.json(&["checkout", &changed, other.as_str()]);
    assert_eq!(code, 0, "{out}");
    let layers = layers_of(&out);
    assert_eq!(
        layers.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
        [".venv"],
        "only the unchanged uv.lock's layer: {out}"
    );
    assert!(!other.join("node_modules").exists());
}
