//! `POST /v1/{verb}` of `cairn serve` (and `cairn mcp`'s tool calls): the JSON arguments,
//! and the engine request they become ([`Verb::request`]). Whatever the body, an accepted
//! request must carry exactly the arguments given and mean what the same arguments mean on
//! `/v1/call`.
#![no_main]

use cairn_engine::{Face, JsonObject, Request, Verb};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Equal as the request carries it: a whole float is carried as an integer.
fn same(given: &Value, carried: &Value) -> bool {
    match (given, carried) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => given == carried,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(args) = serde_json::from_slice::<JsonObject>(data) else {
        return;
    };
    for verb in Verb::all()
        .iter()
        .filter(|v| v.on(Face::Route) || v.on(Face::Tool))
    {
        let Ok(request) = verb.request(args.clone()) else {
            continue;
        };
        assert_eq!(request.verb(), verb.name());
        let value = serde_json::to_value(&request).expect("a request encodes");
        let Some(Value::Object(carried)) = value.get("args").cloned() else {
            panic!("{}: a request without args: {value}", verb.name());
        };
        let given: JsonObject = args
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (key, value) in &given {
            let carried = carried.get(key).unwrap_or(&Value::Null);
            assert!(
                same(value, carried),
                "{}: {key} given {value}, carried {carried}",
                verb.name()
            );
        }
        // The same arguments on /v1/call: the same request.
        let typed = Request::from_verb(verb.name(), given.clone())
            .unwrap_or_else(|e| panic!("{}: {given:?} is a route's request but not /v1/call's: {e}", verb.name()));
        assert_eq!(
            serde_json::to_value(&typed).expect("encodes"),
            value,
            "{}",
            verb.name()
        );
    }
});
