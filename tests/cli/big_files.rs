//! Files larger than the memory any command may hold: a mount's reads, `push`, `pull` and a
//! fetch on demand each move them a chunk at a time, so peak memory stays under
//! [`BOUND`] whatever their size, and a file over 4 GiB goes out and comes back whole.
//!
//! The 1 GiB file is a counter pattern (every 4 KiB block starts with its number, the rest
//! zeros): no two chunks alike, yet it compresses to a few MB, so stores stay small. It is
//! written under `/dev/shm` where there is one, to spare the disk.

use std::io::{Read, Seek, SeekFrom, Write};
use std::process::{Command, Output};

use camino::{Utf8Path, Utf8PathBuf};

use crate::support::{Env, Server, stderr};

/// What a command may hold, whatever the size of the files it moves.
const BOUND: u64 = 100 << 20;
const GIB: u64 = 1 << 30;
const BLOCK: u64 = 4096;

/// The counter pattern's bytes at `offset..offset + buf.len()`.
fn counter_at(offset: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        let at = offset + i as u64;
        let within = at % BLOCK;
        *b = if within < 8 {
            (at / BLOCK).to_le_bytes()[within as usize]
        } else {
            0
        };
    }
}

/// A folder holding `big.bin` (`len` bytes of the counter pattern) and a small file.
fn project(env: &Env, len: u64) -> Utf8PathBuf {
    let dir = match tempfile::tempdir_in("/dev/shm") {
        Ok(d) => Utf8PathBuf::from_path_buf(d.keep()).unwrap(),
        Err(_) => env.path().join("proj-parent"),
    }
    .join("proj");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("small.txt"), "small\n").unwrap();
    let mut file = std::fs::File::create(dir.join("big.bin")).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < len {
        let n = buf.len().min((len - at) as usize);
        counter_at(at, &mut buf[..n]);
        file.write_all(&buf[..n]).unwrap();
        at += n as u64;
    }
    dir
}

/// Removes a project made under `/dev/shm` (the env's temp dir removes the other kind).
struct Cleanup(Utf8PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(parent) = self.0.parent()
            && parent.starts_with("/dev/shm")
        {
            let _ = std::fs::remove_dir_all(parent);
        }
    }
}

/// BLAKE3 of `len` bytes of the counter pattern: the big file's blob id.
fn counter_id(len: u64) -> String {
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < len {
        let n = buf.len().min((len - at) as usize);
        counter_at(at, &mut buf[..n]);
        hasher.update(&buf[..n]);
        at += n as u64;
    }
    hasher.finalize().to_hex().to_string()
}

/// `cairn args…` as the env runs it, under GNU time: its output and its peak resident
/// memory in bytes.
fn measured(env: &Env, args: &[&str]) -> (Output, u64) {
    let plain = env.command();
    let report = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new("/usr/bin/time");
    cmd.arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(report.path())
        .arg(plain.get_program())
        .arg("--store")
        .arg(env.store().as_str())
        .args(args);
    if let Some(dir) = plain.get_current_dir() {
        cmd.current_dir(dir);
    }
    for (key, value) in plain.get_envs() {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("/usr/bin/time (apt-get install time): {e}"));
    let kib: u64 = std::fs::read_to_string(report.path())
        .unwrap()
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak memory from GNU time: {}", stderr(&out)));
    (out, kib * 1024)
}

fn json_of(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn mib(bytes: u64) -> u64 {
    bytes >> 20
}

/// A process's peak resident memory (VmHWM), in bytes.
fn peak_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM");
    kib * 1024
}

/// Starts counting a process's peak memory anew.
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}

#[test]
fn reading_a_large_file_in_a_mount_holds_the_chunks_a_read_needs_not_the_file() {
    let env = Env::new();
    let proj = project(&env, GIB);
    let _cleanup = Cleanup(proj.clone());
    let (code, out) = env.json(&["onboard", proj.as_str()]);
    assert_eq!(code, 0, "{out}");
    let snap = out["snapshot"].as_str().unwrap().to_owned();
    let server = Server::start(&env);
    let pid = server.child.id();
    let m = env.path().join("m");
    let (code, out) = env.json(&["mount", &snap, m.as_str()]);
    assert_eq!(code, 0, "{out}");
    let unmount = || {
        let _ = env.cairn(&["unmount", m.as_str()]);
        let _ = Command::new("umount").args(["-l", m.as_str()]).output();
    };
    let result = std::panic::catch_unwind(|| {
        reset_peak(pid);
        let base = peak_of(pid);
        // One byte at the start, and a few far into the file.
        let head = Command::new("head")
            .args(["-c", "1", m.join("big.bin").as_str()])
            .output()
            .unwrap();
        assert_eq!(head.stdout, [0]);
        let mut file = std::fs::File::open(m.join("big.bin")).unwrap();
        for at in [GIB / 2 + 3, GIB - 5, 7 * BLOCK + 1] {
            let mut got = [0u8; 16];
            let mut expected = [0u8; 16];
            file.seek(SeekFrom::Start(at)).unwrap();
            let n = file.read(&mut got).unwrap();
            counter_at(at, &mut expected[..n]);
            assert_eq!(got[..n], expected[..n], "at {at}");
        }
        let after_small_reads = peak_of(pid);
        // All of it, in order, checked.
        file.seek(SeekFrom::Start(0)).unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let mut expected = vec![0u8; 1 << 20];
        let mut at = 0;
        loop {
            let n = file.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            counter_at(at, &mut expected[..n]);
            assert!(buf[..n] == expected[..n], "bytes at {at}");
            at += n as u64;
        }
        assert_eq!(at, GIB);
        let after_all = peak_of(pid);
        eprintln!(
            "mount server peak: {} MiB before, {} MiB after small reads, {} MiB after reading 1 GiB",
            mib(base),
            mib(after_small_reads),
            mib(after_all)
        );
        assert!(
            after_small_reads < BOUND && after_all < BOUND,
            "a 1 GiB file read through a mount raised the server to {} MiB ({} MiB after a few small reads)",
            mib(after_all),
            mib(after_small_reads)
        );
    });
    unmount();
    drop(server);
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// Two machines with remote `origin` at one folder: the first holds a snapshot of `file`.
struct Machines {
    a: Env,
    b: Env,
    snap: String,
}

fn two_machines(proj: &Utf8Path) -> Machines {
    let (a, b) = (Env::new(), Env::new());
    let (code, out) = a.json(&["onboard", proj.as_str()]);
    assert_eq!(code, 0, "{out}");
    let snap = out["snapshot"].as_str().unwrap().to_owned();
    let url = format!("file://{}", a.path().join("remote"));
    for env in [&a, &b] {
        let _ = env.cairn(&["init"]);
        let out = env.cairn(&["remote", "add", "origin", &url]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    Machines { a, b, snap }
}

/// The listing of `snap`'s root tree on `env`'s store names `blob` of `size` bytes, and
/// `fsck` finds every object whole (every byte of the blob checked against its id).
fn holds(env: &Env, snap: &str, blob: &str, size: u64) {
    let (code, listed) = env.json(&["show", snap]);
    assert_eq!(code, 0, "{listed}");
    let entries = listed["entries"].as_array().expect("a tree listing");
    assert!(
        entries
            .iter()
            .any(|e| e["id"] == blob && e["size"].as_u64() == Some(size)),
        "{listed}"
    );
    let out = env.cairn(&["fsck"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn push_and_pull_of_a_large_file_hold_a_bounded_part_of_it() {
    let scratch = Env::new();
    let proj = project(&scratch, GIB);
    let _cleanup = Cleanup(proj.clone());
    let m = two_machines(&proj);
    let (out, push_peak) = measured(&m.a, &["--json", "push", &m.snap]);
    let pushed = json_of(&out);
    assert_eq!(pushed["pushed"][0], m.snap.as_str(), "{pushed}");
    let (out, pull_peak) = measured(&m.b, &["--json", "pull", &m.snap]);
    let pulled = json_of(&out);
    assert_eq!(pulled["pulled"][0], m.snap.as_str(), "{pulled}");
    eprintln!(
        "1 GiB file: push peak {} MiB, pull peak {} MiB",
        mib(push_peak),
        mib(pull_peak)
    );
    holds(&m.b, &m.snap, &counter_id(GIB), GIB);
    assert!(
        push_peak < BOUND,
        "push of a 1 GiB file peaked at {} MiB",
        mib(push_peak)
    );
    assert!(
        pull_peak < BOUND,
        "pull of a 1 GiB file peaked at {} MiB",
        mib(pull_peak)
    );
}

#[test]
fn a_fetch_on_demand_of_a_large_file_holds_a_bounded_part_of_it() {
    let scratch = Env::new();
    let proj = project(&scratch, GIB);
    let _cleanup = Cleanup(proj.clone());
    let m = two_machines(&proj);
    let out = m.a.cairn(&["push", &m.snap]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The other store lacks the snapshot: `show` of its full id fetches it.
    let (out, peak) = measured(&m.b, &["--json", "show", &m.snap]);
    json_of(&out);
    eprintln!("1 GiB file fetched on demand: peak {} MiB", mib(peak));
    holds(&m.b, &m.snap, &counter_id(GIB), GIB);
    assert!(
        peak < BOUND,
        "a fetch on demand of a 1 GiB file peaked at {} MiB",
        mib(peak)
    );
}

/// 4.5 GiB, mostly a hole, with the counter pattern's bytes at a few places past 4 GiB:
/// a size or offset cut to 32 bits anywhere loses or moves them.
#[test]
fn a_file_over_4_gib_goes_out_and_comes_back_whole() {
    let scratch = Env::new();
    let proj = scratch.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let len = 4 * GIB + GIB / 2;
    let marks = [5, GIB + 1, 4 * GIB - 3, 4 * GIB + 7, len - 9];
    let mut file = std::fs::File::create(proj.join("huge.bin")).unwrap();
    file.set_len(len).unwrap();
    for at in marks {
        let mut bytes = [0u8; 8];
        counter_at(at, &mut bytes);
        bytes[0] ^= 0xa5;
        file.seek(SeekFrom::Start(at)).unwrap();
        file.write_all(&bytes).unwrap();
    }
    drop(file);
    let expected = {
        let mut hasher = blake3::Hasher::new();
        let mut f = std::fs::File::open(proj.join("huge.bin")).unwrap();
        std::io::copy(&mut f, &mut hasher).unwrap();
        hasher.finalize().to_hex().to_string()
    };
    let m = two_machines(&proj);
    let out = m.a.cairn(&["push", &m.snap]);
    assert!(out.status.success(), "push: {}", stderr(&out));
    let out = m.b.cairn(&["pull", &m.snap]);
    assert!(out.status.success(), "pull: {}", stderr(&out));
    holds(&m.b, &m.snap, &expected, len);
}

/// A capture of a mount holding a 1 GiB file written through it reads the file a chunk at a
/// time, outside the mount's lock: the server's peak stays under the bound, and the blob
/// stored is the file's.
#[test]
fn a_capture_of_a_mount_holding_a_large_file_holds_a_bounded_part_of_it() {
    let env = Env::new();
    let proj = env.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(proj.join("small.txt"), "small\n").unwrap();
    let (code, out) = env.json(&["onboard", proj.as_str()]);
    assert_eq!(code, 0, "{out}");
    let snap = out["snapshot"].as_str().unwrap().to_owned();
    let server = Server::start(&env);
    let pid = server.child.id();
    let m = env.path().join("m");
    let (code, out) = env.json(&["mount", &snap, m.as_str()]);
    assert_eq!(code, 0, "{out}");
    let unmount = || {
        let _ = env.cairn(&["unmount", m.as_str()]);
        let _ = Command::new("umount").args(["-l", m.as_str()]).output();
    };
    let result = std::panic::catch_unwind(|| {
        let mut file = std::fs::File::create(m.join("big.bin")).unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0;
        while at < GIB {
            counter_at(at, &mut buf);
            file.write_all(&buf).unwrap();
            at += buf.len() as u64;
        }
        drop(file);
        reset_peak(pid);
        let (code, out) = env.json(&["snapshot", m.as_str()]);
        assert_eq!(code, 0, "{out}");
        let peak = peak_of(pid);
        eprintln!("mount server peak while capturing 1 GiB: {} MiB", mib(peak));
        holds(
            &env,
            out["snapshot"].as_str().unwrap(),
            &counter_id(GIB),
            GIB,
        );
        assert!(
            peak < BOUND,
            "a capture of a mount holding a 1 GiB file raised the server to {} MiB",
            mib(peak)
        );
    });
    unmount();
    drop(server);
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}
