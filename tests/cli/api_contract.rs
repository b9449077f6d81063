//! `docs/openapi.yaml` against a running `cairn serve`: schemathesis (PyPI, installed into a
//! virtualenv under the target directory on first use) generates requests from the file,
//! valid and invalid, and checks every answer with all its checks: no 5xx, every status
//! and body as the file documents, invalid requests refused, valid ones accepted (refused
//! with 400 never; 404, 409 and 422 name what the command cannot do, see
//! `tests/api/schemathesis.toml`). No failure is filtered out.
//!
//! The server runs on a temp store with two worktrees, so verbs succeed too. Generated
//! paths are confined to a sandbox directory inside the temp dir by `tests/api/cairn_hooks.py`
//! (just before each request is sent): an absolute `cwd` becomes the sandbox, path
//! arguments become names inside it, command lines lose every `/` and `..`, and commands
//! that reach further (a remote, `run`, `mount`) are renamed. The server's cwd and HOME are
//! inside the temp dir too, and the store is outside the sandbox. So nothing generated can
//! name `/` or any directory outside the temp dir, which is what makes the test safe to run
//! as root.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cairn_client::Client;

use crate::support::{Env, python_venv};

/// The schemathesis version the test is written against (runs on Python 3.11).
const SCHEMATHESIS: &str = "schemathesis==4.32.5";
/// Fixed, so a failure reproduces: `tests/api/contract.py` prints the command line.
const SEED: &str = "1";
/// Test cases per operation and phase: about 1,700 requests in all, under a minute.
const MAX_EXAMPLES: &str = "50";

/// The server, and the folder whose mounts it made (schemathesis calls `/v1/mount`).
struct Server(Child, std::path::PathBuf);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        // A killed server leaves its mounts dead ("not connected"): detach them, so no
        // test run leaves mounts behind on the machine.
        let table = std::fs::read("/proc/self/mountinfo").unwrap_or_default();
        for line in table.split(|b| *b == b'\n') {
            let Some(field) = line.split(|b| *b == b' ').nth(4) else {
                continue;
            };
            let point = unescaped(field);
            if Path::new(&point).starts_with(&self.1) {
                let _ = Command::new("umount").arg("-l").arg(&point).output();
            }
        }
    }
}

/// A mount point as mountinfo writes it, its octal escapes (`\\040` for a space, `\\012`
/// for a newline: schemathesis makes such names) undone.
fn unescaped(field: &[u8]) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStringExt as _;
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field
            .get(i + 1..i + 4)
            .filter(|d| field[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    std::ffi::OsString::from_vec(out)
}

/// The report's sections headed `names` (`=== ERRORS ===`), each up to the next heading.
fn sections(report: &str, names: &[&str]) -> String {
    let heading = |line: &str| line.starts_with("===") && line.trim_end().ends_with("===");
    let mut out = String::new();
    let mut inside = false;
    for line in report.lines() {
        if heading(line) {
            inside = names.iter().any(|n| line.contains(&format!(" {n} ")));
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn the_server_does_what_its_openapi_file_says() {
    let env = Env::new();
    let python = python_venv("schemathesis-venv", SCHEMATHESIS);
    let sandbox = env.path().join("sandbox");
    let wt = sandbox.join("wt");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::create_dir_all(env.path().join("home")).unwrap();
    // The file's examples name `wt`, the ref `base` and this blob ("hello\n").
    std::fs::write(wt.join("a.txt"), "hello\n").unwrap();
    let (code, v) = env.json(&["checkpoint", wt.as_str(), "--name", "base"]);
    assert_eq!(code, 0, "{v}");
    let base = v["snapshot"].as_str().unwrap().to_owned();
    let (code, v) = env.json(&["ref", "set", "base", &base]);
    assert_eq!(code, 0, "{v}");
    let (code, v) = env.json(&["checkout", "base", sandbox.join("wt2").as_str()]);
    assert_eq!(code, 0, "{v}");

    let mut serve = env.command();
    serve
        .current_dir(&sandbox)
        .arg("--store")
        .arg(env.store().as_str())
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(env.path().join("serve.log")).unwrap());
    let _server = Server(serve.spawn().unwrap(), env.path().as_std_path().to_owned());
    let socket = Client::socket_of(&env.store());
    let started = Instant::now();
    while Client::connect(&socket).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "cairn serve did not come up on {socket}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests");
    let runs_in = env.path().join("schemathesis");
    std::fs::create_dir_all(&runs_in).unwrap();
    let out = Command::new(python)
        .arg(tests.join("api/contract.py"))
        .arg(socket.as_str())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.yaml"))
        .arg(sandbox.as_str())
        .arg(SEED)
        .arg(MAX_EXAMPLES)
        .current_dir(&runs_in)
        .env("HOME", env.path().join("home").as_str())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let server_log = std::fs::read_to_string(env.path().join("serve.log")).unwrap_or_default();
    // What went wrong comes again last: a CI log keeps a failure's head and tail only.
    assert!(
        out.status.success(),
        "schemathesis found the server and docs/openapi.yaml disagreeing:\n{report}\n{}\nthe server's stderr:\n{server_log}\nwhat failed, again:\n{}",
        String::from_utf8_lossy(&out.stderr),
        sections(&report, &["ERRORS", "FAILURES"])
    );
    // It ran: the summary counts the requests, and every one passed.
    let summary = report
        .lines()
        .find(|l| l.contains(" generated, "))
        .unwrap_or_else(|| panic!("no summary in:\n{report}"));
    eprintln!("schemathesis: {}", summary.trim());
    let generated: u64 = summary.split_whitespace().next().unwrap().parse().unwrap();
    assert!(generated >= 500, "{summary}");
    assert!(
        summary.contains(&format!("{generated} passed")),
        "{summary}"
    );

    // Every worktree the generated requests registered is inside the sandbox.
    let (code, v) = env.json(&["worktree", "list"]);
    assert_eq!(code, 0, "{v}");
    for w in v["worktrees"].as_array().unwrap() {
        let root = w["path"].as_str().unwrap();
        assert!(
            Path::new(root).starts_with(sandbox.as_std_path()),
            "{root} is outside the sandbox"
        );
    }
}
