//! Shared benchmark plumbing: interleaved A/B runs, medians and ratios.
#![allow(dead_code)]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `cairn` binary a bench runs: this build's, or the one `CAIRN_BENCH_CAIRN` names (an
/// older build, to compare two versions under the same harness and corpus).
pub fn cairn_binary() -> &'static str {
    static BINARY: OnceLock<String> = OnceLock::new();
    BINARY.get_or_init(|| {
        std::env::var("CAIRN_BENCH_CAIRN")
            .ok()
            .or_else(|| option_env!("CARGO_BIN_EXE_cairn").map(str::to_owned))
            .expect("this bench is built without the cairn binary: set CAIRN_BENCH_CAIRN")
    })
}

/// Runs `cmd`, failing the bench with its stderr unless it succeeds; its stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a bash script in `dir`; its stdout.
pub fn sh(script: &str, dir: &Path) -> String {
    run(Command::new("bash").arg("-c").arg(script).current_dir(dir))
}

/// Runs `cairn --json --store STORE ARGS…`; its JSON answer.
pub fn cairn(store: &Path, args: &[&str]) -> serde_json::Value {
    let out = run(Command::new(cairn_binary())
        .arg("--json")
        .arg("--store")
        .arg(store)
        .args(args));
    serde_json::from_str(out.trim()).unwrap()
}

/// Runs git in `dir` as a throwaway identity, with no automatic gc; its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    run(Command::new("git")
        .args([
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "-c",
            "gc.auto=0",
        ])
        .args(args)
        .current_dir(dir))
}

/// The Linux tree from `../shared/bench/linux-corpus.sh`, or the directory
/// `CAIRN_BENCH_CORPUS` names.
pub fn corpus() -> PathBuf {
    match std::env::var("CAIRN_BENCH_CORPUS").as_deref() {
        Ok(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            let script =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench/linux-corpus.sh");
            PathBuf::from(run(Command::new("bash").arg(script)).trim())
        }
    }
}

/// A `cairn serve` holding a store, stopped by [`Server::stop`].
pub struct Server(Child);

impl Server {
    /// Starts one and returns once its socket is there.
    pub fn start(store: &Path) -> Server {
        let child = Command::new(cairn_binary())
            .arg("--store")
            .arg(store)
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while !store.join("serve.sock").exists() {
            assert!(started.elapsed() < Duration::from_secs(30), "no server");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        Server(child)
    }

    pub fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

/// Milliseconds under a second, else seconds.
/// The number in environment variable `name` (a bench's setting), else `default`.
pub fn number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn secs(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{:.1} ms", d.as_secs_f64() * 1000.0)
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

/// Prints a row: the median of each column, and after each but the first the first's
/// median over its own (`0.5x`: the first took half as long).
pub fn row(name: &str, cols: &[(&str, &[Duration])]) {
    let mut line = format!("{name:<40}");
    let base = median(cols[0].1).as_secs_f64();
    for (label, v) in cols {
        let m = median(v);
        line.push_str(&format!("  {label} {:>9}", secs(m)));
        if !std::ptr::eq(*v, cols[0].1) {
            line.push_str(&format!(" ({:.3}x)", base / m.as_secs_f64()));
        }
    }
    println!("{line}");
}

/// The load averages (1, 5, 15 minutes), as `uptime` prints them.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// Runs `setup` then times `run`, for `pairs` rounds of cairn then peer, interleaved.
pub struct Pairing {
    pub cairn: Vec<Duration>,
    pub peer: Vec<Duration>,
}

pub fn interleave(
    pairs: usize,
    mut cairn: impl FnMut() -> Duration,
    mut peer: impl FnMut() -> Duration,
) -> Pairing {
    let mut out = Pairing {
        cairn: Vec::new(),
        peer: Vec::new(),
    };
    for _ in 0..pairs {
        out.cairn.push(cairn());
        out.peer.push(peer());
    }
    out
}

pub fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

pub fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

impl Pairing {
    pub fn ratio(&self) -> f64 {
        median(&self.cairn).as_secs_f64() / median(&self.peer).as_secs_f64()
    }
}

pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Source-code-like bytes: words from a small vocabulary, deterministic per seed.
pub fn text(seed: u64, len: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "static",
        "int",
        "struct",
        "return",
        "if",
        "else",
        "for",
        "while",
        "unsigned",
        "long",
        "const",
        "char",
        "void",
        "NULL",
        "->",
        "=",
        "==",
        "{",
        "}",
        "(",
        ")",
        ";",
        "\n",
        "\t",
        "kfree",
        "mutex_lock",
        "spin_unlock",
        "dev",
        "priv",
        "err",
        "goto",
        "out",
        "size_t",
    ];
    let mut x = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % WORDS.len() as u64) as usize].as_bytes());
        if x.is_multiple_of(5) {
            out.extend_from_slice(format!("{}", x % 1000).as_bytes());
        }
        out.push(b' ');
    }
    out.truncate(len);
    out
}

/// Bytes a tree occupies on disk (allocated blocks), like `du -s`.
pub fn disk_usage(p: &Path) -> u64 {
    let meta = p.symlink_metadata().unwrap();
    let mut total = meta.blocks() * 512;
    if meta.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            total += disk_usage(&e.unwrap().path());
        }
    }
    total
}

/// Bytes each table of a store's database takes (its records, its branch pages and what
/// its pages leave unused), by table name, largest first. The store must not be open.
pub fn table_bytes(store: &Path) -> Vec<(String, u64)> {
    use redb::{ReadableDatabase, ReadableTableMetadata, TableHandle};
    let db = redb::Database::open(store.join("store.redb")).unwrap();
    let txn = db.begin_read().unwrap();
    let mut out: Vec<(String, u64)> = txn
        .list_tables()
        .unwrap()
        .map(|handle| {
            let name = handle.name().to_owned();
            let stats = txn.open_untyped_table(handle).unwrap().stats().unwrap();
            let bytes = stats.stored_bytes() + stats.metadata_bytes() + stats.fragmented_bytes();
            (name, bytes)
        })
        .collect();
    out.sort_by_key(|(_, bytes)| std::cmp::Reverse(*bytes));
    out
}
