//! `cairn completions SHELL` and `cairn man DIR`: made from the command line's definition,
//! so they name every command and option, and they work in the real tools.

use std::process::Command;

use crate::support::{Env, stderr, stdout};

/// Loaded into a real bash, the script completes commands and a command's options.
#[test]
fn bash_completes_commands_and_options_from_the_script() {
    let env = Env::new();
    let out = env.cairn(&["completions", "bash"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let script = env.path().join("cairn.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let complete = |words: &str| {
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {script}; COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); \
                 _cairn cairn \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
                 printf '%s\\n' \"${{COMPREPLY[@]}}\""
            ))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let commands = complete("cairn sn");
    assert_eq!(
        commands.lines().collect::<Vec<_>>(),
        ["snapshot"],
        "{commands}"
    );
    let options = complete("cairn snapshot --me");
    assert_eq!(
        options.lines().collect::<Vec<_>>(),
        ["--message"],
        "{options}"
    );
    let nested = complete("cairn worktree re");
    let mut nested: Vec<&str> = nested.lines().collect();
    nested.sort();
    assert_eq!(nested, ["rebind", "remove"]);
}

#[test]
fn zsh_and_fish_scripts_name_every_command() {
    let env = Env::new();
    for shell in ["zsh", "fish"] {
        let out = env.cairn(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        for word in ["snapshot", "rollback", "mount", "message", "worktree"] {
            assert!(script.contains(word), "{shell}: no {word:?}");
        }
    }
    let out = env.cairn(&["completions", "tcsh"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

/// A page per command, nested ones too, that `man` renders with the command's options.
#[test]
fn man_writes_a_page_per_command_that_man_renders() {
    let env = Env::new();
    let dir = env.path().join("man1");
    std::fs::create_dir(&dir).unwrap();
    let out = env.cairn(&["man", dir.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = stdout(&out);
    for page in [
        "cairn.1",
        "cairn-snapshot.1",
        "cairn-worktree-list.1",
        "cairn-ref-set.1",
    ] {
        assert!(
            listed.contains(&format!("{dir}/{page}")),
            "{page} not listed"
        );
        assert!(dir.join(page).exists(), "{page} not written");
    }
    assert!(
        !listed.contains("sandbox-exec"),
        "hidden commands get no page"
    );
    let rendered = Command::new("man")
        .arg("-l")
        .arg(dir.join("cairn-snapshot.1").as_str())
        .env("MANWIDTH", "100")
        .env("MAN_KEEP_FORMATTING", "0")
        .output()
        .unwrap();
    assert!(rendered.status.success(), "{rendered:?}");
    let text = plain(&String::from_utf8_lossy(&rendered.stdout));
    assert!(text.contains("cairn-snapshot"), "{text}");
    assert!(text.contains("--message"), "{text}");

    let (code, v) = env.json(&["man", env.path().join("missing").as_str()]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "invalid_path", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("missing"),
        "{v}"
    );
}

/// `man`'s text without its overstrikes (`N\x08N` for bold).
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\x08' {
            out.pop();
        } else {
            out.push(c);
        }
    }
    out
}
