//! Assembles the verb table from the `verb! { ... }` blocks of `src/`, each in the module that
//! implements its verbs, and declares the one-verb modules of `src/verbs/`, so that a new verb
//! is written in its own module and nowhere else in this crate.
//!
//! A block starts with a line that is exactly `verb! {` and ends with a line `}`; between
//! them, each verb is its doc comment (`///` lines) and one line
//! `Name(Options) -> Outcome = "name" via method [Route, Tool];`. The table lists the blocks'
//! verbs in the order of their files' paths, then of their lines. Anything else in a block
//! fails the build, naming the file and line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed=src");
    let src = manifest.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut verbs = Vec::new();
    let mut errors = Vec::new();
    for file in &files {
        let shown = file
            .strip_prefix(&manifest)
            .unwrap_or(file)
            .display()
            .to_string();
        let text = read(file);
        match blocks(&shown, &text) {
            Ok(found) => verbs.extend(found),
            Err(e) => errors.push(e),
        }
    }
    errors.extend(duplicates(&verbs));
    if !errors.is_empty() {
        for e in &errors {
            eprintln!("error: {e}");
        }
        std::process::exit(1);
    }
    write(&out.join("verb_table.rs"), &table(&verbs));

    let modules = one_verb_modules(&src.join("verbs"));
    let mut declared = String::from("// Written by build.rs: every file of src/verbs/.\n");
    let mut exported = declared.clone();
    for (name, path) in &modules {
        let path = path.to_str().expect("a UTF-8 path to the source");
        writeln!(declared, "#[path = {path:?}]\npub(crate) mod {name};").expect("text");
        // A verb whose options and outcome are shared types (`worktree remove`) has no
        // public item of its own to export.
        writeln!(
            exported,
            "#[allow(unused_imports)]\npub use verbs::{name}::*;"
        )
        .expect("text");
    }
    write(&out.join("verb_modules.rs"), &declared);
    write(&out.join("verb_exports.rs"), &exported);
}

/// One verb as its block says it.
struct Verb {
    /// `file:line` of its declaration.
    at: String,
    docs: Vec<String>,
    declaration: String,
    variant: String,
    name: String,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// The verbs of `text`'s blocks, or what is wrong with the first malformed one.
fn blocks(file: &str, text: &str) -> Result<Vec<Verb>, String> {
    let mut verbs = Vec::new();
    // The line a block opened at, and how many verbs were found before it.
    let mut open: Option<(usize, usize)> = None;
    let mut docs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = format!("{file}:{}", i + 1);
        let trimmed = line.trim();
        let Some((start, before)) = open else {
            if line == "verb! {" {
                open = Some((i + 1, verbs.len()));
            } else if trimmed.starts_with("verb!") {
                return Err(format!(
                    "{at}: a verb block is a line `verb! {{` at the start of a line, its verbs, and a line `}}`"
                ));
            }
            continue;
        };
        if trimmed == "}" {
            if !docs.is_empty() {
                return Err(format!(
                    "{at}: the block's last doc comment documents no verb"
                ));
            }
            if verbs.len() == before {
                return Err(format!("{file}:{start}: a verb block with no verb"));
            }
            open = None;
        } else if let Some(doc) = trimmed.strip_prefix("///") {
            docs.push(doc.to_owned());
        } else if trimmed.is_empty() || trimmed.starts_with("//") {
        } else {
            if docs.is_empty() {
                return Err(format!(
                    "{at}: a verb needs its doc comment (`///` lines above it): its description on every face"
                ));
            }
            let (variant, name) =
                declaration(trimmed).map_err(|why| format!("{at}: {why}: `{trimmed}`"))?;
            verbs.push(Verb {
                at,
                docs: std::mem::take(&mut docs),
                declaration: trimmed.to_owned(),
                variant,
                name,
            });
        }
    }
    match open {
        Some((start, _)) => Err(format!(
            "{file}:{start}: a verb block without its closing line `}}`"
        )),
        None => Ok(verbs),
    }
}

/// The variant and name of `Variant(Options) -> Outcome = "name" via method [Faces];`.
fn declaration(line: &str) -> Result<(String, String), &'static str> {
    const SHAPE: &str =
        "expected `Name(Options) -> Outcome = \"name\" via method [Route, Tool];` on one line";
    let variant = ident(line).ok_or(SHAPE)?;
    let rest = line[variant.len()..].strip_prefix('(').ok_or(SHAPE)?;
    let mut depth = 1;
    let close = rest
        .char_indices()
        .find(|&(_, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            depth == 0
        })
        .map(|(at, _)| at)
        .ok_or(SHAPE)?;
    if rest[..close].trim().is_empty() {
        return Err(SHAPE);
    }
    let rest = rest[close + 1..]
        .trim_start()
        .strip_prefix("->")
        .ok_or(SHAPE)?;
    let (outcome, rest) = rest.split_once("= \"").ok_or(SHAPE)?;
    if outcome.trim().is_empty() {
        return Err(SHAPE);
    }
    let (name, rest) = rest.split_once('"').ok_or(SHAPE)?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
        return Err("a verb's name is lowercase letters and `_`");
    }
    let rest = rest.trim_start().strip_prefix("via ").ok_or(SHAPE)?;
    let method = ident(rest).ok_or(SHAPE)?;
    let rest = rest[method.len()..]
        .trim_start()
        .strip_prefix('[')
        .ok_or(SHAPE)?;
    let (faces, rest) = rest.split_once(']').ok_or(SHAPE)?;
    if rest.trim() != ";" {
        return Err(SHAPE);
    }
    let faces: Vec<&str> = faces
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .collect();
    if faces.iter().any(|f| !matches!(*f, "Route" | "Tool")) {
        return Err("a verb's faces are among `Route` and `Tool`");
    }
    Ok((variant.to_owned(), name.to_owned()))
}

fn ident(s: &str) -> Option<&str> {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    let id = &s[..end];
    id.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        .then_some(id)
}

/// Two verbs of one variant or name.
fn duplicates(verbs: &[Verb]) -> Vec<String> {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    let mut out = Vec::new();
    for v in verbs {
        for key in [v.variant.as_str(), v.name.as_str()] {
            if let Some(first) = seen.insert(key, &v.at) {
                out.push(format!(
                    "{}: `{key}` is declared again (first at {first})",
                    v.at
                ));
            }
        }
    }
    out
}

fn table(verbs: &[Verb]) -> String {
    let mut out = String::from(
        "// Written by build.rs from the `verb!` blocks of src/ (each verb's line is in its\n\
         // module): the table of every verb. Calls the macro `$then` with it.\n\
         macro_rules! verb_table {\n    ($then:ident) => {\n        $then! {\n",
    );
    for v in verbs {
        writeln!(out, "            // {}", v.at).expect("text");
        for doc in &v.docs {
            writeln!(out, "            ///{doc}").expect("text");
        }
        writeln!(out, "            {}", v.declaration).expect("text");
    }
    out.push_str("        }\n    };\n}\n");
    out
}

/// The modules of `dir` (one verb each): every `*.rs` but `mod.rs`, by name.
fn one_verb_modules(dir: &Path) -> BTreeMap<String, PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|x| x == "rs") && stem != "mod" {
            out.insert(stem.to_owned(), path.clone());
        }
    }
    out
}
