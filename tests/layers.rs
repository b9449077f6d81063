//! The crates' structure, as `docs/design.md` draws it: no crate's modules use each other in
//! a circle, only `merge_back`, `cairn-git` (the engine's git backend) and the binary
//! depend on gitoxide, no public type name is declared in two crates, and a verb is named
//! only in its two files (its engine module and its command file) and where it is used.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A module's source without comments and without its `#[cfg(test)]` part (tests may use
/// anything).
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first path segments named after each `prefix` in `src`: `crate::a::x` gives `a`,
/// `crate::{a, b::c}` gives `a` and `b`.
fn named_after(src: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in src.match_indices(prefix) {
        if src[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &src[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(ident(item.trim()).to_owned());
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.push(ident(item.trim()).to_owned());
        } else {
            out.push(ident(rest).to_owned());
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Names a module's `pub use child::{…}` lines re-export, by the child they come from.
fn reexports(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in code(text).split(';') {
        let line = line.trim();
        let Some(rest) = line
            .strip_prefix("pub use ")
            .or_else(|| line.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let child = ident(rest).to_owned();
        let names = rest[child.len()..].trim_start_matches("::");
        let names = names.trim_start_matches('{').trim_end_matches('}');
        for name in names.split(',') {
            let name = name.split(" as ").last().unwrap_or_default().trim();
            let name = name.rsplit("::").next().unwrap_or_default();
            if !name.is_empty() {
                out.insert(name.to_owned(), child.clone());
            }
        }
    }
    out
}

/// A cycle in `graph`, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if !done.insert(node.to_owned()) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, done, path) {
                return Some(found);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut done, &mut Vec::new()))
}

/// The module graphs of the crate whose sources are in `src`: one of its top-level modules
/// (a folder module with everything below it), and one per folder module of its children.
fn graphs(src: &Path) -> Vec<(String, BTreeMap<String, BTreeSet<String>>)> {
    let root = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .find(|p| p.exists())
        .expect("a crate root");
    let crate_names = reexports(&std::fs::read_to_string(&root).unwrap());
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut folders: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let mut files = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") && p != root {
                files.push(p);
            }
        }
    }
    let modules: BTreeSet<String> = files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(src).unwrap();
            let first = rel.components().next().unwrap();
            first
                .as_os_str()
                .to_str()
                .unwrap()
                .trim_end_matches(".rs")
                .to_owned()
        })
        .collect();
    for file in &files {
        let rel = file.strip_prefix(src).unwrap();
        let parts: Vec<String> = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_str().unwrap().to_owned())
            .collect();
        let text = std::fs::read_to_string(file).unwrap();
        let src_code = code(&text);
        let module = parts[0].clone();
        let edges = top.entry(module.clone()).or_default();
        for name in named_after(&src_code, "crate::") {
            let target = crate_names.get(&name).cloned().unwrap_or(name);
            if modules.contains(&target) && target != module {
                edges.insert(target);
            }
        }
        // Inside a folder module: its children and how they use each other.
        let folder = src.join(&module);
        if parts.len() == 2 && parts[1] != "mod" {
            let children: BTreeSet<String> = std::fs::read_dir(&folder)
                .unwrap()
                .map(|e| {
                    let p = e.unwrap().path();
                    p.file_stem().unwrap().to_str().unwrap().to_owned()
                })
                .filter(|c| c != "mod")
                .collect();
            let parent_names = reexports(&std::fs::read_to_string(folder.join("mod.rs")).unwrap());
            let mut used: Vec<String> = named_after(&src_code, "super::");
            let inner = format!("crate::{module}::");
            used.extend(named_after(&src_code, &inner));
            let graph = folders.entry(module.clone()).or_default();
            let me = graph.entry(parts[1].clone()).or_default();
            for name in used {
                let target = parent_names.get(&name).cloned().unwrap_or(name);
                if children.contains(&target) && target != parts[1] {
                    me.insert(target);
                }
            }
        }
    }
    let mut out = vec![("crate".to_owned(), top)];
    out.extend(folders);
    out
}

#[test]
fn no_crate_has_modules_that_use_each_other_in_a_circle() {
    let crates = workspace().join("crates");
    let mut found = Vec::new();
    let mut checked = 0;
    for e in std::fs::read_dir(&crates).unwrap() {
        let src = e.unwrap().path().join("src");
        for (scope, graph) in graphs(&src) {
            checked += graph.len();
            if let Some(c) = cycle(&graph) {
                found.push(format!("{}: {scope}: {}", src.display(), c.join(" → ")));
            }
        }
    }
    assert!(checked > 50, "only {checked} modules found");
    assert!(found.is_empty(), "module cycles:\n{}", found.join("\n"));
}

/// The checker itself finds a circle, direct or through a re-export.
#[test]
fn the_cycle_check_sees_a_circle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a; mod b;\npub use b::Thing;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::Thing; // crate::c\n").unwrap();
    std::fs::write(
        src.join("b.rs"),
        "pub struct Thing;\nfn f() { crate::a::g() }\n",
    )
    .unwrap();
    let (_, graph) = graphs(src).remove(0);
    assert_eq!(
        cycle(&graph),
        Some(vec!["a".to_owned(), "b".to_owned(), "a".to_owned()])
    );
    std::fs::write(
        src.join("b.rs"),
        "pub struct Thing;\n#[cfg(test)]\nfn f() { crate::a::g() }\n",
    )
    .unwrap();
    let (_, graph) = graphs(src).remove(0);
    assert_eq!(cycle(&graph), None, "tests may use anything");
}

#[test]
fn only_merge_back_its_engine_glue_and_the_binary_depend_on_gitoxide() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let packages = [
        "cas",
        "path_policy",
        "sandbox",
        "worktree_registry",
        "worktree_scope",
        "worktree_state",
        "fs_manager",
        "diff",
        "cairn-client",
        "cairn-engine",
    ];
    for package in packages {
        let out = std::process::Command::new(&cargo)
            .current_dir(workspace())
            .args([
                "tree",
                "--offline",
                "--prefix",
                "none",
                "-e",
                "normal,build,dev",
                "-p",
                package,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tree = String::from_utf8(out.stdout).unwrap();
        assert!(tree.lines().count() > 5, "{package}: {tree}");
        let gix: Vec<&str> = tree.lines().filter(|l| l.starts_with("gix")).collect();
        assert!(gix.is_empty(), "{package} depends on {gix:?}");
    }
    let out = std::process::Command::new(&cargo)
        .current_dir(workspace())
        .args(["tree", "--offline", "--prefix", "none", "-p", "merge_back"])
        .output()
        .unwrap();
    let tree = String::from_utf8(out.stdout).unwrap();
    assert!(
        tree.lines().any(|l| l.starts_with("gix ")),
        "the check sees gix where it is"
    );
}

/// Every `static` (`thread_local!` ones included) in the crates' code, with why it may be
/// one: none holds per-store or per-request state. A new one fails here until it is
/// justified in this list.
#[test]
fn no_static_holds_per_store_or_per_request_state() {
    let allowed: BTreeSet<(&str, &str)> = [
        // zstd contexts, reused by each thread.
        ("cas/src/store/blob.rs", "COMPRESSOR"),
        ("cas/src/store/blob.rs", "DECOMPRESSOR"),
        // The panic hook is process-wide by nature; these say whether this thread is
        // inside a contained call and what it caught.
        ("cas/src/store/contain.rs", "QUIET"),
        ("cas/src/store/contain.rs", "CAUGHT"),
        ("cas/src/store/contain.rs", "HOOK"),
        ("cli/src/error.rs", "CONTAINING"),
        ("cli/src/error.rs", "CAUGHT"),
        ("cli/src/error.rs", "HOOK"),
        // Version numbers unique across every store of the process.
        ("cas/src/store/versions.rs", "NEXT"),
        // An empty label map to point at.
        ("worktree_state/src/capture.rs", "NO_LABELS"),
        // Each verb's schema, made once from its type: the same for every store and request.
        ("engine/src/verb.rs", "ANNOTATED"),
        // The web page's files (`cairn ui`), embedded in the binary: the same for every
        // store and request.
        ("cli/src/ui/assets.rs", "ASSETS"),
        // Unique temporary names.
        ("worktree_state/src/fsops.rs", "COUNTER"),
        ("merge_back/src/worktree.rs", "COUNTER"),
        // Counts of work done on this thread, which tests read to show what a call costs;
        // nothing reads them to decide anything.
        ("remote/src/catalog.rs", "LOCATIONS_READ"),
        ("remote/src/layout/mod.rs", "INDEXES_DECODED"),
    ]
    .into_iter()
    .collect();
    let crates = workspace().join("crates");
    let mut found = BTreeSet::new();
    let mut files = vec![crates.clone()];
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if p.extension().is_none_or(|x| x != "rs")
            || !p.components().any(|c| c.as_os_str() == "src")
        {
            continue;
        }
        let rel = p
            .strip_prefix(&crates)
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let text = code(&std::fs::read_to_string(&p).unwrap());
        for (at, _) in text.match_indices("static ") {
            if text[..at].ends_with(|c: char| c == '\'' || c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let rest = text[at + "static ".len()..].trim_start_matches("mut ");
            let name = ident(rest);
            if !name.is_empty() && rest[name.len()..].trim_start().starts_with(':') {
                found.insert((rel.clone(), name.to_owned()));
            }
        }
    }
    let found: BTreeSet<(&str, &str)> = found
        .iter()
        .map(|(f, n)| (f.as_str(), n.as_str()))
        .collect();
    let new: Vec<_> = found.difference(&allowed).collect();
    let gone: Vec<_> = allowed.difference(&found).collect();
    assert!(
        new.is_empty(),
        "statics not justified in this test: {new:?}"
    );
    assert!(
        gone.is_empty(),
        "statics listed here that no longer exist: {gone:?}"
    );
}

/// The public types each crate declares (`pub struct`, `enum`, `trait`, `type`, `union`;
/// `pub(crate)` ones are not public), by name, from the sources under `crates`.
fn public_types(crates: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in std::fs::read_dir(crates).unwrap() {
        let dir = e.unwrap().path();
        let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let mut stack = vec![dir.join("src")];
        while let Some(p) = stack.pop() {
            if p.is_dir() {
                stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let text = code(&std::fs::read_to_string(&p).unwrap());
            for (at, _) in text.match_indices("pub ") {
                if text[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                    continue;
                }
                let rest = text[at + "pub ".len()..].trim_start();
                let Some(rest) = ["struct ", "enum ", "trait ", "type ", "union "]
                    .iter()
                    .find_map(|k| rest.strip_prefix(k))
                else {
                    continue;
                };
                let ty = ident(rest.trim_start());
                if !ty.is_empty() {
                    out.entry(ty.to_owned()).or_default().insert(name.clone());
                }
            }
        }
    }
    out
}

/// One type per operation: a public type name is declared in one crate only, so the engine's
/// `CheckoutOptions` (the request every face sends) is never confused with a lower crate's
/// parameters of the same name. A lower crate names its own after what they are there.
#[test]
fn no_public_type_name_is_declared_in_two_crates() {
    let types = public_types(&workspace().join("crates"));
    assert!(types.len() > 200, "only {} public types found", types.len());
    let twice: Vec<String> = types
        .iter()
        .filter(|(_, crates)| crates.len() > 1)
        .map(|(name, crates)| format!("{name}: {crates:?}"))
        .collect();
    assert!(
        twice.is_empty(),
        "public type names declared in two crates:\n{}",
        twice.join("\n")
    );
}

/// The checker itself sees a name declared in two crates, and not a `pub(crate)` one.
#[test]
fn the_type_name_check_sees_a_name_in_two_crates() {
    let dir = tempfile::tempdir().unwrap();
    for (krate, src) in [
        ("a", "pub struct Outcome;\npub(crate) struct Inner;\n"),
        (
            "b",
            "pub   enum Outcome {}\nstruct Inner;\n// pub struct Said;\n",
        ),
        (
            "c",
            "pub(crate) struct Outcome;\n#[cfg(test)]\npub struct Inner;\n",
        ),
    ] {
        std::fs::create_dir_all(dir.path().join(krate).join("src")).unwrap();
        std::fs::write(dir.path().join(krate).join("src/lib.rs"), src).unwrap();
    }
    let types = public_types(dir.path());
    assert_eq!(
        types.get("Outcome"),
        Some(&BTreeSet::from(["a".to_owned(), "b".to_owned()]))
    );
    assert_eq!(types.get("Inner"), None);
    assert_eq!(types.get("Said"), None);
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Each verb (the `Name` of its line in a `verb!` block) and the engine file declaring it.
fn declared_verbs(engine_src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    for file in rust_files(engine_src) {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut inside = false;
        for line in text.lines() {
            match (inside, line.trim()) {
                (false, _) => inside = line == "verb! {",
                (true, "}") => inside = false,
                (true, t) if t.is_empty() || t.starts_with("//") => {}
                (true, t) => {
                    out.insert(ident(t).to_owned(), file.clone());
                }
            }
        }
    }
    out
}

/// Where `code` names verb `name` as `verbs::NAME`, `Request::NAME` or `Outcome::NAME`.
fn names_verb(code: &str, name: &str) -> bool {
    ["verbs::", "Request::", "Outcome::"].iter().any(|prefix| {
        let needle = format!("{prefix}{name}");
        code.match_indices(&needle).any(|(at, _)| {
            let before = code[..at].chars().next_back();
            let after = code[at + needle.len()..].chars().next();
            !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    })
}

/// A verb is written in two files: the engine module holding its `verb!` block and the
/// command file holding its `impl Human` (the lists that name every verb or command are
/// written by the crates' `build.rs` from those). Anywhere else a verb is named (outside
/// comments and tests), it is for what that verb alone does there, listed here with why; a
/// hand-kept list of verbs or a dispatch arm for one fails here.
#[test]
fn a_verb_is_named_only_in_its_two_files_and_where_it_is_used() {
    let used_elsewhere: BTreeSet<(&str, &str)> = [
        // Granting asks a person: on this terminal, through MCP elicitation, or refused
        // to an agent by the server.
        ("cli/src/main.rs", "PolicyAllow"),
        ("cli/src/main.rs", "PolicyRequest"),
        ("cli/src/commands/mcp.rs", "PolicyAllow"),
        ("cli/src/commands/mcp_grant.rs", "PolicyAllow"),
        ("cli/src/commands/mcp_grant.rs", "PolicyRevoke"),
        ("cli/src/commands/mcp_grant.rs", "PolicyRequest"),
        ("cli/src/commands/serve.rs", "PolicyAllow"),
        ("cli/src/commands/serve.rs", "PolicyRequest"),
        // Discarding everything asks this terminal first.
        ("cli/src/main.rs", "Discard"),
        // The rewind picker lists the timeline, previews a diff and rewinds.
        ("cli/src/commands/picker.rs", "Diff"),
        ("cli/src/commands/picker.rs", "Rewind"),
        ("cli/src/commands/picker.rs", "Timeline"),
        // `cairn run` reads grants, the status before, and snapshots after.
        ("cli/src/commands/run.rs", "Policy"),
        ("cli/src/commands/run.rs", "Status"),
        ("cli/src/commands/run.rs", "Snapshot"),
        // A mount starts the server that serves it; one that is stopping refuses it.
        ("cli/src/target.rs", "Mount"),
        ("cli/src/commands/serve.rs", "Mount"),
        // So does a check, whose view is then a mount.
        ("cli/src/target.rs", "Verify"),
        // A command that ran is never run again after a fetch.
        ("engine/src/request.rs", "Run"),
        // A diff's refusal comes back from its exit status on the wire.
        ("engine/src/wire.rs", "Diff"),
    ]
    .into_iter()
    .collect();
    let crates = workspace().join("crates");
    let verbs = declared_verbs(&crates.join("engine/src"));
    assert!(verbs.len() > 30, "only {} verbs found", verbs.len());
    let mut human = BTreeMap::new();
    for file in rust_files(&crates.join("cli/src/commands")) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (at, _) in text.match_indices("impl Human for verbs::") {
            let name = ident(&text[at + "impl Human for verbs::".len()..]);
            human.insert(name.to_owned(), file.clone());
        }
    }
    let mut found = BTreeSet::new();
    for file in rust_files(&crates) {
        if !file.components().any(|c| c.as_os_str() == "src") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        // Without its test module and comments (`code` would also drop what follows a
        // `#[cfg(test)] mod` line near the top, such as main.rs's).
        let text = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or_default();
        let text: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        let rel = file
            .strip_prefix(&crates)
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        for (verb, module) in &verbs {
            if &file == module || human.get(verb) == Some(&file) {
                continue;
            }
            if names_verb(&text, verb) {
                found.insert((rel.clone(), verb.clone()));
            }
        }
    }
    let found: BTreeSet<(&str, &str)> = found
        .iter()
        .map(|(f, v)| (f.as_str(), v.as_str()))
        .collect();
    let new: Vec<_> = found.difference(&used_elsewhere).collect();
    let gone: Vec<_> = used_elsewhere.difference(&found).collect();
    assert!(
        new.is_empty(),
        "verbs named outside their engine module and command file, not listed in this test \
         with why: {new:?}"
    );
    assert!(
        gone.is_empty(),
        "listed here but no longer named there: {gone:?}"
    );
}

/// The modules that only a `build.rs` declares (a verb's own engine module, the command
/// files), which `cargo fmt` does not reach (it follows `mod` lines, not generated code).
fn declared_by_build_scripts() -> Vec<PathBuf> {
    let crates = workspace().join("crates");
    let mut files = rust_files(&crates.join("engine/src/verbs"));
    files.extend(
        rust_files(&crates.join("cli/src/commands"))
            .into_iter()
            .filter(|f| f.parent() == Some(crates.join("cli/src/commands").as_path())),
    );
    files
}

/// `cargo fmt --all` formats every module it finds through `mod` lines; these it cannot
/// see, so they are checked here (and written by the command this prints).
#[test]
fn the_files_only_build_scripts_declare_are_formatted() {
    let files = declared_by_build_scripts();
    assert!(files.len() > 30, "only {} files found", files.len());
    let rustfmt = std::env::var("RUSTFMT").unwrap_or_else(|_| "rustfmt".into());
    let out = std::process::Command::new(&rustfmt)
        .args(["--check", "--edition", "2024"])
        .args(&files)
        .output()
        .unwrap_or_else(|e| panic!("running {rustfmt}: {e}"));
    assert!(
        out.status.success(),
        "not formatted (write them with `rustfmt --edition 2024 crates/engine/src/verbs/*.rs \
         crates/cli/src/commands/*.rs`):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
