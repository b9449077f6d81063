//! Writes the command line's list of commands from the command files themselves, so that a new
//! command is its file under `src/commands/` and nothing else.
//!
//! A command is a struct of a file of `src/commands/` that the file declares as one with
//! `impl IntoRequest for NAME` (a command that asks the engine for a request) or
//! `impl OwnCommand for NAME` (one the binary runs itself, dispatched in `main.rs`). Its
//! `#[command(...)]` attribute, which must give its `display_order` (its place in `cairn
//! --help`), is also put on its variant of `Command` (so a `name = ...` there names the
//! command). The variant is the file's name in CamelCase for `Args`, else the struct's name
//! without `Args`. Written to `$OUT_DIR/commands.rs`: the command files' `mod` lines, the
//! `Command` enum in `display_order`, and `Command::request`. The build fails, naming the
//! file and line, for a command without a `display_order`, two commands in one place, or a
//! file of `src/commands/` that is neither a command nor declared in `commands/mod.rs`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One command as its file declares it.
struct Command {
    at: String,
    module: String,
    path: PathBuf,
    ty: String,
    variant: String,
    attribute: String,
    order: u64,
    asks_engine: bool,
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    let dir = manifest.join("src/commands");
    println!("cargo:rerun-if-changed=src/commands");
    let mod_rs = read(&dir.join("mod.rs"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs") && !p.ends_with("mod.rs"))
        .collect();
    files.sort();
    let mut commands = Vec::new();
    let mut errors = Vec::new();
    for path in files {
        let module = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a UTF-8 file name")
            .to_owned();
        let shown = format!("src/commands/{module}.rs");
        let found = declared(&shown, &module, &path, &read(&path));
        match found {
            Ok(found) if found.is_empty() => {
                if !declares_module(&mod_rs, &module) {
                    errors.push(format!("{shown}: neither a command (no `impl IntoRequest for` or `impl OwnCommand for` a struct of it) nor declared in src/commands/mod.rs"));
                }
            }
            Ok(found) => commands.extend(found),
            Err(e) => errors.push(e),
        }
    }
    commands.sort_by_key(|c| c.order);
    for pair in commands.windows(2) {
        if pair[0].order == pair[1].order {
            errors.push(format!(
                "{}: display_order {} is also {}'s",
                pair[1].at, pair[1].order, pair[0].at
            ));
        }
    }
    if !errors.is_empty() {
        for e in &errors {
            eprintln!("error: {e}");
        }
        std::process::exit(1);
    }
    let path = out.join("commands.rs");
    std::fs::write(&path, generated(&commands))
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    write_ui_assets(&manifest.join("src/ui/assets"), &out.join("ui_assets.rs"));
}

/// Writes the table of the web page's files (`cairn ui`): every file under `dir`, by its
/// path there, embedded with `include_bytes!`, so a new asset is its file and nothing else.
fn write_ui_assets(dir: &Path, to: &Path) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        let entries =
            std::fs::read_dir(&at).unwrap_or_else(|e| panic!("reading {}: {e}", at.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut table = String::from("&[\n");
    for path in files {
        let name = path
            .strip_prefix(dir)
            .expect("under the assets folder")
            .to_str()
            .unwrap_or_else(|| panic!("{}: not a UTF-8 name", path.display()));
        writeln!(
            table,
            "    ({name:?}, include_bytes!({:?})),",
            path.display()
        )
        .expect("writing to a string");
    }
    table.push_str("]\n");
    std::fs::write(to, table).unwrap_or_else(|e| panic!("writing {}: {e}", to.display()));
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Whether `mod.rs` declares `module` by hand.
fn declares_module(mod_rs: &str, module: &str) -> bool {
    mod_rs.lines().any(|l| {
        l.trim()
            .trim_start_matches("pub ")
            .trim_start_matches("pub(crate) ")
            == format!("mod {module};")
    })
}

/// The commands `text` declares.
fn declared(file: &str, module: &str, path: &Path, text: &str) -> Result<Vec<Command>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for line in &lines {
        let Some(rest) = line.strip_prefix("impl ") else {
            continue;
        };
        let (trait_path, ty) = rest.split_once(" for ").unwrap_or_default();
        let asks_engine = match trait_path.rsplit("::").next() {
            Some("IntoRequest") => true,
            Some("OwnCommand") => false,
            _ => continue,
        };
        let ty = ty.trim_end_matches(" {").trim_end_matches(" {}").trim();
        let Some(at) = lines.iter().position(|l| {
            l.strip_prefix("pub struct ").is_some_and(|r| {
                r.strip_prefix(ty)
                    .is_some_and(|r| r.starts_with([' ', '{', ';']))
            })
        }) else {
            return Err(format!(
                "{file}: `{}` declares a command of `{ty}`, which is no `pub struct` of this file",
                line.trim()
            ));
        };
        let attribute = command_attribute(&lines[..at]);
        let order = attribute
            .as_deref()
            .and_then(display_order)
            .ok_or_else(|| format!("{file}:{}: the command `{ty}` needs its place in `cairn --help`: `#[command(display_order = N)]` on it", at + 1))?;
        let variant = if ty == "Args" {
            camel(module)
        } else {
            match ty.strip_suffix("Args") {
                Some(v) if !v.is_empty() => v.to_owned(),
                _ => {
                    return Err(format!(
                        "{file}:{}: a command's struct is `Args` or `NameArgs`, not `{ty}`",
                        at + 1
                    ));
                }
            }
        };
        out.push(Command {
            at: format!("{file}:{}", at + 1),
            module: module.to_owned(),
            path: path.to_path_buf(),
            ty: ty.to_owned(),
            variant,
            attribute: attribute.unwrap_or_default(),
            order,
            asks_engine,
        });
    }
    Ok(out)
}

/// The `#[command(...)]` attribute among the attributes and doc comments right above a
/// struct (the lines `above` it, back to a blank line), on one line.
fn command_attribute(above: &[&str]) -> Option<String> {
    let start = above
        .iter()
        .rposition(|l| l.trim().is_empty())
        .map_or(0, |i| i + 1);
    let text = above[start..]
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.starts_with("//"))
        .collect::<Vec<_>>()
        .join(" ");
    let at = text.find("#[command(")?;
    let mut depth = 0;
    for (i, c) in text[at..].char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(text[at..=at + i].to_owned());
                }
            }
            _ => {}
        }
    }
    None
}

/// `N` of `display_order = N` in `attribute`.
fn display_order(attribute: &str) -> Option<u64> {
    let (_, rest) = attribute.split_once("display_order")?;
    let rest = rest.trim_start().strip_prefix('=')?.trim_start();
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

fn camel(snake: &str) -> String {
    snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn generated(commands: &[Command]) -> String {
    let mut out =
        String::from("// Written by build.rs from the command files of src/commands/.\n\n");
    let modules: BTreeMap<&str, &Path> = commands
        .iter()
        .map(|c| (c.module.as_str(), c.path.as_path()))
        .collect();
    for (module, path) in modules {
        let path = path.to_str().expect("a UTF-8 path to the source");
        writeln!(out, "#[path = {path:?}]\npub mod {module};").expect("text");
    }
    out.push_str(
        "\n/// Every command, in its place in `cairn --help` (its `display_order`); each one's\n\
         /// arguments, help and what it becomes are in its file under `commands/`.\n\
         #[derive(clap::Subcommand, Debug)]\npub enum Command {\n",
    );
    for c in commands {
        writeln!(
            out,
            "    {}\n    {}({}::{}),",
            c.attribute, c.variant, c.module, c.ty
        )
        .expect("text");
    }
    out.push_str(
        "}\n\nimpl Command {\n\
         \x20   /// The engine request the command asks for, and how to show its outcome; a\n\
         \x20   /// command the binary runs itself ([`OwnCommand`]) is refused.\n\
         \x20   pub fn request(self, json: bool) -> Result<(cairn_engine::Request, crate::render::View), crate::error::Error> {\n\
         \x20       match self {\n",
    );
    for c in commands {
        let arm = if c.asks_engine {
            "IntoRequest::request(args, json)"
        } else {
            "own(args)"
        };
        writeln!(out, "            Command::{}(args) => {arm},", c.variant).expect("text");
    }
    out.push_str("        }\n    }\n}\n");
    out
}
