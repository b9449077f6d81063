//! `cairn mcp` driven by a real MCP client: the official Python SDK (`mcp` from PyPI),
//! installed into a virtualenv under the target directory on first use.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{Env, Server, python_venv};

/// The MCP SDK version the test is written against.
const MCP_SDK: &str = "mcp==2.3.0";

fn python_with_mcp() -> PathBuf {
    python_venv("mcp-venv", MCP_SDK)
}

#[test]
fn the_python_mcp_sdk_lists_and_calls_cairn_tools() {
    let env = Env::new();
    let python = python_with_mcp();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/client.py");
    let work = env.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let remote = format!("file://{}", env.path().join("remote"));
    let added = env.cairn(&["remote", "add", "origin", &remote]);
    assert!(added.status.success(), "{}", crate::support::stderr(&added));
    let out = Command::new(python)
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_cairn"))
        .arg(env.store().as_str())
        .arg(work.as_str())
        .env_remove("CAIRN_STORE")
        .env("HOME", env.path().join("home").as_str())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "MCP client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(summary["ok"], true);
    assert_eq!(summary["tools"].as_array().unwrap().len(), 32);
}

/// `cairn mcp` spoken to line by line, as a client that sends what the SDK would not: lines
/// that are not messages, calls at once, cancellations.
pub(crate) struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
    /// Messages read while waiting for another.
    read: Vec<serde_json::Value>,
}

impl Mcp {
    /// `cairn mcp` on the env's store, with `vars` set, initialized.
    pub(crate) fn start(env: &Env, vars: &[(&str, &str)]) -> Mcp {
        let mut child = env
            .command()
            .args(["--store", env.store().as_str(), "mcp"])
            .envs(vars.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line).unwrap_or(serde_json::Value::String(line));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let mut mcp = Mcp {
            child,
            stdin,
            lines,
            read: Vec::new(),
        };
        mcp.send(&serde_json::json!({
            "jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": { "name": "cairn-test", "version": "1" },
            },
        }));
        let init = mcp.answer(&serde_json::json!("init"), Duration::from_secs(30));
        assert!(init.get("result").is_some(), "{init}");
        mcp.send(&serde_json::json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        mcp
    }

    fn send_raw(&mut self, line: &[u8]) {
        use std::io::Write;
        self.stdin.write_all(line).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn send(&mut self, message: &serde_json::Value) {
        self.send_raw(&serde_json::to_vec(message).unwrap());
    }

    pub(crate) fn call(&mut self, id: u64, tool: &str, arguments: serde_json::Value) {
        self.send(&serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": tool, "arguments": arguments },
        }));
    }

    fn cancel(&mut self, id: u64) {
        self.send(&serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": { "requestId": id, "reason": "the agent changed its mind" },
        }));
    }

    /// The first message read (or read already) that `matches`, within `wait`.
    fn next(
        &mut self,
        wait: Duration,
        matches: impl Fn(&serde_json::Value) -> bool,
    ) -> Option<serde_json::Value> {
        if let Some(at) = self.read.iter().position(&matches) {
            return Some(self.read.remove(at));
        }
        let until = Instant::now() + wait;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(v) if matches(&v) => return Some(v),
                Ok(v) => self.read.push(v),
                Err(_) => break,
            }
        }
        None
    }

    /// The answer to request `id`.
    fn answer(&mut self, id: &serde_json::Value, wait: Duration) -> serde_json::Value {
        self.next(wait, |v| v.get("id") == Some(id))
            .unwrap_or_else(|| panic!("no answer to request {id} within {wait:?}"))
    }

    /// The tool's JSON object and whether it is a tool error.
    pub(crate) fn tool_answer(&mut self, id: u64, wait: Duration) -> (bool, serde_json::Value) {
        let answer = self.answer(&serde_json::json!(id), wait);
        let result = &answer["result"];
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        let body = serde_json::from_str(text).unwrap_or(serde_json::Value::String(text.into()));
        (result["isError"] == true, body)
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// JSON has no option syntax, so a value starting with '-' is that value on every face.
/// `/v1/{verb}` and the MCP tools refused it as a positional ("must not start with '-'")
/// while `/v1/call` and the command line (after `--`) took it: the same request meant
/// two things.
#[test]
fn a_value_starting_with_a_dash_means_the_same_on_every_face() {
    let env = Env::new();
    let wt = env.path().join("-wt");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::write(wt.join("a.txt"), "a\n").unwrap();
    assert_eq!(env.json(&["onboard", wt.as_str()]).0, 0);
    std::fs::write(wt.join("a.txt"), "b\n").unwrap();
    std::fs::write(wt.join("new.txt"), "n\n").unwrap();

    let (code, cli) = env.json(&["status", "--", "-wt"]);
    assert_eq!(code, 0, "{cli}");
    let server = Server::start(&env);
    let client = server.client();
    let (status, route) = client
        .call(
            "status",
            &serde_json::json!({ "worktree": "-wt", "cwd": env.path() }),
        )
        .unwrap();
    assert_eq!(status, 200, "{route}");
    let (status, call) = client
        .post_json(
            "/v1/call",
            &serde_json::json!({
                "cwd": env.path(),
                "request": { "verb": "status", "args": { "worktree": "-wt" } },
            }),
        )
        .unwrap();
    assert_eq!(status, 200, "{call}");
    let mut mcp = Mcp::start(&env, &[]);
    mcp.call(1, "status", serde_json::json!({ "worktree": "-wt" }));
    let (is_error, tool) = mcp.tool_answer(1, Duration::from_secs(30));
    assert!(!is_error, "{tool}");

    assert_eq!(route["worktree"], wt.as_str(), "{route}");
    let paths = |v: &serde_json::Value, kind: &str| -> Vec<String> {
        v[kind]
            .as_array()
            .unwrap_or_else(|| panic!("{kind} in {v}"))
            .iter()
            .map(|e| e["path"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(paths(&route, "added"), ["new.txt"], "{route}");
    assert_eq!(paths(&route, "modified"), ["a.txt"], "{route}");
    assert_eq!(call["outcome"]["outcome"], route, "/v1/call");
    assert_eq!(tool, route, "MCP");
    assert_eq!(cli, route, "the command line");
}

fn error_code(v: &serde_json::Value) -> Option<i64> {
    v.get("error")?.get("code")?.as_i64()
}

/// rmcp's stdio transport dropped a line over its size limit, and one that is not JSON,
/// in silence (the client waits for ever), and answered a `tools/call` whose params do not
/// fit with -32600, not -32602. Each now gets its JSON-RPC error, and the session goes on.
#[test]
fn lines_that_are_no_request_get_json_rpc_errors() {
    let env = Env::new();
    let wt = env.path().join("wt");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::write(wt.join("a.txt"), "a\n").unwrap();
    assert_eq!(env.json(&["onboard", wt.as_str()]).0, 0);
    let mut mcp = Mcp::start(&env, &[]);
    let wait = Duration::from_secs(30);

    mcp.send_raw(b"this is not JSON");
    let parse = mcp
        .next(wait, |v| error_code(v) == Some(-32700))
        .expect("a parse error");
    assert!(
        parse.get("id").is_none_or(serde_json::Value::is_null),
        "{parse}"
    );

    mcp.send_raw(br#"{"hello": "world"}"#);
    mcp.next(wait, |v| error_code(v) == Some(-32600))
        .expect("an invalid request");
    mcp.send_raw(br#"{"jsonrpc": "2.0", "id": {"an": "object"}, "method": "tools/list"}"#);
    mcp.next(wait, |v| error_code(v) == Some(-32600))
        .expect("an invalid request: an id is a number or a string");

    for (id, params) in [
        (7, serde_json::json!({ "name": 5 })),
        (
            8,
            serde_json::json!({ "name": "status", "arguments": [1, 2] }),
        ),
        (9, serde_json::json!("status")),
    ] {
        mcp.send(&serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params,
        }));
        let answer = mcp.answer(&serde_json::json!(id), wait);
        assert_eq!(error_code(&answer), Some(-32602), "{params}: {answer}");
    }

    // Over the line limit (16 MiB): refused, not buffered, and the next line is read.
    let mut long = br#"{"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "snapshot", "arguments": {"worktree": "wt", "message": ""#.to_vec();
    long.resize(17 << 20, b'x');
    long.extend_from_slice(br#""}}}"#);
    mcp.send_raw(&long);
    let too_long = mcp
        .next(wait, |v| error_code(v) == Some(-32600))
        .expect("an invalid request for the long line");
    assert!(
        too_long.get("id").is_none_or(serde_json::Value::is_null),
        "{too_long}"
    );

    // A 10 MB message fits a line but not the argument's limit: a tool error naming it,
    // and nothing stored (it once grew the store by 33 MB).
    std::fs::write(wt.join("a.txt"), "b\n").unwrap();
    let store_file = env.store().join("store.redb");
    let before = std::fs::metadata(&store_file).unwrap().len();
    mcp.call(
        11,
        "snapshot",
        serde_json::json!({ "worktree": wt, "message": "m".repeat(10 << 20) }),
    );
    let (is_error, body) = mcp.tool_answer(11, wait);
    assert!(is_error, "{body}");
    assert_eq!(body["error"]["code"], "too_large", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("message"),
        "{body}"
    );
    assert_eq!(std::fs::metadata(&store_file).unwrap().len(), before);

    mcp.send(&serde_json::json!({ "jsonrpc": "2.0", "id": 12, "method": "tools/list" }));
    let listed = mcp.answer(&serde_json::json!(12), wait);
    assert!(
        listed["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{listed}"
    );
    assert!(
        mcp.read
            .iter()
            .all(|v| v.get("id") != Some(&serde_json::json!(10))),
        "the long line was not taken for a call: {:?}",
        mcp.read
    );
}

/// Calls in one `cairn mcp` each opened the store, so calls at once contended for its
/// lock: with no wait allowed, all but one failed `store_busy` ("held by another
/// process"), reads included. They now share one engine, as `cairn serve`'s requests do;
/// a read while no write holds the store opens it read-only (so as not to write its file),
/// and a write waits for such reads.
#[test]
fn calls_at_once_share_the_store() {
    let env = Env::new();
    let worktrees: Vec<_> = (0..3)
        .map(|i| {
            let wt = env.path().join(format!("wt{i}"));
            for f in 0..200 {
                let dir = wt.join(format!("d{}", f % 10));
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join(format!("f{f}.txt")), format!("{i} {f}\n")).unwrap();
            }
            let (code, v) = env.json(&["checkpoint", wt.as_str()]);
            assert_eq!(code, 0, "{v}");
            wt
        })
        .collect();
    let mut mcp = Mcp::start(&env, &[("CAIRN_LOCK_TIMEOUT", "0")]);
    for round in 0..4 {
        for wt in &worktrees {
            std::fs::write(wt.join("d0/f0.txt"), format!("round {round}\n")).unwrap();
        }
        let mut calls = Vec::new();
        for (i, wt) in worktrees.iter().cycle().take(12).enumerate() {
            let id = (round * 100 + i) as u64;
            let (tool, args) = match i % 4 {
                0 => ("snapshot", serde_json::json!({ "worktree": wt })),
                1 => ("status", serde_json::json!({ "worktree": wt })),
                2 => ("log", serde_json::json!({ "target": wt })),
                _ => ("review", serde_json::json!({ "dir": wt })),
            };
            mcp.call(id, tool, args);
            calls.push((id, tool));
        }
        for (id, tool) in calls {
            let (is_error, body) = mcp.tool_answer(id, Duration::from_secs(60));
            assert!(!is_error, "{tool} (round {round}): {body}");
        }
    }
    assert_let_go(&env);
}

/// Calls at once on a store not made yet each opened it themselves, one making it while
/// the others found it held: with no wait allowed they failed `store_busy` ("held by
/// another process", this one). One call now makes it while the others wait, then they
/// share it.
#[test]
fn calls_at_once_on_a_store_not_made_yet_wait_for_the_one_making_it() {
    let env = Env::new();
    let mut mcp = Mcp::start(&env, &[("CAIRN_LOCK_TIMEOUT", "0")]);
    let calls = 6;
    for i in 0..calls {
        let wt = env.path().join(format!("wt{i}"));
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join("a.txt"), format!("{i}\n")).unwrap();
        mcp.call(i, "checkpoint", serde_json::json!({ "dir": wt }));
    }
    for i in 0..calls {
        let (is_error, body) = mcp.tool_answer(i, Duration::from_secs(60));
        assert!(!is_error, "checkpoint {i}: {body}");
    }
    assert_let_go(&env);
}

/// Between calls `cairn mcp` has the store closed: another process can have it at once.
fn assert_let_go(env: &Env) {
    let out = env
        .command()
        .env("CAIRN_LOCK_TIMEOUT", "0")
        .args(["--store", env.store().as_str(), "fsck"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::support::stderr(&out)
    );
}

/// A `rollback` cancelled while it waited for the store ran once the store was free,
/// writing over the edit the agent made after cancelling it, and was never answered. A call
/// cancelled before it starts now never starts.
#[test]
fn a_call_cancelled_while_it_waits_for_the_store_never_runs() {
    let env = Env::new();
    let wt = env.path().join("wt");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::write(wt.join("a.txt"), "first\n").unwrap();
    let (code, v) = env.json(&["checkpoint", wt.as_str(), "--name", "start"]);
    assert_eq!(code, 0, "{v}");
    std::fs::write(wt.join("a.txt"), "second\n").unwrap();
    assert_eq!(env.json(&["snapshot", wt.as_str()]).0, 0);
    let mut mcp = Mcp::start(&env, &[]);

    // Another process holds the store.
    let held = std::fs::File::open(env.store().join("store.redb")).unwrap();
    held.lock().unwrap();
    mcp.call(
        1,
        "rollback",
        serde_json::json!({ "worktree": wt, "snapshot": "start" }),
    );
    std::thread::sleep(Duration::from_millis(500));
    mcp.cancel(1);
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(wt.join("a.txt"), "the agent's edit\n").unwrap();
    held.unlock().unwrap();
    drop(held);

    // The server goes on: a later call runs, and the cancelled one never did.
    mcp.call(2, "status", serde_json::json!({ "worktree": wt }));
    let (is_error, body) = mcp.tool_answer(2, Duration::from_secs(60));
    assert!(!is_error, "{body}");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        std::fs::read_to_string(wt.join("a.txt")).unwrap(),
        "the agent's edit\n"
    );
    let (code, ops) = env.json(&["op", "log", wt.as_str()]);
    assert_eq!(code, 0, "{ops}");
    assert!(!ops.to_string().contains("rollback"), "{ops}");
    assert!(
        mcp.next(Duration::from_millis(200), |v| v.get("id")
            == Some(&serde_json::json!(1)))
            .is_none(),
        "a call cancelled before it started is not answered"
    );
}

/// A call cancelled once it has started finishes (what it changes is journaled and whole),
/// so it must answer: rmcp dropped the answer of every cancelled call.
#[test]
fn a_call_cancelled_after_it_started_finishes_and_answers() {
    let env = Env::new();
    let wt = env.path().join("wt");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::write(wt.join("a.txt"), "a\n").unwrap();
    let (code, v) = env.json(&["checkpoint", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    let snap = v["snapshot"].as_str().unwrap().to_owned();
    let remote = env.path().join("remote");
    let url = format!("file://{remote}");
    let (code, v) = env.json(&["remote", "add", "origin", &url]);
    assert_eq!(code, 0, "{v}");
    // The remote's marker becomes a FIFO: a push reading it waits until it is opened for
    // writing, so the test knows the call has started and holds it there.
    let marker = remote.join("cairn-remote");
    std::fs::remove_file(&marker).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&marker)
        .status()
        .unwrap();
    assert!(made.success());
    let mut mcp = Mcp::start(&env, &[]);

    mcp.call(1, "push", serde_json::json!({ "snapshots": [snap] }));
    let (tx, opened) = std::sync::mpsc::channel();
    let fifo = marker.clone();
    std::thread::spawn(move || {
        let writer = std::fs::OpenOptions::new().write(true).open(&fifo);
        let _ = tx.send(writer);
    });
    let writer = match opened.recv_timeout(Duration::from_secs(60)) {
        Ok(writer) => writer.unwrap(),
        Err(_) => {
            // Let the writer's open return, so the thread ends.
            let _ = std::fs::File::open(&marker);
            panic!("the push never read the remote's marker")
        }
    };
    mcp.cancel(1);
    std::thread::sleep(Duration::from_millis(300));
    drop(writer);
    // It answers with what the push came to: it read the marker as the FIFO gave it
    // (nothing), and refused the remote, naming the file.
    let (is_error, body) = mcp.tool_answer(1, Duration::from_secs(60));
    assert!(is_error, "{body}");
    assert_eq!(body["error"]["code"], "remote_format", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cairn-remote"),
        "{body}"
    );
}

/// A read runs offline first, the store opened read-only; one that needs what only a
/// remote has runs again as a write does, and fetches it.
#[test]
fn a_read_of_a_snapshot_only_a_remote_has_fetches_it() {
    let theirs = Env::new();
    let wt = theirs.path().join("wt");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::write(wt.join("a.txt"), "theirs\n").unwrap();
    let (code, v) = theirs.json(&["checkpoint", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    let snap = v["snapshot"].as_str().unwrap().to_owned();
    let url = format!("file://{}", theirs.path().join("remote"));
    let (code, v) = theirs.json(&["remote", "add", "origin", &url]);
    assert_eq!(code, 0, "{v}");
    let (code, v) = theirs.json(&["push", &snap]);
    assert_eq!(code, 0, "{v}");

    let env = Env::new();
    let (code, v) = env.json(&["remote", "add", "origin", &url]);
    assert_eq!(code, 0, "{v}");
    let mut mcp = Mcp::start(&env, &[]);
    mcp.call(1, "log", serde_json::json!({ "target": snap }));
    let (is_error, body) = mcp.tool_answer(1, Duration::from_secs(60));
    assert!(!is_error, "{body}");
    assert_eq!(body["snapshots"][0]["id"], snap.as_str(), "{body}");
    let (code, v) = env.json(&["--offline", "show", &format!("{snap}:a.txt")]);
    assert_eq!(code, 0, "the snapshot was not fetched: {v}");
}
