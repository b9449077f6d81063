//! `run` through the faces that are not a person's terminal: `cairn serve`'s `/v1/run` and
//! `/v1/call`, and `cairn mcp`'s `run` tool. The command runs on the server's machine,
//! confined, its output returned; nothing a caller sends there widens the sandbox.

use std::time::Duration;

use crate::mcp_client::Mcp;
use crate::support::{Env, Server};

/// A worktree `w` with a secret, and a file outside it.
fn setup(env: &Env) -> camino::Utf8PathBuf {
    let w = env.path().join("w");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("a.txt"), "before\n").unwrap();
    std::fs::write(w.join(".env"), "TOKEN=mine\n").unwrap();
    std::fs::write(env.path().join("outside.txt"), "canary\n").unwrap();
    assert_eq!(env.json(&["onboard", w.as_str()]).0, 0);
    w
}

/// What the command below must have done, seen in `v` (a run's JSON object) and on disk.
fn ran_confined(env: &Env, w: &camino::Utf8Path, v: &serde_json::Value) {
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_eq!(v["stdout"], "outside-denied\nout\n", "{v}");
    assert!(v["stderr"].as_str().unwrap().ends_with("err\n"), "{v}");
    assert_eq!(v["sandbox"], "workspace-write", "{v}");
    assert_eq!(v["violations"][0]["path"], ".env", "{v}");
    assert_eq!(v["violations"][0]["change"], "modified", "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("denied path"),
        "{v}"
    );
    assert_eq!(
        std::fs::read_to_string(env.path().join("outside.txt")).unwrap(),
        "canary\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.join(".env")).unwrap(),
        "TOKEN=mine\n"
    );
    let snap = v["snapshot"].as_str().unwrap();
    let shown = env.cairn(&["show", &format!("{snap}:a.txt")]);
    assert_eq!(shown.stdout, b"inside\n");
}

fn command(env: &Env) -> serde_json::Value {
    let outside = env.path().join("outside.txt");
    let script = format!(
        "echo inside > a.txt; echo TOKEN=stolen > .env; \
         echo pwned > {outside} || echo outside-denied; echo out; echo err >&2"
    );
    serde_json::json!(["sh", "-c", script])
}

#[test]
fn run_through_http_runs_confined_on_the_server_and_returns_the_output() {
    let env = Env::new();
    let w = setup(&env);
    let server = Server::start(&env);
    let (status, v) = server
        .client()
        .call(
            "run",
            &serde_json::json!({ "worktree": w, "command": command(&env) }),
        )
        .unwrap();
    assert_eq!(status, 409, "a secret changed is a refusal: {v}");
    ran_confined(&env, &w, &v);
}

#[test]
fn the_mcp_run_tool_runs_confined_and_returns_the_output() {
    let env = Env::new();
    let w = setup(&env);
    let mut mcp = Mcp::start(&env, &[]);
    mcp.call(
        1,
        "run",
        serde_json::json!({ "worktree": w, "command": command(&env) }),
    );
    let (is_error, v) = mcp.tool_answer(1, Duration::from_secs(60));
    assert!(is_error, "a secret changed is a refusal: {v}");
    ran_confined(&env, &w, &v);
}

/// `--no-sandbox`, `--allow-write` and `--network` are a person's: a server route, the
/// typed `/v1/call` and an MCP tool refuse them, and the command never runs.
#[test]
fn faces_that_are_no_terminal_cannot_widen_the_sandbox() {
    let env = Env::new();
    let w = setup(&env);
    let marker = env.path().join("ran");
    let touch = serde_json::json!(["touch", marker]);
    let widening = [
        ("no_sandbox", serde_json::json!(true), "--no-sandbox"),
        (
            "allow_write",
            serde_json::json!([env.path()]),
            "--allow-write",
        ),
        ("network", serde_json::json!(true), "--network"),
    ];
    let args = |key: &str, value: &serde_json::Value| {
        let mut args = serde_json::json!({ "worktree": w, "command": touch });
        args[key] = value.clone();
        args
    };
    {
        let server = Server::start(&env);
        let client = server.client();
        for (key, value, flag) in &widening {
            // Not an argument of the route at all.
            let (status, v) = client.call("run", &args(key, value)).unwrap();
            assert_eq!(status, 400, "{key}: {v}");
            assert!(v.to_string().contains(key), "{key}: {v}");
            // The typed request takes it, and the engine refuses it.
            let (status, v) = client
                .post_json(
                    "/v1/call",
                    &serde_json::json!({
                        "cwd": env.path(),
                        "request": { "verb": "run", "args": args(key, value) },
                    }),
                )
                .unwrap();
            assert_eq!(status, 403, "{key}: {v}");
            assert_eq!(v["error"]["code"], "not_permitted", "{key}: {v}");
            let message = v["error"]["message"].as_str().unwrap();
            assert!(
                message.contains(flag) && message.contains(w.as_str()),
                "{v}"
            );
        }
    }
    let mut mcp = Mcp::start(&env, &[]);
    for (id, (key, value, _)) in (1..).zip(&widening) {
        mcp.call(id, "run", args(key, value));
        let (is_error, v) = mcp.tool_answer(id, Duration::from_secs(60));
        assert!(is_error, "{key}: {v}");
        assert!(v.to_string().contains(key), "{key}: {v}");
    }
    assert!(!marker.exists(), "a refused run ran its command");
    // The same command, confined, runs and is denied the write outside.
    mcp.call(
        9,
        "run",
        serde_json::json!({ "worktree": w, "command": touch }),
    );
    let (_, v) = mcp.tool_answer(9, Duration::from_secs(60));
    assert_eq!(v["exit_code"], 1, "{v}");
    assert!(!marker.exists());
}
