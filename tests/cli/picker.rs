//! `cairn rewind -i` driven as a person drives it: the real binary in a real terminal
//! (tmux), keys sent with `send-keys`, the screen read with `capture-pane`, the files
//! checked afterwards.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};

use crate::support::{Env, Server, stderr};

/// The tmux binary: from PATH, else installed from Debian (as root).
fn tmux() -> PathBuf {
    let found = |name: &str| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join(name))
                .find(|p| p.is_file())
        })
    };
    if let Some(path) = found("tmux") {
        return path;
    }
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends", "tmux"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !install() {
        let _ = Command::new("apt-get").args(["update", "-qq"]).status();
        assert!(
            install(),
            "tmux is needed to drive the picker: install it (apt-get install tmux)"
        );
    }
    found("tmux").expect("tmux on PATH after apt-get install tmux")
}

/// A detached tmux session running one command line in a terminal of 150×30; killed when
/// dropped.
pub(crate) struct Terminal {
    socket: Utf8PathBuf,
    tmux: PathBuf,
}

impl Terminal {
    pub(crate) fn start(env: &Env, line: &str) -> Terminal {
        let terminal = Terminal {
            socket: env.path().join("tmux.sock"),
            tmux: tmux(),
        };
        let out = terminal
            .command()
            .args(["new-session", "-d", "-x", "150", "-y", "30", line])
            .output()
            .unwrap();
        assert!(out.status.success(), "tmux new-session: {}", stderr(&out));
        terminal
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.tmux);
        cmd.args(["-S", self.socket.as_str()])
            .env("TERM", "xterm-256color")
            .env_remove("TMUX");
        cmd
    }

    pub(crate) fn keys(&self, keys: &[&str]) {
        for key in keys {
            let out = self
                .command()
                .args(["send-keys", "-t", "0", key])
                .output()
                .unwrap();
            assert!(out.status.success(), "send-keys {key}: {}", stderr(&out));
        }
    }

    fn screen(&self) -> String {
        let out = self
            .command()
            .args(["capture-pane", "-p", "-t", "0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen once it shows `text` and has settled: two captures 50 ms apart agree (a
    /// capture taken while the picker draws a frame can hold half a row). Within a minute: a
    /// busy machine is slow, not wrong.
    pub(crate) fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = String::new();
        loop {
            let screen = self.screen();
            if screen.contains(text) && screen == last {
                return screen;
            }
            last = screen.clone();
            assert!(
                Instant::now() < deadline,
                "the terminal never showed {text:?}; it shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").output();
    }
}

/// A worktree with two recorded states and an edit never snapshotted:
/// `start` (a checkpoint: `a.txt` = one), then "Turn 2: fix the login bug" (tool=edit:
/// `a.txt` = two, `b.txt` added), then `a.txt` = three live.
fn worktree(env: &Env) -> Utf8PathBuf {
    let dir = env.path().join("project");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "one\n").unwrap();
    let out = env.cairn(&[
        "checkpoint",
        dir.as_str(),
        "--name",
        "start",
        "-m",
        "Turn 1: start",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(dir.join("a.txt"), "two\n").unwrap();
    std::fs::write(dir.join("b.txt"), "new\n").unwrap();
    let out = env.cairn(&[
        "snapshot",
        dir.as_str(),
        "-m",
        "Turn 2: fix the login bug",
        "--label",
        "tool=edit",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(dir.join("a.txt"), "three\n").unwrap();
    dir
}

/// Runs `cairn rewind DIR -i --json` in the terminal; its stdout and exit status go to files.
/// A lock timeout of zero: with a server up, a store opened here instead would fail.
fn picker(env: &Env, dir: &Utf8Path) -> (Terminal, Utf8PathBuf, Utf8PathBuf) {
    let json = env.path().join("out.json");
    let status = env.path().join("status");
    let line = format!(
        "env NO_COLOR=1 CAIRN_LOCK_TIMEOUT=0 HOME={home} {cairn} --store {store} --json rewind {dir} -i > {json}; echo $? > {status}",
        home = env.path().join("home"),
        cairn = env!("CARGO_BIN_EXE_cairn"),
        store = env.store(),
    );
    (Terminal::start(env, &line), json, status)
}

/// The exit status the picker left, once it has ended, and its JSON object.
pub(crate) fn ended(json: &Utf8Path, status: &Utf8Path) -> (i32, serde_json::Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(status).is_ok_and(|s| s.ends_with('\n')) {
        assert!(Instant::now() < deadline, "the picker never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
    let code = std::fs::read_to_string(status)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let text = std::fs::read_to_string(json).unwrap();
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    (code, value)
}

fn read(dir: &Utf8Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name)).ok()
}

#[test]
fn the_picker_lists_turns_previews_then_rewinds_and_undo_brings_the_live_edit_back() {
    let env = Env::new();
    let dir = worktree(&env);
    let (terminal, json, status) = picker(&env, &dir);

    // Newest first: the turn (the head, with its label and its change summary), then the
    // checkpoint by its name and message.
    let screen = terminal.wait_for("Turn 2: fix the login bug");
    let turn = screen.find("Turn 2: fix the login bug").unwrap();
    let start = screen.find("start · Turn 1: start").expect(&screen);
    assert!(turn < start, "newest first:\n{screen}");
    let turn_row = screen.lines().find(|l| l.contains("Turn 2")).unwrap();
    for part in [
        "> @",
        "2 files: a.txt, b.txt",
        "+2 -1",
        "tool=edit",
        "just now",
    ] {
        assert!(turn_row.contains(part), "{part:?} in the row {turn_row:?}");
    }
    let start_row = screen.lines().find(|l| l.contains("Turn 1")).unwrap();
    assert!(start_row.contains("1 file: a.txt"), "{start_row:?}");

    // Down, Enter: the preview of the rewind to `start`, and nothing changed yet.
    terminal.keys(&["Down", "Enter"]);
    let preview = terminal.wait_for("Rewind to start");
    for part in [
        "writes 1 file and deletes 1 file",
        "write  a.txt",
        "delete b.txt",
        "-three",
        "+one",
    ] {
        assert!(
            preview.contains(part),
            "{part:?} in the preview:\n{preview}"
        );
    }
    assert_eq!(read(&dir, "a.txt").as_deref(), Some("three\n"));

    // Esc goes back to the list; Enter, Enter rewinds.
    terminal.keys(&["Escape"]);
    terminal.wait_for("states, newest first");
    terminal.keys(&["Enter"]);
    terminal.wait_for("Rewind to start");
    terminal.keys(&["Enter"]);
    let (code, out) = ended(&json, &status);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["written"], serde_json::json!(["a.txt"]));
    assert_eq!(out["deleted"], serde_json::json!(["b.txt"]));
    assert_eq!(read(&dir, "a.txt").as_deref(), Some("one\n"));
    assert_eq!(read(&dir, "b.txt"), None);

    // The live edit was captured first: undo brings it back.
    let out = env.cairn(&["undo", dir.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read(&dir, "a.txt").as_deref(), Some("three\n"));
    assert_eq!(read(&dir, "b.txt").as_deref(), Some("new\n"));
}

#[test]
fn through_a_server_the_picker_rewinds_the_same() {
    let env = Env::new();
    let dir = worktree(&env);
    let server = Server::start(&env);
    let (terminal, json, status) = picker(&env, &dir);
    terminal.wait_for("Turn 2: fix the login bug");
    terminal.keys(&["Down", "Enter"]);
    terminal.wait_for("Rewind to start");
    terminal.keys(&["Enter"]);
    let (code, out) = ended(&json, &status);
    assert_eq!(code, 0, "{out}");
    assert_eq!(read(&dir, "a.txt").as_deref(), Some("one\n"));
    assert_eq!(read(&dir, "b.txt"), None);
    assert!(server.stop().success());
}

#[test]
fn escape_changes_nothing_and_a_filter_narrows_the_list() {
    let env = Env::new();
    let dir = worktree(&env);
    let (terminal, json, status) = picker(&env, &dir);
    terminal.wait_for("Turn 2: fix the login bug");

    terminal.keys(&["/", "t", "o", "o", "l", "=", "e"]);
    let filtered = terminal.wait_for("1 of 2 states");
    assert!(filtered.contains("Turn 2"), "{filtered}");
    assert!(!filtered.contains("Turn 1"), "{filtered}");
    // Esc clears the filter, a second Esc closes the picker.
    terminal.keys(&["Escape"]);
    terminal.wait_for("2 states, newest first");
    terminal.keys(&["Escape"]);
    let (code, out) = ended(&json, &status);
    assert_eq!(code, 1, "{out}");
    assert_eq!(out["rewound"], false);
    assert!(
        out["message"].as_str().unwrap().contains("nothing rewound"),
        "{out}"
    );
    assert_eq!(read(&dir, "a.txt").as_deref(), Some("three\n"));
    assert_eq!(read(&dir, "b.txt").as_deref(), Some("new\n"));
}

#[test]
fn without_a_terminal_the_picker_exits_2_pointing_at_to() {
    let env = Env::new();
    let dir = worktree(&env);
    let (code, out) = env.json(&["rewind", dir.as_str(), "-i"]);
    assert_eq!(code, 2, "{out}");
    assert_eq!(out["error"]["code"], "no_terminal");
    assert!(
        out["error"]["message"].as_str().unwrap().contains("--to"),
        "{out}"
    );
    assert_eq!(read(&dir, "a.txt").as_deref(), Some("three\n"));
    // And -i with --to is a usage error.
    let out = env.cairn(&["rewind", dir.as_str(), "-i", "--to", "start"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_worktree_whose_history_is_on_a_remote_opens_without_fetching_it() {
    let env = Env::new();
    // Another machine's store pushes two states to a folder remote.
    let theirs = env.path().join("their-store");
    let remote = env.path().join("remote");
    std::fs::create_dir(&remote).unwrap();
    let src = env.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let url = format!("file://{remote}");
    let at_theirs = |args: &[&str]| {
        let out = env
            .command()
            .args(["--store", theirs.as_str(), "--json"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    std::fs::write(src.join("a.txt"), "one\n").unwrap();
    at_theirs(&["onboard", src.as_str()]);
    std::fs::write(src.join("a.txt"), "two\n").unwrap();
    let head = at_theirs(&["snapshot", src.as_str(), "-m", "Turn 2: theirs"])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    at_theirs(&["remote", "add", "origin", &url]);
    at_theirs(&["push", &head]);
    // Here: check out their head by id (its parent stays on the remote), then pick.
    let out = env.cairn(&["remote", "add", "origin", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dest = env.path().join("dest");
    let out = env.cairn(&["checkout", &head, dest.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The remote is gone: the picker must not need it.
    std::fs::remove_dir_all(&remote).unwrap();
    let (terminal, json, status) = picker(&env, &dest);
    let screen = terminal.wait_for("Turn 2: theirs");
    assert!(screen.contains("1 state, newest first"), "{screen}");
    terminal.keys(&["Escape"]);
    let (code, _) = ended(&json, &status);
    assert_eq!(code, 1);
}
