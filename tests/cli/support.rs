use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use cairn_client::Client;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{
    EntryKind, OpenOptions, PreparedBlob, Snapshot, SnapshotId, Store, Tree, TreeEntry, WriteBatch,
};

pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Utf8Path {
        Utf8Path::from_path(self.dir.path()).unwrap()
    }

    pub fn store(&self) -> Utf8PathBuf {
        self.path().join("store")
    }

    /// `cairn --store <store> args…`, run in the temp dir with a clean environment.
    pub fn cairn(&self, args: &[&str]) -> Output {
        let mut cmd = self.command();
        cmd.arg("--store").arg(self.store().as_str()).args(args);
        cmd.output().unwrap()
    }

    pub fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"));
        cmd.current_dir(self.path())
            .env_remove("CAIRN_STORE")
            .env_remove("RUST_LOG")
            .env_remove("CAIRN_STORE_BUDGET")
            .env("HOME", self.path().join("home").as_str())
            .env_remove("XDG_DATA_HOME")
            .env("NO_COLOR", "1");
        cmd
    }

    pub fn json(&self, args: &[&str]) -> (i32, serde_json::Value) {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.cairn(&all);
        let text = String::from_utf8(out.stdout).unwrap();
        let value: serde_json::Value = serde_json::from_str(text.trim())
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {text:?}"));
        (out.status.code().unwrap(), value)
    }

    /// Writes a snapshot of `files` (`path -> bytes`, `/` makes directories) through the
    /// library, as onboard will.
    pub fn commit(
        &self,
        files: &[(&str, &[u8])],
        parents: Vec<SnapshotId>,
        message: &str,
    ) -> SnapshotId {
        let store = Store::open(
            &self.store(),
            &OpenOptions {
                create: true,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        let mut batch = WriteBatch::new();
        let tree = build_tree(&mut batch, files, "");
        let id = batch.add_snapshot(Snapshot {
            tree: tree.0,
            parents,
            created: jiff::Timestamp::now(),
            message: message.into(),
            labels: [("task".to_string(), "42".to_string())]
                .into_iter()
                .collect(),
            source: None,
        });
        store.write(&batch).unwrap();
        id
    }
}

fn build_tree(batch: &mut WriteBatch, files: &[(&str, &[u8])], prefix: &str) -> (cas::TreeId, u64) {
    let mut entries = Vec::new();
    let mut dirs: Vec<&str> = Vec::new();
    for (path, content) in files {
        let Some(rest) = path.strip_prefix(prefix) else {
            continue;
        };
        match rest.split_once('/') {
            None => {
                let id = batch.add_blob(PreparedBlob::new(content));
                entries.push(TreeEntry {
                    name: rest.as_bytes().to_vec(),
                    kind: EntryKind::File,
                    id: id.into(),
                    size: content.len() as u64,
                });
            }
            Some((dir, _)) if !dirs.contains(&dir) => dirs.push(dir),
            Some(_) => {}
        }
    }
    for dir in dirs {
        let (id, size) = build_tree(batch, files, &format!("{prefix}{dir}/"));
        entries.push(TreeEntry {
            name: dir.as_bytes().to_vec(),
            kind: EntryKind::Tree,
            id: id.into(),
            size,
        });
    }
    let tree = Tree::new(entries).unwrap();
    let size = tree.size();
    (batch.add_tree(tree), size)
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs git in `dir` with a fixed identity; panics with its stderr on failure.
pub fn git(dir: &Utf8Path, args: &[&str]) -> Vec<u8> {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "core.autocrlf=false",
            "-C",
            dir.as_str(),
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A Python with `requirement` installed from PyPI: a virtualenv `name` under the target
/// directory, made on first use and reused while the requirement is the same.
pub fn python_venv(name: &str, requirement: &str) -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let python = venv.join("bin/python");
    let ready = venv.join(format!(".installed-{requirement}"));
    if !ready.exists() {
        let _ = std::fs::remove_dir_all(&venv);
        let status = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap_or_else(|e| panic!("python3 (with venv) is needed for {requirement}: {e}"));
        assert!(
            status.success(),
            "python3 -m venv {} failed",
            venv.display()
        );
        let out = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                requirement,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pip install {requirement} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(&ready, "").unwrap();
    }
    python
}

/// A `cairn serve` of the env's store, up and answering; killed when dropped.
pub struct Server {
    pub child: Child,
    pub socket: Utf8PathBuf,
}

impl Server {
    pub fn start(env: &Env) -> Server {
        Server::start_with(env, &[])
    }

    /// A server whose environment has `vars` too.
    pub fn start_with(env: &Env, vars: &[(&str, &str)]) -> Server {
        wait_for_no_server(env);
        let child = env
            .command()
            .envs(vars.iter().copied())
            .arg("--store")
            .arg(env.store().as_str())
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let socket = Client::socket_of(&env.store());
        let started = Instant::now();
        while Client::connect(&socket).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "cairn serve did not come up on {socket}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Server { child, socket }
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.socket).unwrap()
    }

    /// SIGTERM, then the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        let status = self.child.wait().unwrap();
        std::mem::forget(self);
        status
    }
}

/// SIGTERM to `child` (a `what`, for the message), then its exit status, which must come
/// within `within`.
pub fn terminate(child: &mut Child, within: Duration, what: &str) -> std::process::ExitStatus {
    let pid = child.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(sent.success());
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            started.elapsed() < within,
            "{what} did not stop within {within:?} of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits up to 10 seconds for the server a command-line `verify` or `mount` started for
/// `env`'s store to stop (its socket gone), so that another can start.
pub fn wait_for_no_server(env: &Env) {
    let socket = Client::socket_of(&env.store());
    let started = Instant::now();
    while socket.exists() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A new folder about `len` bytes long below `base` (components of 200 bytes): a root
/// under which a path that fits a tree can be longer than the system takes from `/`.
pub fn deep_folder(base: &Utf8Path, len: usize, letter: char) -> Utf8PathBuf {
    let mut path = base.to_owned();
    while path.as_str().len() + 201 <= len {
        path.push(letter.to_string().repeat(200));
    }
    std::fs::create_dir_all(&path).unwrap();
    path
}

/// A path within a worktree about `len` bytes long (components of 200 bytes), ending in
/// `file.txt`.
pub fn deep_path(len: usize) -> String {
    let mut path = String::new();
    while path.len() + 201 + "file.txt".len() <= len {
        path.push_str(&"d".repeat(200));
        path.push('/');
    }
    path + "file.txt"
}

/// Writes `bytes` at `rel` below `root`, making its folders, through directory handles
/// (the whole path may be longer than any call by path takes).
pub fn write_beneath(root: &Utf8Path, rel: &str, bytes: &[u8]) {
    use rustix::fs::{Mode, OFlags};
    let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    let dir = path_policy::Root::open(root.as_std_path())
        .unwrap()
        .create_dir_all(dir.as_bytes())
        .unwrap();
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW;
    let fd = rustix::fs::openat(&dir, name, flags, Mode::from_raw_mode(0o644)).unwrap();
    std::io::Write::write_all(&mut std::fs::File::from(fd), bytes).unwrap();
}

/// The bytes at `rel` below `root`, read through directory handles.
pub fn read_beneath(root: &Utf8Path, rel: &str) -> std::io::Result<Vec<u8>> {
    use rustix::fs::{Mode, OFlags};
    let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    let dir = path_policy::Root::open(root.as_std_path())
        .and_then(|r| r.open_dir(dir.as_bytes()))
        .map_err(std::io::Error::other)?;
    let fd = rustix::fs::openat(&dir, name, OFlags::RDONLY | OFlags::NOFOLLOW, Mode::empty())?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut bytes)?;
    Ok(bytes)
}

/// The process ids written to `file`, one a line, once it holds `n` of them (waits up to 20
/// seconds for a background command to write them).
pub fn pids_in(file: &Utf8Path, n: usize) -> Vec<u32> {
    let started = Instant::now();
    loop {
        let pids: Vec<u32> = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.len() >= n {
            return pids;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{file} never named {n} processes: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` runs (a zombie, ended but not yet waited for, does not).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X')
    })
}

/// The processes of `pids` still running after up to 5 seconds.
pub fn still_running(pids: &[u32]) -> Vec<u32> {
    let started = Instant::now();
    loop {
        let running: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if running.is_empty() || started.elapsed() > Duration::from_secs(5) {
            return running;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The mount points at or below `dir` in this process's mount table.
pub fn mounts_under(dir: &Utf8Path) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|point| Utf8Path::new(point).starts_with(dir))
        .map(str::to_owned)
        .collect()
}

// Attempts at one task, and git merging their trees (combine and rebase).

/// Ten numbered lines: attempts edit different hunks of it.
pub const LINES: &str = "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n";

/// A project onboarded in place: a text file, an executable, a symlink, an empty file and
/// a folder. Its snapshot is the attempts' base.
pub fn project(env: &Env) -> String {
    let dir = env.path().join("project");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("lines.txt"), LINES).unwrap();
    std::fs::write(dir.join("notes.txt"), "notes\n").unwrap();
    std::fs::write(dir.join("src/lib.rs"), "pub fn lib() {}\n").unwrap();
    std::fs::write(dir.join("run.sh"), "#!/bin/sh\necho run\n").unwrap();
    set_executable(&dir.join("run.sh"), true);
    std::os::unix::fs::symlink("lines.txt", dir.join("link")).unwrap();
    std::fs::write(dir.join("empty"), "").unwrap();
    let (code, v) = env.json(&["onboard", dir.as_str()]);
    assert_eq!(code, 0, "{v}");
    v["snapshot"].as_str().unwrap().to_owned()
}

pub fn set_executable(path: &Utf8Path, on: bool) {
    use std::os::unix::fs::PermissionsExt;
    let mode = if on { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// An attempt: `base` checked out as `name`, edited by `edit`, snapshotted.
pub fn attempt(env: &Env, base: &str, name: &str, edit: impl FnOnce(&Utf8Path)) -> String {
    let dir = env.path().join(name);
    let (code, v) = env.json(&["checkout", base, dir.as_str()]);
    assert_eq!(code, 0, "{v}");
    edit(&dir);
    let (code, v) = env.json(&["snapshot", dir.as_str(), "-m", name]);
    assert_eq!(code, 0, "{v}");
    v["snapshot"].as_str().unwrap().to_owned()
}

pub fn replace(dir: &Utf8Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{file} lacks {from:?}");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

/// A scratch git repository (no work tree of its own) that snapshots are imported into
/// through cairn checkouts, so that git can merge their trees.
pub struct Scratch {
    pub git_dir: Utf8PathBuf,
    pub home: Utf8PathBuf,
    pub views: Utf8PathBuf,
}

impl Scratch {
    pub fn new(env: &Env) -> Scratch {
        let scratch = Scratch {
            git_dir: env.path().join("scratch.git"),
            home: env.path().join("home"),
            views: env.path().join("views"),
        };
        std::fs::create_dir_all(&scratch.home).unwrap();
        std::fs::create_dir_all(&scratch.views).unwrap();
        let out = scratch.git(&["init", "-q", "--bare", scratch.git_dir.as_str()]);
        assert!(out.status.success(), "{}", stderr(&out));
        scratch
    }

    /// git with the same (empty) configuration as cairn's tests give it.
    pub fn git(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("git")
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GIT_DIR")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .unwrap()
    }

    /// The git tree of `snapshot`'s files: checked out by cairn, added by git.
    pub fn tree_of(&self, env: &Env, snapshot: &str) -> String {
        let view = self.views.join(&snapshot[..16]);
        if !view.exists() {
            let (code, v) = env.json(&["checkout", snapshot, view.as_str()]);
            assert_eq!(code, 0, "{v}");
        }
        let index = self.views.join(format!("{}.index", &snapshot[..16]));
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .env("HOME", &self.home)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_INDEX_FILE", &index)
                .args([
                    "--git-dir",
                    self.git_dir.as_str(),
                    "--work-tree",
                    view.as_str(),
                ])
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
            stdout(&out).trim().to_owned()
        };
        git(&["add", "-A", "."]);
        git(&["write-tree"])
    }

    /// `git merge-tree --write-tree --merge-base=BASE OURS THEIRS`: the merged tree, or
    /// `None` when git finds conflicts.
    pub fn merge(&self, base: &str, ours: &str, theirs: &str) -> Option<String> {
        let merge_base = format!("--merge-base={base}");
        let out = self.git(&[
            "--git-dir",
            self.git_dir.as_str(),
            "merge-tree",
            "--write-tree",
            &merge_base,
            ours,
            theirs,
        ]);
        match out.status.code() {
            Some(0) => Some(stdout(&out).lines().next().unwrap().to_owned()),
            Some(1) => None,
            _ => panic!("git merge-tree: {}", stderr(&out)),
        }
    }

    /// The mode, type and object of each path of a git tree, as `ls-tree -r` lists them.
    pub fn listing(&self, tree: &str) -> String {
        let out = self.git(&["--git-dir", self.git_dir.as_str(), "ls-tree", "-r", tree]);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    }
}

/// What the store holds, as `fsck` counts it (objects and references).
pub fn store_counts(env: &Env) -> serde_json::Value {
    let (code, v) = env.json(&["fsck"]);
    assert_eq!(code, 0, "{v}");
    v["checked"].clone()
}

// Kills at random moments, reproducible.

/// xorshift64*: reproducible from the printed seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// `CAIRN_CRASH_SEED`, else one from the clock.
pub fn crash_seed() -> u64 {
    std::env::var("CAIRN_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        })
}

/// Fills the dependency folder `dir` (from `root`) with `files` files, as an installer
/// would: `dir/pkg{i % 50}/f{i}.js`, a `.gitignore` that a package ships (which must not
/// drop files from the layer) and an executable `.bin/tool`.
pub fn fill_deps(root: &Utf8Path, dir: &str, files: usize) {
    let deps = root.join(dir);
    for i in 0..files {
        let path = deps.join(format!("pkg{}/f{i}.js", i % 50));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("module.exports = {i};\n")).unwrap();
    }
    std::fs::write(deps.join("pkg0/.gitignore"), "*.js\n").unwrap();
    std::fs::create_dir_all(deps.join(".bin")).unwrap();
    std::fs::write(deps.join(".bin/tool"), "#!/bin/sh\necho tool\n").unwrap();
    set_executable(&deps.join(".bin/tool"), true);
}

/// A project at `env/NAME` with the lockfile `lockfile` (holding `lock`) and its
/// dependency folder `dir` filled with `files` files ([`fill_deps`]), `dir` ignored by
/// its `.gitignore`, onboarded in place: its root and snapshot id.
pub fn deps_project(
    env: &Env,
    name: &str,
    (lockfile, lock): (&str, &str),
    (dir, files): (&str, usize),
) -> (Utf8PathBuf, String) {
    let root = env.path().join(name);
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("main.js"), "require('pkg0');\n").unwrap();
    std::fs::write(root.join(lockfile), lock).unwrap();
    std::fs::write(root.join(".gitignore"), format!("/{dir}/\n")).unwrap();
    fill_deps(&root, dir, files);
    let (code, v) = env.json(&["onboard", root.as_str()]);
    assert_eq!(code, 0, "{v}");
    (root, v["snapshot"].as_str().unwrap().to_owned())
}

/// `len` bytes no compressor shrinks, different for each `seed`.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `cairn --store <store> args…` started with no output and killed (SIGKILL) after `delay`
/// if it is still running.
pub fn killed_after(env: &Env, args: &[&str], delay: Duration) {
    let mut child = env
        .command()
        .arg("--store")
        .arg(env.store().as_str())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    let _ = child.kill();
    let _ = child.wait();
}
