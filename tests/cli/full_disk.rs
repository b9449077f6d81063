//! A full file system, under the store or under a worktree: the error names the store or the
//! path, reads go on working, and a failed write leaves nothing behind (no space, no
//! half-registered worktree, no half-applied rollback).

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::process::Command;

use camino::{Utf8Path, Utf8PathBuf};

use crate::support::{Env, stderr};

/// A tmpfs of a fixed size, unmounted when dropped (also when a test fails).
struct Tmpfs {
    dir: Utf8PathBuf,
}

impl Tmpfs {
    /// Mounts one at `dir`; `None`, with the reason printed, where mounting is impossible.
    fn mount(dir: Utf8PathBuf, megabytes: u32) -> Option<Tmpfs> {
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={megabytes}m"), "tmpfs"])
            .arg(dir.as_str())
            .output();
        match out {
            Ok(out) if out.status.success() => Some(Tmpfs { dir }),
            Ok(out) => {
                eprintln!(
                    "SKIPPED: cannot mount a tmpfs (needs root): {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: cannot run mount: {e}");
                None
            }
        }
    }

    /// Fills what is left of it with one file, returned for removal.
    fn fill(&self) -> Utf8PathBuf {
        let path = self.dir.join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let chunk = vec![0x5au8; 64 << 10];
        while file.write_all(&chunk).is_ok() {}
        // Whatever a partial chunk could not take, byte by byte.
        while file.write_all(&[0x5a]).is_ok() {}
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(self.dir.as_str())
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.as_str())
                .status();
        }
    }
}

/// Incompressible bytes.
fn noise(seed: &str, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    blake3::Hasher::new()
        .update(seed.as_bytes())
        .finalize_xof()
        .fill(&mut out);
    out
}

/// Bytes the file takes on disk (not its length: redb's file is sparse).
fn allocated(path: &Utf8Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

fn error_of(out: &std::process::Output) -> (i32, serde_json::Value) {
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {text:?} {}", stderr(out)));
    (out.status.code().unwrap(), v["error"].clone())
}

fn json_of(env: &Env, store: &Utf8Path, args: &[&str]) -> std::process::Output {
    let mut cmd = env.command();
    cmd.args(["--json", "--store", store.as_str()]).args(args);
    cmd.output().unwrap()
}

#[test]
fn a_full_store_file_system_names_the_store_gives_the_space_back_and_still_reads() {
    let env = Env::new();
    let Some(fs) = Tmpfs::mount(env.path().join("fs"), 64) else {
        return;
    };
    let store = fs.dir.join("store");
    let small = env.path().join("small");
    std::fs::create_dir_all(&small).unwrap();
    std::fs::write(small.join("a.txt"), "alpha\n").unwrap();
    let out = json_of(&env, &store, &["onboard", small.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let snap = v["snapshot"].as_str().unwrap().to_owned();
    let db = store.join(cas::DATABASE_FILE);
    let (len_before, used_before) = (std::fs::metadata(&db).unwrap().len(), allocated(&db));

    // 90 MB that does not compress, onto 64 MB.
    let big = env.path().join("big");
    std::fs::create_dir_all(&big).unwrap();
    for i in 0..45 {
        std::fs::write(
            big.join(format!("f{i}.bin")),
            noise(&format!("f{i}"), 2 << 20),
        )
        .unwrap();
    }
    let out = json_of(&env, &store, &["onboard", big.as_str()]);
    let (code, error) = error_of(&out);
    assert_eq!(code, 3, "{error}");
    assert_eq!(error["code"], "no_space", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains(store.as_str()),
        "names the store: {error}"
    );
    // What the failed write took is given back.
    let (len_after, used_after) = (std::fs::metadata(&db).unwrap().len(), allocated(&db));
    assert!(
        used_after <= used_before + (1 << 20),
        "store.redb takes {used_after} bytes after the failed onboard, {used_before} before"
    );
    assert!(
        len_after <= len_before + (4 << 20),
        "store.redb is {len_after} bytes long after the failed onboard, {len_before} before"
    );
    let out = json_of(&env, &store, &["worktree", "list"]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(big.as_str()),
        "the failed onboard registered nothing"
    );
    let out = json_of(&env, &store, &["gc"]);
    assert_eq!(out.status.code(), Some(0), "gc works: {}", stderr(&out));

    // With the file system full, reads work, and a write fails naming the store.
    let filler = fs.fill();
    let used_full = allocated(&db);
    std::fs::write(small.join("b.txt"), "beta\n").unwrap();
    let out = json_of(&env, &store, &["snapshot", small.as_str()]);
    let (code, error) = error_of(&out);
    assert_eq!((code, &error["code"]), (3, &"no_space".into()), "{error}");
    assert!(error["message"].as_str().unwrap().contains(store.as_str()));
    assert!(
        allocated(&db) <= used_full,
        "the failed snapshot took nothing"
    );
    for args in [
        vec!["show", &snap],
        vec!["log", &snap],
        vec!["diff", &snap, small.as_str()],
        vec!["status", small.as_str()],
        vec!["fsck"],
    ] {
        let out = json_of(&env, &store, &args);
        assert_eq!(out.status.code(), Some(0), "{args:?} on a full disk: {}", {
            String::from_utf8_lossy(&out.stdout)
        });
    }
    std::fs::remove_file(filler).unwrap();
    let out = json_of(&env, &store, &["snapshot", small.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// `cairn serve` on `store`, killed when dropped.
struct Server(std::process::Child);

impl Server {
    fn start(env: &Env, store: &Utf8Path) -> Server {
        let child = env
            .command()
            .args(["--store", store.as_str(), "serve"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let server = Server(child);
        let socket = cairn_client::Client::socket_of(store);
        let started = std::time::Instant::now();
        while cairn_client::Client::connect(&socket).is_err() {
            assert!(
                started.elapsed().as_secs() < 20,
                "cairn serve did not come up"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        server
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_server_goes_on_serving_after_a_write_ran_out_of_space() {
    let env = Env::new();
    let Some(fs) = Tmpfs::mount(env.path().join("fs"), 32) else {
        return;
    };
    let store = fs.dir.join("store");
    let small = env.path().join("small");
    std::fs::create_dir_all(&small).unwrap();
    std::fs::write(small.join("a.txt"), "alpha\n").unwrap();
    let out = json_of(&env, &store, &["onboard", small.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let db = store.join(cas::DATABASE_FILE);
    let used_before = allocated(&db);
    let big = env.path().join("big");
    std::fs::create_dir_all(&big).unwrap();
    for i in 0..20 {
        std::fs::write(
            big.join(format!("f{i}.bin")),
            noise(&format!("s{i}"), 2 << 20),
        )
        .unwrap();
    }
    let _server = Server::start(&env, &store);
    // No waiting for the store: a command not run by the server fails at once.
    let through_server = |args: &[&str]| {
        let mut cmd = env.command();
        cmd.env("CAIRN_LOCK_TIMEOUT", "0")
            .args(["--json", "--store", store.as_str()])
            .args(args);
        cmd.output().unwrap()
    };
    let (code, error) = error_of(&through_server(&["onboard", big.as_str()]));
    assert_eq!((code, &error["code"]), (3, &"no_space".into()), "{error}");
    for args in [vec!["log", small.as_str()], vec!["status", small.as_str()]] {
        let out = through_server(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", {
            String::from_utf8_lossy(&out.stdout)
        });
    }
    assert!(
        allocated(&db) <= used_before + (1 << 20),
        "the server gave back what the failed onboard took"
    );
    std::fs::write(small.join("b.txt"), "beta\n").unwrap();
    let out = through_server(&["snapshot", small.as_str()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn checkout_into_a_full_file_system_names_the_path_and_registers_nothing() {
    let env = Env::new();
    let Some(fs) = Tmpfs::mount(env.path().join("fs"), 16) else {
        return;
    };
    let (a, b, c) = (
        noise("a", 6 << 20),
        noise("b", 6 << 20),
        noise("c", 6 << 20),
    );
    let big = env.commit(
        &[("a.bin", &a), ("b.bin", &b), ("c.bin", &c)],
        vec![],
        "big",
    );
    let small = env.commit(&[("s.txt", b"small\n")], vec![], "small");
    let dest = fs.dir.join("w");
    let out = json_of(
        &env,
        &env.store(),
        &["checkout", &big.to_hex(), dest.as_str()],
    );
    let (code, error) = error_of(&out);
    assert_eq!(code, 3, "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{dest}/")),
        "names the file it could not write: {error}"
    );
    assert!(
        !dest.exists() || std::fs::read_dir(&dest).unwrap().next().is_none(),
        "nothing is left in {dest}"
    );
    let out = json_of(&env, &env.store(), &["worktree", "list"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains(dest.as_str()));
    let out = json_of(&env, &env.store(), &["status", dest.as_str()]);
    assert_eq!(error_of(&out).1["code"], "not_a_worktree");
    assert_eq!(
        json_of(&env, &env.store(), &["fsck"]).status.code(),
        Some(0)
    );
    let out = json_of(
        &env,
        &env.store(),
        &["checkout", &small.to_hex(), dest.as_str()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read(dest.join("s.txt")).unwrap(), b"small\n");
}

/// Every file below `root`, with its bytes.
fn files_of(root: &Utf8Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let path = Utf8PathBuf::from_path_buf(e.path()).unwrap();
            if e.file_type().unwrap().is_dir() {
                dirs.push(path);
            } else {
                let rel = path.strip_prefix(root).unwrap().to_string();
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_rollback_that_runs_out_of_space_is_exactly_before_or_after_once_recovered() {
    let env = Env::new();
    let Some(fs) = Tmpfs::mount(env.path().join("fs"), 16) else {
        return;
    };
    let before_files: Vec<(&str, &[u8])> = vec![("a.txt", b"one\n"), ("b.txt", b"two\n")];
    let before = env.commit(&before_files, vec![], "small");
    let (x, y, z) = (
        noise("x", 6 << 20),
        noise("y", 6 << 20),
        noise("z", 6 << 20),
    );
    let after_files: Vec<(&str, &[u8])> = vec![
        ("a.txt", b"changed\n"),
        ("b.txt", b"two\n"),
        ("big/x.bin", &x),
        ("big/y.bin", &y),
        ("z.bin", &z),
    ];
    let after = env.commit(&after_files, vec![before], "big");
    let w = fs.dir.join("w");
    let out = json_of(
        &env,
        &env.store(),
        &["checkout", &before.to_hex(), w.as_str()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let out = json_of(
        &env,
        &env.store(),
        &["rollback", w.as_str(), &after.to_hex()],
    );
    let (code, error) = error_of(&out);
    assert_eq!(code, 3, "18 MB do not fit in 16: {error}");
    assert!(
        error["message"].as_str().unwrap().contains(w.as_str()),
        "{error}"
    );

    let out = json_of(&env, &env.store(), &["recover", w.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let expect = |files: &[(&str, &[u8])]| {
        let mut v: Vec<(String, Vec<u8>)> = files
            .iter()
            .map(|(p, c)| ((*p).to_owned(), c.to_vec()))
            .collect();
        v.sort();
        v
    };
    let found = files_of(&w);
    let head = if found == expect(&before_files) {
        before
    } else {
        assert!(
            found == expect(&after_files),
            "the worktree is neither before nor after: {:?}",
            found.iter().map(|(p, _)| p).collect::<Vec<_>>()
        );
        after
    };
    let out = json_of(&env, &env.store(), &["status", w.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["head"],
        head.to_hex(),
        "the store agrees with the files: {v}"
    );
    for list in ["added", "modified", "removed"] {
        assert_eq!(v[list], serde_json::json!([]), "{v}");
    }
}
