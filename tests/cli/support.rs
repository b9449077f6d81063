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

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
