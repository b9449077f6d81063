//! The whole command line as text: every command with its settings, aliases and help, every
//! argument with everything clap knows of it (names, defaults, conflicts, help), each
//! command's rendered help, and a digest of the completion scripts and man pages made from
//! it. A snapshot of it fails on any change to what a user can type or read, so moving the
//! definitions between files is shown to change nothing, and a deliberate change is seen
//! in review (`cargo insta review`, or `INSTA_UPDATE=always`).

use std::fmt::Write;

use clap::CommandFactory;

/// The text of `command` and everything below it.
fn dump(command: &clap::Command, path: &str, out: &mut String) {
    let mut command = command.clone();
    let line = |out: &mut String, key: &str, value: &dyn std::fmt::Debug| {
        writeln!(out, "  {key}: {value:?}").expect("a String takes text");
    };
    writeln!(out, "== {path}").expect("a String takes text");
    line(out, "name", &command.get_name());
    line(
        out,
        "aliases",
        &command.get_all_aliases().collect::<Vec<_>>(),
    );
    line(out, "about", &command.get_about().map(|s| s.to_string()));
    line(
        out,
        "long_about",
        &command.get_long_about().map(|s| s.to_string()),
    );
    line(out, "hidden", &command.is_hide_set());
    line(
        out,
        "subcommand_required",
        &command.is_subcommand_required_set(),
    );
    line(
        out,
        "arg_required_else_help",
        &command.is_arg_required_else_help_set(),
    );
    line(
        out,
        "args_conflicts_with_subcommands",
        &command.is_args_conflicts_with_subcommands_set(),
    );
    line(out, "version", &command.get_version());
    line(out, "display_order", &command.get_display_order());
    // The derive names each command's group of arguments for the type holding them (a
    // variant or an `Args` struct); no user sees that name, only what the group holds.
    for group in command.get_groups() {
        let args: Vec<_> = group.get_args().collect();
        let (required, multiple) = (group.is_required_set(), group.clone().is_multiple());
        line(
            out,
            "group",
            &format_args!("{args:?} required={required} multiple={multiple}"),
        );
    }
    for arg in command.get_arguments() {
        line(out, "arg", arg);
    }
    writeln!(out, "  -- usage\n{}", command.render_usage()).expect("a String takes text");
    writeln!(out, "  -- help\n{}", command.render_help()).expect("a String takes text");
    writeln!(out, "  -- long help\n{}", command.render_long_help()).expect("a String takes text");
    for sub in command.get_subcommands() {
        dump(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

/// A digest of what `completions SHELL` prints and of the man pages `man` writes.
fn generated_digests(out: &mut String) {
    for shell in [
        clap_complete::Shell::Bash,
        clap_complete::Shell::Zsh,
        clap_complete::Shell::Fish,
        clap_complete::Shell::Elvish,
        clap_complete::Shell::PowerShell,
    ] {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut crate::Cli::command(), "cairn", &mut script);
        writeln!(out, "completions {shell}: {}", blake3::hash(&script)).expect("text");
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let dir = camino::Utf8Path::from_path(dir.path()).expect("a UTF-8 temporary directory");
    let written = crate::commands::man::man_pages::<crate::Cli>(dir).expect("man pages");
    for page in written {
        let bytes = std::fs::read(&page).expect("a written page");
        let name = page.rsplit('/').next().unwrap_or_default();
        writeln!(out, "man {name}: {}", blake3::hash(&bytes)).expect("text");
    }
}

// The argument dump names value parsers' types only in a debug build (a release build
// prints their opaque `TypeId`s).
#[cfg_attr(not(debug_assertions), ignore = "needs a debug build")]
#[test]
fn the_command_line_is_as_recorded() {
    let mut command = crate::Cli::command();
    command.build();
    let mut out = String::new();
    dump(&command, "cairn", &mut out);
    generated_digests(&mut out);
    insta::assert_snapshot!(out);
}
