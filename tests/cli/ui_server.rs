//! `cairn ui`'s server, without a browser: it prints its URL at once, lets in only requests
//! with the token that name its own host and origin, answers the verbs as the command
//! line does (with a `cairn serve` of the store and without), tells of the store's changes
//! made by any process, binds the loopback address only, and stands up to bad requests and
//! clients.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use camino::Utf8PathBuf;
use serde_json::{Value, json};

use crate::support::{Env, Server, stderr};

/// A running `cairn ui --json`; killed when dropped.
pub(crate) struct Ui {
    child: Child,
    pub(crate) url: String,
    pub(crate) port: u16,
    pub(crate) token: String,
}

impl Ui {
    /// `cairn ui --json` with `args`, once it printed its URL (within 20 s).
    pub(crate) fn start(env: &Env, args: &[&str]) -> Ui {
        Ui::start_with(env, args, |_| {})
    }

    /// [`Ui::start`], its command changed by `edit` first (its environment).
    pub(crate) fn start_with(env: &Env, args: &[&str], edit: impl FnOnce(&mut Command)) -> Ui {
        let mut command = env.command();
        command
            .arg("--store")
            .arg(env.store().as_str())
            .args(["--json", "ui"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        edit(&mut command);
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("cairn ui printed no URL within 20 s");
        let printed: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line:?}"));
        let url = printed["url"].as_str().expect("a url").to_owned();
        let rest = url
            .strip_prefix("http://127.0.0.1:")
            .unwrap_or_else(|| panic!("{url}: not on 127.0.0.1"));
        let (port, token) = rest.split_once("/?token=").expect("a token in the url");
        assert_eq!(token.len(), 64, "32 bytes in hex: {token}");
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
        Ui {
            port: port.parse().unwrap(),
            token: token.to_owned(),
            url,
            child,
        }
    }

    pub(crate) fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `POST /v1/{verb}` with `body` and the token: status and JSON answer.
    fn verb(&self, verb: &str, body: &Value) -> (u16, Value) {
        let response = client()
            .post(format!("{}/v1/{verb}", self.base()))
            .header("X-Cairn-Token", &self.token)
            .json(body)
            .send()
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().unwrap())
    }

    /// SIGTERM, then its exit status (within 20 s).
    fn stop(mut self) -> std::process::ExitStatus {
        crate::support::terminate(&mut self.child, Duration::from_secs(20), "cairn ui")
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// A request sent as written (no client rewrites its path or headers): status, head and
/// body of the answer.
fn raw(port: u16, request: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    (status, head.to_owned(), body.to_owned())
}

/// A GET of `path` naming host `host`, with `extra` header lines.
fn get(port: u16, path: &str, host: &str, extra: &str) -> (u16, String, String) {
    raw(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"),
    )
}

/// A worktree with a checkpoint and a snapshot; returns it.
fn worktree(env: &Env) -> Utf8PathBuf {
    let wt = env.path().join("wt");
    std::fs::create_dir_all(wt.join("src")).unwrap();
    std::fs::write(wt.join("src/lib.rs"), "fn a() {}\n").unwrap();
    let out = env.cairn(&["checkpoint", wt.as_str(), "--name", "start"]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(wt.join("src/lib.rs"), "fn a() { changed }\n").unwrap();
    let out = env.cairn(&["snapshot", wt.as_str(), "-m", "second"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wt
}

/// Whether `head` has the header line `name: value` (name in any case).
fn has_header(head: &str, name: &str, value: &str) -> bool {
    head.lines().any(|l| {
        l.split_once(':')
            .is_some_and(|(n, v)| n.eq_ignore_ascii_case(name) && v.trim() == value)
    })
}

#[test]
fn only_requests_with_the_token_that_name_its_own_host_and_origin_get_in() {
    let env = Env::new();
    worktree(&env);
    let ui = Ui::start(&env, &[]);
    let port = ui.port;
    let host = format!("127.0.0.1:{port}");
    let token = ui.token.clone();

    // Without the token: a page saying what to open, and 401 for every data route. The
    // page's static files (code in the binary, no data) are served to its own host alone.
    let (status, head, body) = get(port, "/", &host, "");
    assert_eq!(status, 401, "{head}");
    assert!(body.contains("cairn ui"), "{body}");
    let (status, _, body) = get(port, "/v1/events", &host, "");
    assert_eq!(status, 401);
    assert_eq!(error_code(&body), "no_token", "{body}");
    let (status, head, _) = get(port, "/assets/app.js", &host, "");
    assert_eq!(status, 200);
    assert!(
        has_header(&head, "content-type", "text/javascript; charset=utf-8"),
        "{head}"
    );
    let other = format!("evil.example:{port}");
    let (status, _, body) = get(port, "/assets/app.js", &other, "");
    assert_eq!(status, 403, "{body}");
    let refused = client()
        .post(format!("{}/v1/worktree_list", ui.base()))
        .json(&json!({}))
        .send()
        .unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    // A wrong token, the right one's prefix, or the token in a cookie (no cookie proves
    // anything: a cookie of 127.0.0.1 goes to every port of it). The last digit changed,
    // whatever it was.
    let last = if token.ends_with('0') { '1' } else { '0' };
    let wrong = format!("{}{last}", &token[..63]);
    for extra in [
        format!("X-Cairn-Token: {wrong}\r\n"),
        format!("X-Cairn-Token: {}\r\n", &token[..32]),
        format!("Cookie: cairn_ui={token}\r\n"),
    ] {
        let (status, _, body) = get(port, "/v1/events", &host, &extra);
        assert_eq!(status, 401, "{extra}");
        assert_eq!(error_code(&body), "no_token");
    }
    let (status, _, _) = get(port, &format!("/?token={wrong}"), &host, "");
    assert_eq!(status, 401);

    // Another host's name (a DNS rebinding) is refused even with the token.
    for other in [
        "evil.example".to_owned(),
        format!("evil.example:{port}"),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        format!("127.0.0.1.evil.example:{port}"),
    ] {
        let (status, _, body) = get(port, &format!("/?token={token}"), &other, "");
        assert_eq!(status, 403, "{other}");
        assert_eq!(error_code(&body), "foreign_host", "{other}");
    }
    // So is a request of another site's page.
    let cross = client()
        .post(format!("{}/v1/worktree_list", ui.base()))
        .header("X-Cairn-Token", &token)
        .header("Origin", "http://evil.example")
        .json(&json!({}))
        .send()
        .unwrap();
    assert_eq!(cross.status().as_u16(), 403);
    assert_eq!(
        cross.json::<Value>().unwrap()["error"]["code"],
        "foreign_origin"
    );

    // The printed URL opens the page, and sets no cookie.
    let (status, head, body) = get(port, &format!("/?token={token}"), &host, "");
    assert_eq!(status, 200, "{head}");
    assert!(body.contains("<script"), "{body}");
    assert!(!head.contains("set-cookie"), "{head}");
    for (name, value) in [
        (
            "content-security-policy",
            "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'",
        ),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
    ] {
        assert!(has_header(&head, name, value), "{name}: {head}");
    }
    let page_origin = format!("Origin: http://localhost:{port}\r\nX-Cairn-Token: {token}\r\n");
    let (status, head, body) = raw(
        port,
        &format!(
            "POST /v1/worktree_list HTTP/1.1\r\nHost: localhost:{port}\r\n{page_origin}Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        ),
    );
    assert_eq!(status, 200, "{body}");
    assert!(has_header(&head, "cache-control", "no-store"), "{head}");
    let listed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        listed["worktrees"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    assert!(ui.url.ends_with(&token));
}

fn error_code(body: &str) -> String {
    let value: Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    value["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The same questions through the page's routes and on the command line, with `--json`.
fn answers_match_the_command_line(env: &Env, ui: &Ui, wt: &Utf8PathBuf) {
    let questions: Vec<(&str, Value, Vec<&str>)> = vec![
        ("log", json!({ "target": wt }), vec!["log", wt.as_str()]),
        (
            "status",
            json!({ "worktree": wt }),
            vec!["status", wt.as_str()],
        ),
        ("worktree_list", json!({}), vec!["worktree", "list"]),
        (
            "diff",
            json!({ "a": "start", "b": wt, "cwd": wt }),
            vec!["diff", "start", wt.as_str()],
        ),
        (
            "show",
            json!({ "object": "nope-not-there" }),
            vec!["show", "nope-not-there"],
        ),
    ];
    for (verb, body, args) in questions {
        let (_, page) = ui.verb(verb, &body);
        let mut cmd = env.command();
        cmd.current_dir(wt)
            .arg("--store")
            .arg(env.store().as_str())
            .arg("--json")
            .args(&args);
        let out = cmd.output().unwrap();
        let cli: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("cairn {args:?}: not JSON ({e}): {}", stderr(&out)));
        assert_eq!(
            page,
            cli,
            "{verb} differs from `cairn --json {}`",
            args.join(" ")
        );
    }
}

#[test]
fn a_verb_answers_as_the_command_line_with_a_server_and_without() {
    let env = Env::new();
    let wt = worktree(&env);
    let ui = Ui::start(&env, &[]);
    answers_match_the_command_line(&env, &ui, &wt);
    // A change made through the page is the store's: the command line sees it.
    std::fs::write(wt.join("page.txt"), "from the page\n").unwrap();
    let (status, made) = ui.verb("snapshot", &json!({ "worktree": wt, "message": "by page" }));
    assert_eq!(status, 200, "{made}");
    let (_, log) = env.json(&["log", wt.as_str()]);
    assert!(
        log.to_string().contains(made["snapshot"].as_str().unwrap()),
        "{log}"
    );

    let server = Server::start(&env);
    answers_match_the_command_line(&env, &ui, &wt);
    // The page's requests went to the server: the store stays held by it alone.
    let (status, _) = ui.verb("worktree_list", &json!({}));
    assert_eq!(status, 200);
    assert!(server.stop().success());
    answers_match_the_command_line(&env, &ui, &wt);
    assert!(ui.stop().success());
}

/// Reads an event stream in a thread: each `event:` name and its `data:`, as they come.
fn events(ui: &Ui) -> mpsc::Receiver<(String, Value)> {
    let response = client()
        .get(format!("{}/v1/events", ui.base()))
        .header("X-Cairn-Token", &ui.token)
        .timeout(Duration::from_secs(600))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut name = String::new();
        for line in BufReader::new(response).lines() {
            let Ok(line) = line else { return };
            if let Some(n) = line.strip_prefix("event: ") {
                name = n.to_owned();
            } else if let Some(data) = line.strip_prefix("data: ") {
                let data = serde_json::from_str(data).unwrap_or(Value::Null);
                if tx.send((std::mem::take(&mut name), data)).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

#[test]
fn another_process_changing_the_store_is_an_event_within_a_second() {
    let env = Env::new();
    let wt = worktree(&env);
    let ui = Ui::start(&env, &[]);
    let stream = events(&ui);
    // The command line with no server: a process of its own that opens the store.
    std::fs::write(wt.join("new.txt"), "new\n").unwrap();
    let out = env.cairn(&["snapshot", wt.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let done = Instant::now();
    let (name, data) = stream
        .recv_timeout(Duration::from_secs(1))
        .expect("no event within a second of the snapshot");
    assert_eq!(name, "store");
    let first = data["seq"].as_u64().expect("a seq");
    assert!(done.elapsed() < Duration::from_secs(1));

    // What the page reads is no change: no event follows its reads (else a page that
    // reloads on each event would never stop).
    while stream.recv_timeout(Duration::from_millis(300)).is_ok() {}
    for (verb, args) in [
        ("worktree_list", json!({})),
        ("timeline", json!({ "dir": wt })),
        ("log", json!({ "target": wt })),
        ("status", json!({ "worktree": wt })),
    ] {
        let (status, answer) = ui.verb(verb, &args);
        assert!(status == 200, "{verb}: {answer}");
    }
    assert!(
        stream.recv_timeout(Duration::from_millis(500)).is_err(),
        "reads made an event"
    );

    // A change through the page itself is one too, counted on.
    std::fs::write(wt.join("new.txt"), "newer\n").unwrap();
    let (status, _) = ui.verb("snapshot", &json!({ "worktree": wt }));
    assert_eq!(status, 200);
    let (_, data) = stream
        .recv_timeout(Duration::from_secs(1))
        .expect("no event for the page's own snapshot");
    assert!(data["seq"].as_u64().unwrap() > first, "{data}");
}

#[test]
fn it_listens_on_127_0_0_1_only_on_a_port_of_its_own() {
    let env = Env::new();
    worktree(&env);
    let first = Ui::start(&env, &[]);
    let second = Ui::start(&env, &["--port", "0"]);
    assert_ne!(first.port, second.port);
    for ui in [&first, &second] {
        let (status, _) = ui.verb("worktree_list", &json!({}));
        assert_eq!(status, 200);
    }
    // Other addresses of this machine do not answer: another loopback address, and IPv6's.
    for other in ["127.0.0.2", "::1"] {
        let address = std::net::SocketAddr::new(other.parse().unwrap(), first.port);
        assert!(
            TcpStream::connect_timeout(&address, Duration::from_secs(5)).is_err(),
            "{address} answered"
        );
    }
    // A port taken: a clear error naming it, at once.
    let taken = first.port.to_string();
    let out = env
        .command()
        .arg("--store")
        .arg(env.store().as_str())
        .args(["ui", "--port", &taken])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(said.contains(&format!("127.0.0.1:{taken}")), "{said}");
    assert!(said.contains("in use"), "{said}");
    assert!(out.stdout.is_empty());
    // And a store that is not there, named.
    let out = env
        .command()
        .args(["--store", "/nonexistent/store", "ui"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("/nonexistent/store"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn sigterm_stops_it_with_event_streams_open() {
    let env = Env::new();
    worktree(&env);
    let ui = Ui::start(&env, &[]);
    let _stream = events(&ui);
    let _other = events(&ui);
    assert!(ui.stop().success());
}

#[test]
fn attacks_find_nothing_and_leave_it_serving() {
    let env = Env::new();
    let wt = worktree(&env);
    let ui = Ui::start(&env, &[]);
    let port = ui.port;
    let host = format!("127.0.0.1:{port}");
    let auth = format!("X-Cairn-Token: {}\r\n", ui.token);

    // Paths out of the assets, plain and encoded.
    for path in [
        "/assets/../Cargo.toml",
        "/assets/%2e%2e/Cargo.toml",
        "/assets/..%2fCargo.toml",
        "/assets/%2e%2e%2f%2e%2e%2fCargo.toml",
        "/assets/..%5cCargo.toml",
        "/assets//etc/passwd",
        "/assets/%2fetc%2fpasswd",
        "/assets/./index.html/../../../../etc/passwd",
        "/../../../etc/passwd",
    ] {
        let (status, head, body) = get(port, path, &host, &auth);
        assert!(status == 404 || status == 400, "{path}: {head}");
        assert!(
            !body.contains("[package]") && !body.contains("root:"),
            "{path}: {body}"
        );
    }

    // A huge body is refused before it is read whole.
    let huge = vec![b' '; 8 << 20];
    let refused = client()
        .post(format!("{}/v1/worktree_list", ui.base()))
        .header("X-Cairn-Token", &ui.token)
        .body(huge)
        .send();
    if let Ok(refused) = refused {
        assert_eq!(refused.status().as_u16(), 413);
    }
    // Malformed bodies and unknown verbs: 4xx, named.
    for (verb, body, code) in [
        ("worktree_list", "{", "invalid_json"),
        ("no_such_verb", "{}", "unknown_verb"),
        ("timeline", "{\"dir\": 7}", "invalid_arguments"),
    ] {
        let answer = client()
            .post(format!("{}/v1/{verb}", ui.base()))
            .header("X-Cairn-Token", &ui.token)
            .body(body)
            .send()
            .unwrap();
        let status = answer.status().as_u16();
        assert!((400..500).contains(&status), "{verb}: {status}");
        assert_eq!(answer.json::<Value>().unwrap()["error"]["code"], code);
    }

    // A slow client that never reads its event stream, and many that do.
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow.write_all(format!("GET /v1/events HTTP/1.1\r\nHost: {host}\r\n{auth}\r\n").as_bytes())
        .unwrap();
    let many: Vec<_> = (0..64).map(|_| events(&ui)).collect();
    for i in 0..20 {
        std::fs::write(wt.join("churn.txt"), format!("{i}\n")).unwrap();
        let out = env.cairn(&["snapshot", wt.as_str()]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    for (i, stream) in many.iter().enumerate() {
        let (name, _) = stream
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("event stream {i} got no event"));
        assert_eq!(name, "store");
    }
    let (status, _) = ui.verb("worktree_list", &json!({}));
    assert_eq!(status, 200);
    drop(slow);

    // Killed while it writes: the store stays usable.
    let pid = ui.child.id();
    let writer = {
        let (base, token, wt) = (ui.base(), ui.token.clone(), wt.clone());
        std::thread::spawn(move || {
            for i in 0..50 {
                let _ = std::fs::write(wt.join("killed.txt"), format!("{i}\n"));
                let sent = client()
                    .post(format!("{base}/v1/snapshot"))
                    .header("X-Cairn-Token", &token)
                    .json(&json!({ "worktree": wt }))
                    .send();
                if sent.is_err() {
                    return;
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    writer.join().unwrap();
    drop(ui);
    let (code, fsck) = env.json(&["fsck"]);
    assert_eq!(code, 0, "{fsck}");
    std::fs::write(wt.join("after.txt"), "after\n").unwrap();
    let out = env.cairn(&["snapshot", wt.as_str(), "-m", "after the kill"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The hunks of each file of `cairn diff A B`'s patch, by path: what follows its first
/// `@@` up to the next file's header.
fn cli_hunks(env: &Env, a: &str, b: &str) -> std::collections::BTreeMap<String, String> {
    let out = env.cairn(&["diff", a, b]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut files = std::collections::BTreeMap::new();
    for file in text.split("diff --git ").skip(1) {
        let path = file
            .lines()
            .find_map(|l| l.strip_prefix("+++ b/").or(l.strip_prefix("--- a/")))
            .unwrap_or_default()
            .to_owned();
        if let Some(at) = file.find("\n@@") {
            files.insert(path, file[at + 1..].to_owned());
        }
    }
    files
}

#[test]
fn the_verbs_give_the_page_its_data_pages_hunks_files_and_the_task() {
    let env = Env::new();
    let wt = worktree(&env);
    let ui = Ui::start(&env, &[]);
    for i in 0..7 {
        std::fs::write(wt.join("src/lib.rs"), format!("fn a() {{ {i} }}\n")).unwrap();
        let out = env.cairn(&["snapshot", wt.as_str(), "-m", &format!("step {i}")]);
        assert!(out.status.success(), "{}", stderr(&out));
    }

    // The timeline in pages of three: together, the whole timeline, each state once.
    let (status, whole) = ui.verb("timeline", &json!({ "dir": wt }));
    assert_eq!(status, 200, "{whole}");
    let all: Vec<Value> = whole["entries"].as_array().unwrap().clone();
    assert_eq!(whole["total"], all.len(), "{whole}");
    assert_eq!(all.len(), 9, "a checkpoint and eight snapshots: {whole}");
    let mut paged = Vec::new();
    for skip in (0..all.len() + 3).step_by(3) {
        let (status, page) = ui.verb(
            "timeline",
            &json!({ "dir": wt, "skip": skip, "max_count": 3 }),
        );
        assert_eq!(status, 200, "{page}");
        assert_eq!(page["total"], all.len());
        paged.extend(page["entries"].as_array().unwrap().iter().cloned());
    }
    assert_eq!(paged, all);
    // The task began at the first checkpoint: the timeline names its baseline.
    let start = all
        .iter()
        .find(|e| e["checkpoint"] == "start")
        .expect("the checkpoint in the timeline")["id"]
        .clone();
    assert_eq!(whole["task"], start, "{whole}");

    // A diff's hunks are the command line's patch, file by file.
    std::fs::write(
        wt.join("many.txt"),
        (1..=40).map(|i| format!("line {i}\n")).collect::<String>(),
    )
    .unwrap();
    let (code, many) = env.json(&["snapshot", wt.as_str(), "-m", "many"]);
    assert_eq!(code, 0, "{many}");
    std::fs::write(
        wt.join("many.txt"),
        (1..=40)
            .map(|i| match i {
                3 | 30 => format!("changed {i}\n"),
                _ => format!("line {i}\n"),
            })
            .collect::<String>(),
    )
    .unwrap();
    std::fs::write(wt.join("image.bin"), [0u8, 1, 2, 0, 255]).unwrap();
    let (code, edits) = env.json(&["snapshot", wt.as_str(), "-m", "edits"]);
    assert_eq!(code, 0, "{edits}");
    let (many, edits) = (
        many["snapshot"].as_str().unwrap(),
        edits["snapshot"].as_str().unwrap(),
    );
    let (status, diff) = ui.verb("diff", &json!({ "a": many, "b": edits, "patch": true }));
    assert_eq!(status, 200, "{diff}");
    assert_eq!(diff["stats"]["files"], 2, "{diff}");
    let expected = cli_hunks(&env, many, edits);
    let mut seen = 0;
    for group in ["added", "removed", "modified", "renamed"] {
        for change in diff[group].as_array().unwrap() {
            let path = change["path"].as_str().unwrap();
            match expected.get(path) {
                Some(hunks) => {
                    assert_eq!(change["patch"].as_str(), Some(hunks.as_str()), "{path}");
                    seen += 1;
                }
                None => assert!(change.get("patch").is_none(), "{path}: {change}"),
            }
        }
    }
    assert_eq!(seen, expected.len());
    assert_eq!(expected["many.txt"].matches("@@ -").count(), 2, "two hunks");
    let (_, plain) = ui.verb("diff", &json!({ "a": many, "b": edits }));
    assert!(!plain.to_string().contains("\"patch\""), "{plain}");

    // A file's bytes at a snapshot.
    let (status, shown) = ui.verb(
        "show",
        &json!({ "object": format!("{edits}:image.bin"), "contents": true }),
    );
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["contents"], "AAECAP8=", "{shown}");

    // Accepting everything ends the task: the timeline names none.
    let (status, accepted) = ui.verb("accept", &json!({ "dir": wt }));
    assert_eq!(status, 200, "{accepted}");
    let (_, after) = ui.verb("timeline", &json!({ "dir": wt, "max_count": 1 }));
    assert!(after.get("task").is_none(), "{after}");
    assert_eq!(after["entries"].as_array().unwrap().len(), 1);
}

#[test]
fn open_hands_the_printed_url_to_xdg_open_and_without_one_it_serves_all_the_same() {
    let env = Env::new();
    worktree(&env);
    // An `xdg-open` that writes down the URL it was given (whole, by a rename).
    let bin = env.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let opened = env.path().join("opened");
    let script = bin.join("xdg-open");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nprintf '%s' \"$1\" > {opened}.part && mv {opened}.part {opened}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{bin}:{}", std::env::var("PATH").unwrap_or_default());
    let ui = Ui::start_with(&env, &["--open"], |c| {
        c.env("PATH", &path);
    });
    let started = Instant::now();
    while !opened.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "cairn ui --open ran no xdg-open within 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(std::fs::read_to_string(&opened).unwrap(), ui.url);
    let page = client().get(&ui.url).send().unwrap();
    assert_eq!(page.status(), 200, "the opened URL does not open the page");

    // No xdg-open anywhere: a warning, and the page is served as without --open.
    let nowhere = env.path().join("empty-bin");
    std::fs::create_dir_all(&nowhere).unwrap();
    let mut bare = Ui::start_with(&env, &["--open"], |c| {
        c.env("PATH", &nowhere);
    });
    let page = client().get(&bare.url).send().unwrap();
    assert_eq!(
        page.status(),
        200,
        "without xdg-open the page is not served"
    );
    crate::support::terminate(&mut bare.child, Duration::from_secs(20), "cairn ui");
    let mut said = String::new();
    bare.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    assert!(
        said.contains("could not run xdg-open") && said.contains("open the URL by hand"),
        "{said}"
    );
}
