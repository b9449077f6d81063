//! `run` through the library, with the real sandbox (`sandbox::Landlock`): writes outside
//! the worktree are denied, what the command did inside is snapshotted, the secrets it
//! touched are put back, its output comes back, and nothing but a person on a terminal
//! widens the sandbox.
//!
//! No libtest harness: this binary is also the sandbox helper the engine starts
//! (`__sandbox-exec`, as the `cairn` binary is), so it must not print a test header before
//! it becomes the command.

mod support;

use std::ffi::OsString;

use cairn_engine::*;
use support::World;

fn sandboxed(store: camino::Utf8PathBuf) -> Engine {
    let exe = std::env::current_exe().expect("the test binary");
    Engine::create(store)
        .expect("a store")
        .with_sandbox(sandbox::Landlock::new(exe, ["__sandbox-exec"]))
}

/// A world whose worktree `work` holds a secret (`.env`), with a file outside it.
fn world() -> World {
    let w = World::with_engine(sandboxed);
    std::fs::write(w.work.join(".env"), "TOKEN=mine\n").expect("write");
    std::fs::write(w.dir.join("outside.txt"), "canary\n").expect("write");
    w
}

fn file_in(w: &World, snapshot: &impl std::fmt::Display, path: &str) -> Vec<u8> {
    let shown = w
        .engine
        .show(
            &w.call(),
            ShowOptions {
                object: format!("{snapshot}:{path}"),
                contents: true,
            },
        )
        .expect("show");
    match shown {
        ShowOutcome::Blob {
            contents: Some(contents),
            ..
        } => contents,
        other => panic!("{path}: not a file: {other:?}"),
    }
}

fn a_command_runs_confined_and_its_secrets_are_put_back() {
    let w = world();
    let outside = w.dir.join("outside.txt");
    let script = format!(
        "echo inside > src/lib.rs; echo TOKEN=stolen > .env; \
         echo pwned > {outside} || echo outside-denied; echo to-stderr >&2"
    );
    let out = w
        .engine
        .run(
            &w.call(),
            RunOptions::new(&w.work, ["sh", "-c", script.as_str()]),
        )
        .expect("run");
    // Outside the worktree: denied, unchanged.
    assert_eq!(std::fs::read_to_string(&outside).expect("read"), "canary\n");
    assert_eq!(out.stdout.as_deref(), Some("outside-denied\n"), "{out:?}");
    let stderr = out.stderr.as_deref().unwrap_or_default();
    assert!(stderr.ends_with("to-stderr\n"), "{stderr}");
    assert!(
        stderr.contains(outside.as_str()),
        "sh names the denied file: {stderr}"
    );
    assert!(!out.stdout_cut && !out.stderr_cut);
    // Inside: written, and captured into the new snapshot.
    assert_eq!(out.exit_code, 0);
    assert_eq!(out.snapshots.len(), 1);
    assert_eq!(out.snapshots[0].worktree, w.work);
    assert_eq!(file_in(&w, &out.snapshot, "src/lib.rs"), b"inside\n");
    // The secret it wrote is put back, reported, and makes this a refusal.
    assert_eq!(
        std::fs::read_to_string(w.work.join(".env")).expect("read"),
        "TOKEN=mine\n"
    );
    assert_eq!(out.violations.len(), 1, "{:?}", out.violations);
    assert_eq!(out.violations[0].path.as_bytes(), b".env");
    assert_eq!(out.violations[0].change, "modified");
    let outcome = Outcome::Run(Box::new(out.clone()));
    assert!(
        outcome.refusal().is_some_and(|m| m.contains("denied path")),
        "{:?}",
        outcome.refusal()
    );
    assert_eq!(outcome.exit(), 1);
    // The policy it ran under: the worktree writable, its .git read-only, the store hidden.
    assert_eq!(out.sandbox, "workspace-write");
    let SandboxPolicy::WorkspaceWrite {
        writable_roots,
        hidden,
        network,
        ..
    } = &out.policy
    else {
        panic!("{:?}", out.policy)
    };
    assert_eq!(writable_roots, &[w.work.clone().into_std_path_buf()]);
    assert!(
        hidden.contains(&w.dir.join("store").into_std_path_buf()),
        "{hidden:?}"
    );
    assert!(!network);
}

fn the_command_sees_the_sandbox_and_not_the_store() {
    let w = world();
    let store = w.dir.join("store");
    let script = format!("echo \"$CAIRN_SANDBOX $CAIRN_SANDBOX_NETWORK_DISABLED\"; ls -A {store}");
    let out = w
        .engine
        .run(
            &w.call(),
            RunOptions::new(&w.work, ["sh", "-c", script.as_str()]),
        )
        .expect("run");
    assert_eq!(
        out.stdout.as_deref(),
        Some("workspace-write 1\n"),
        "the store's folder is empty to the command: {out:?}"
    );
    assert_eq!(out.exit_code, 0, "{out:?}");
    assert!(out.violations.is_empty());
}

fn a_failing_command_passes_its_status_on_and_read_only_writes_nothing() {
    let w = world();
    let options = RunOptions {
        read_only: true,
        ..RunOptions::new(&w.work, ["sh", "-c", "echo x > README; exit 7"])
    };
    let out = w.engine.run(&w.call(), options).expect("run");
    assert_eq!(out.exit_code, 7);
    assert_eq!(out.sandbox, "read-only");
    assert_eq!(
        std::fs::read_to_string(w.work.join("README")).expect("read"),
        "hello\n"
    );
    assert_eq!(
        Outcome::Run(Box::new(out)).exit(),
        0,
        "a failing command is no refusal"
    );
}

fn output_past_the_limit_is_cut_and_the_command_still_ends() {
    let w = world();
    let bytes = limits::MAX_OUTPUT_BYTES + 100_000;
    let script = format!("head -c {bytes} /dev/zero | tr '\\0' a; echo done >&2");
    let out = w
        .engine
        .run(
            &w.call(),
            RunOptions::new(&w.work, ["sh", "-c", script.as_str()]),
        )
        .expect("run");
    let stdout = out.stdout.as_deref().unwrap_or_default();
    assert_eq!(stdout.len(), limits::MAX_OUTPUT_BYTES);
    assert!(stdout.bytes().all(|b| b == b'a'));
    assert!(out.stdout_cut);
    assert_eq!(out.stderr.as_deref(), Some("done\n"));
    assert!(!out.stderr_cut);
}

/// A face that is not a person on a terminal (`cairn serve`, `cairn mcp`, the library's
/// `Engine::run`) cannot give the command more than its worktree and remembered grants:
/// each widening option is refused and nothing runs.
fn widening_options_are_refused_and_nothing_runs() {
    let w = world();
    let marker = w.dir.join("ran");
    let touch = || RunOptions::new(&w.work, ["sh", "-c", format!("touch {marker}").as_str()]);
    let widened = [
        RunOptions {
            no_sandbox: true,
            ..touch()
        },
        RunOptions {
            allow_write: vec![w.dir.clone()],
            ..touch()
        },
        RunOptions {
            network: true,
            ..touch()
        },
    ];
    for (options, flag) in widened
        .into_iter()
        .zip(["--no-sandbox", "--allow-write", "--network"])
    {
        let e = w
            .engine
            .handle(&w.call(), Request::Run(options))
            .expect_err(flag);
        assert_eq!((e.code(), e.exit()), ("not_permitted", EXIT_USAGE), "{e}");
        assert!(e.to_string().contains(flag), "{e}");
        assert!(e.to_string().contains(w.work.as_str()), "{e}");
        assert!(!marker.exists(), "{flag}: the command ran");
    }
    // Named on a route or tool, they are no arguments of `run` at all.
    let run = Verb::named("run").expect("run is a verb");
    for key in ["no_sandbox", "allow_write", "network"] {
        let args = serde_json::json!({ "worktree": w.work, "command": ["true"], key: true });
        let serde_json::Value::Object(args) = args else {
            unreachable!()
        };
        let e = run.request(args).expect_err(key);
        assert!(matches!(&e, ArgumentsError::Unknown(k) if k == key), "{e}");
    }
    // `verify` follows the same rule: its `network` and `sign` are a person's.
    let check = || cairn_engine::VerifyOptions::new("any", ["touch", marker.as_str()]);
    let key = w.dir.join("no-such-key");
    let widened = [
        cairn_engine::VerifyOptions {
            network: true,
            ..check()
        },
        cairn_engine::VerifyOptions {
            sign: Some(key.clone()),
            ..check()
        },
    ];
    for (options, flag) in widened.into_iter().zip(["--network", "--sign"]) {
        let e = w
            .engine
            .handle(&w.call(), Request::Verify(options.clone()))
            .expect_err(flag);
        assert_eq!((e.code(), e.exit()), ("not_permitted", EXIT_USAGE), "{e}");
        assert!(e.to_string().contains(flag), "{e}");
        // A person's call gets past the rule (to the next check: the key, the snapshot).
        let e = w
            .engine
            .handle(&w.call().by_person(true), Request::Verify(options))
            .expect_err(flag);
        assert_ne!(e.code(), "not_permitted", "{e}");
        assert!(!marker.exists(), "{flag}: the check ran");
    }
    // The confined run of the same command works.
    let out = w.engine.run(&w.call(), touch()).expect("run");
    assert_eq!(
        out.exit_code, 1,
        "touch outside the worktree is denied: {out:?}"
    );
    assert!(!marker.exists());
}

fn an_engine_without_a_sandbox_refuses_run() {
    let w = World::new();
    let marker = w.dir.join("ran");
    let options = RunOptions::new(&w.work, ["touch", marker.as_str()]);
    let e = w.engine.run(&w.call(), options).expect_err("no sandbox");
    assert_eq!(e.code(), "sandbox_unavailable", "{e}");
    assert!(e.to_string().contains(w.work.as_str()), "{e}");
    assert!(!marker.exists());
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "__sandbox-exec") {
        sandbox::exec_args(&args[2..]);
    }
    let tests: &[(&str, fn())] = &[
        (
            "a_command_runs_confined_and_its_secrets_are_put_back",
            a_command_runs_confined_and_its_secrets_are_put_back,
        ),
        (
            "the_command_sees_the_sandbox_and_not_the_store",
            the_command_sees_the_sandbox_and_not_the_store,
        ),
        (
            "a_failing_command_passes_its_status_on_and_read_only_writes_nothing",
            a_failing_command_passes_its_status_on_and_read_only_writes_nothing,
        ),
        (
            "output_past_the_limit_is_cut_and_the_command_still_ends",
            output_past_the_limit_is_cut_and_the_command_still_ends,
        ),
        (
            "widening_options_are_refused_and_nothing_runs",
            widening_options_are_refused_and_nothing_runs,
        ),
        (
            "an_engine_without_a_sandbox_refuses_run",
            an_engine_without_a_sandbox_refuses_run,
        ),
    ];
    // As libtest: arguments that are no flags filter the tests by name.
    let filters: Vec<String> = args[1..]
        .iter()
        .filter_map(|a| a.to_str())
        .filter(|a| !a.starts_with('-'))
        .map(str::to_owned)
        .collect();
    let chosen: Vec<_> = tests
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    println!("\nrunning {} tests", chosen.len());
    let mut failed = Vec::new();
    for (name, test) in chosen {
        let passed = std::panic::catch_unwind(test).is_ok();
        println!("test {name} ... {}", if passed { "ok" } else { "FAILED" });
        if !passed {
            failed.push(*name);
        }
    }
    if !failed.is_empty() {
        println!("\nfailures: {failed:?}");
        std::process::exit(101);
    }
    println!("\ntest result: ok");
}
