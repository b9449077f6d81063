//! `POST /v1/{verb}` of `cairn serve` (and `cairn mcp`'s tool calls): the JSON arguments,
//! and the command line they become. Whatever the body, the line must carry exactly the
//! arguments given and nothing a command-line parser would read as anything else.
#![no_main]

use cairn_client::verbs::{Arg, JsonObject, TOOLS, ToolSpec, argv};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn arg_name(arg: &Arg) -> &'static str {
    match arg {
        Arg::Positional(n, _) | Arg::Option(n, _) | Arg::Switch(n, _) | Arg::Paths(n) => n,
    }
}

/// The arguments as the command will see them (absent, null and false drop out), or `None`
/// if the verb must refuse them.
fn expected(spec: &ToolSpec, args: &JsonObject) -> Option<JsonObject> {
    let mut out = JsonObject::new();
    for (key, value) in args {
        let (arg, _) = spec.args.iter().find(|(a, _)| arg_name(a) == key)?;
        let text = match value {
            Value::Null => continue,
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        match arg {
            Arg::Positional(..) => {
                let text = text?;
                if text.starts_with('-') {
                    return None;
                }
                out.insert(key.clone(), Value::String(text));
            }
            Arg::Option(..) => {
                out.insert(key.clone(), Value::String(text?));
            }
            Arg::Switch(..) => match value {
                Value::Bool(true) => {
                    out.insert(key.clone(), Value::Bool(true));
                }
                Value::Bool(false) => {}
                _ => return None,
            },
            Arg::Paths(_) => {
                let Value::Array(items) = value else {
                    return None;
                };
                if !items.iter().all(Value::is_string) {
                    return None;
                }
                if !items.is_empty() {
                    out.insert(key.clone(), value.clone());
                }
            }
        }
    }
    for (arg, _) in spec.args {
        if let Arg::Positional(name, false) = arg
            && !out.contains_key(*name)
        {
            return None;
        }
    }
    if spec.name == "merge" && !out.contains_key("into") {
        return None;
    }
    Some(out)
}

/// Reads a command line back the way a command-line parser does.
fn read_back(spec: &ToolSpec, line: &[String]) -> JsonObject {
    assert_eq!(line[0], "--json");
    let (command, rest) = line[1..].split_at(spec.command.len());
    assert_eq!(command, spec.command);
    let mut out = JsonObject::new();
    let mut positionals = spec.args.iter().filter_map(|(a, _)| match a {
        Arg::Positional(name, _) => Some(*name),
        _ => None,
    });
    let mut i = 0;
    while i < rest.len() {
        let token = &rest[i];
        i += 1;
        if token == "--" {
            let name = spec
                .args
                .iter()
                .find_map(|(a, _)| matches!(a, Arg::Paths(_)).then(|| arg_name(a)))
                .expect("a '--' from a verb without paths");
            let paths = rest[i..].iter().cloned().map(Value::String).collect();
            out.insert(name.into(), Value::Array(paths));
            break;
        }
        if !token.starts_with('-') {
            let name = positionals
                .next()
                .expect("more positional values than the verb has");
            out.insert(name.into(), Value::String(token.clone()));
            continue;
        }
        let (flag, inline) = match token.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            None => (token.as_str(), None),
        };
        let (arg, _) = spec
            .args
            .iter()
            .find(|(a, _)| matches!(a, Arg::Option(_, f) | Arg::Switch(_, f) if *f == flag))
            .unwrap_or_else(|| panic!("{token:?} is no flag of {}", spec.name));
        match (arg, inline) {
            (Arg::Option(name, _), Some(value)) => {
                out.insert((*name).into(), Value::String(value));
            }
            (Arg::Option(name, _), None) => {
                let value = rest.get(i).expect("an option without its value");
                // A parser takes a following word that starts with '-' for a flag.
                assert!(
                    !value.starts_with('-'),
                    "{flag} {value:?}: the value reads as a flag"
                );
                out.insert((*name).into(), Value::String(value.clone()));
                i += 1;
            }
            (Arg::Switch(name, _), None) => {
                out.insert((*name).into(), Value::Bool(true));
            }
            _ => panic!("{token:?}: a switch with a value"),
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Ok(args) = serde_json::from_slice::<JsonObject>(data) else {
        return;
    };
    for spec in TOOLS {
        let want = expected(spec, &args);
        match argv(spec, &args) {
            Ok(line) => {
                let Some(want) = want else {
                    panic!("{}: accepted {args:?} as {line:?}", spec.name);
                };
                assert_eq!(read_back(spec, &line), want, "{}: {line:?}", spec.name);
            }
            Err(_) => assert!(want.is_none(), "{}: refused {args:?}", spec.name),
        }
    }
});
