//! `POST /v1/{verb}` of `cairn serve` (and `cairn mcp`'s tool calls): the JSON arguments,
//! and the engine request they become. Whatever the body, the request must carry exactly
//! the arguments given, and every body the table accepts must be a request.
#![no_main]

use cairn_client::verbs::{Arg, JsonObject, TOOLS, ToolSpec, check};
use cairn_engine::Request;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn arg_name(arg: &Arg) -> &'static str {
    match arg {
        Arg::Positional(n, _)
        | Arg::Option(n, _)
        | Arg::Switch(n, _)
        | Arg::Number(n, _, _)
        | Arg::Paths(n) => n,
    }
}

/// The arguments as the request will carry them (absent, null and false drop out; values
/// as text), or `None` if the verb must refuse them.
fn expected(spec: &ToolSpec, args: &JsonObject) -> Option<JsonObject> {
    let mut out = JsonObject::new();
    for (key, value) in args {
        let (arg, _) = spec.args.iter().find(|(a, _)| arg_name(a) == key)?;
        // Text is a JSON string: a number is no name, message or id (and never was).
        let text = match value {
            Value::Null => continue,
            Value::String(s) => Some(s.clone()),
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
            // A count is a whole number of at least 1 (given as a JSON number) that fits
            // 64 bits; how large it may be is the engine's to check.
            Arg::Option("max_count", _) => {
                let whole = value.as_u64().map_or_else(
                    || {
                        value.as_f64().is_some_and(|f| {
                            f.fract() == 0.0 && f >= 1.0 && f < 18_446_744_073_709_551_616.0
                        })
                    },
                    |n| n >= 1,
                );
                if !whole {
                    return None;
                }
                out.insert(key.clone(), value.clone());
            }
            Arg::Option(..) => {
                out.insert(key.clone(), Value::String(text?));
            }
            // A whole number from 0 to the largest (given as a JSON number).
            Arg::Number(_, _, max) => {
                let whole = value.as_u64().or_else(|| {
                    value
                        .as_f64()
                        .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 18_446_744_073_709_551_616.0)
                        .map(|f| f as u64)
                });
                let n = whole.filter(|n| n <= max)?;
                out.insert(key.clone(), Value::String(n.to_string()));
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

/// The request's arguments as `expected` writes them.
fn carried(spec: &ToolSpec, request: &Request) -> JsonObject {
    let value = serde_json::to_value(request).expect("a request encodes");
    let Some(Value::Object(args)) = value.get("args").cloned() else {
        panic!("{}: a request without args: {value}", spec.name);
    };
    let mut out = JsonObject::new();
    for (key, value) in args {
        let Some((arg, _)) = spec.args.iter().find(|(a, _)| arg_name(a) == key) else {
            // An option of the engine's the verb's route does not take: its default.
            continue;
        };
        match (arg, value) {
            (_, Value::Null) | (Arg::Switch(..), Value::Bool(false)) => {}
            (Arg::Paths(_), Value::Array(items)) if items.is_empty() => {}
            (_, Value::Number(n)) => {
                out.insert(key, Value::String(n.to_string()));
            }
            (_, value) => {
                out.insert(key, value);
            }
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
        match check(spec, &args) {
            Ok(checked) => {
                let Some(want) = want else {
                    panic!("{}: accepted {args:?} as {checked:?}", spec.name);
                };
                let request = Request::from_verb(spec.name, checked.clone()).unwrap_or_else(|e| {
                    panic!("{}: {checked:?} passed the table but is no request: {e}", spec.name)
                });
                assert_eq!(request.verb(), spec.name);
                // A count given as a whole float is carried as an integer; every other
                // value is carried as given.
                if !args.contains_key("max_count") {
                    assert_eq!(carried(spec, &request), want, "{}: {checked:?}", spec.name);
                }
            }
            Err(_) => assert!(want.is_none(), "{}: refused {args:?}", spec.name),
        }
    }
});
