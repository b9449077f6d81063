//! The human output, pinned with insta; colour only on a terminal.

use crate::support::{Env, stdout};

fn scene(env: &Env) -> (camino::Utf8PathBuf, String, String) {
    let w = env.path().join("w");
    std::fs::create_dir_all(w.join("src")).unwrap();
    std::fs::write(w.join("README"), "cairn\nsnapshots for agents\n").unwrap();
    std::fs::write(w.join("src/lib.rs"), "fn a() {}\nfn b() {}\nfn c() {}\n").unwrap();
    std::fs::write(w.join("old.txt"), "to be removed\n").unwrap();
    let first = env.json(&["onboard", w.as_str(), "-m", "first"]).1["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(
        w.join("src/lib.rs"),
        "fn a() {}\nfn b() { todo!() }\nfn c() {}\nfn d() {}\n",
    )
    .unwrap();
    std::fs::remove_file(w.join("old.txt")).unwrap();
    std::fs::write(w.join("NEW.md"), "# new\n").unwrap();
    let second = env.json(&["snapshot", w.as_str(), "-m", "second"]).1["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    (w, first, second)
}

#[test]
fn human_output_is_pinned() {
    let env = Env::new();
    let (w, first, second) = scene(&env);
    insta::assert_snapshot!(stdout(&env.cairn(&["diff", &first, &second])), @r"
    diff --git a/NEW.md b/NEW.md
    new file mode 100644
    index 0000000..7abaf20
    --- /dev/null
    +++ b/NEW.md
    @@ -0,0 +1 @@
    +# new
    diff --git a/old.txt b/old.txt
    deleted file mode 100644
    index ee48829..0000000
    --- a/old.txt
    +++ /dev/null
    @@ -1 +0,0 @@
    -to be removed
    diff --git a/src/lib.rs b/src/lib.rs
    index b40a01a..8504837 100644
    --- a/src/lib.rs
    +++ b/src/lib.rs
    @@ -1,3 +1,4 @@
     fn a() {}
    -fn b() {}
    +fn b() { todo!() }
     fn c() {}
    +fn d() {}
    ");
    insta::assert_snapshot!(stdout(&env.cairn(&["diff", &first, &second, "--stat"])), @r"
     NEW.md     | 1 +
     old.txt    | 1 -
     src/lib.rs | 3 ++-
     3 files changed, 3 insertions(+), 2 deletions(-)
    ");
    std::fs::write(w.join("README"), "cairn\n").unwrap();
    insta::assert_snapshot!(stdout(&env.cairn(&["status", w.as_str()])), @r"
    Modified: README
    +0 -1 across 1 file
    ");
    insta::assert_snapshot!(stdout(&env.cairn(&["status", w.as_str(), "--short"])), @"[checkpoint: 1 file changed]");
    let log = stdout(&env.cairn(&["log", w.as_str(), "--stat", "-n", "1"]));
    let log: Vec<&str> = log
        .lines()
        .filter(|l| {
            !l.starts_with("snapshot ") && !l.starts_with("Date:") && !l.starts_with("Parent:")
        })
        .collect();
    insta::assert_snapshot!(log.join("\n").replace(w.as_str(), "[W]"), @r"
    Source:  [W]

        second

     NEW.md     | 1 +
     old.txt    | 1 -
     src/lib.rs | 3 ++-
     3 files changed, 3 insertions(+), 2 deletions(-)
    ");
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let env = Env::new();
    let (_, first, second) = scene(&env);
    let piped = env.cairn(&["diff", &first, &second]).stdout;
    assert!(!piped.contains(&0x1b), "no escapes when piped");
    let tty = |no_color: bool| {
        let cmd = format!(
            "{} --store {} diff {first} {second}",
            env!("CARGO_BIN_EXE_cairn"),
            env.store()
        );
        let mut c = std::process::Command::new("script");
        c.args(["-qec", &cmd, "/dev/null"]).env_remove("NO_COLOR");
        if no_color {
            c.env("NO_COLOR", "1");
        }
        c.output().unwrap().stdout
    };
    let coloured = String::from_utf8_lossy(&tty(false)).into_owned();
    assert!(coloured.contains("\x1b[32m+fn d() {}"), "{coloured:?}");
    assert!(coloured.contains("\x1b[31m-fn b() {}"), "{coloured:?}");
    assert!(!tty(true).contains(&0x1b), "NO_COLOR turns colour off");
}
