//! Each verb's outcome, as the engine writes it, is what its derived JSON Schema says: the
//! schema `docs/openapi.yaml` gives as the verb's result ([`Verb::outcome_schema`], made by
//! [`output_schemas`]). Checked by a JSON Schema validator (`jsonschema`) on real outcomes
//! of verbs run through [`Engine::handle`], closed for the check (an object may hold only
//! the properties its schema describes), so a field written but not described, one
//! described as always there but left out, or a value of another shape fails here.

mod support;

use cairn_engine::*;
use serde_json::{Value, json};
use support::World;

/// `schema` with every object schema closed: no property it does not describe.
fn closed(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            map.values_mut().for_each(closed);
        }
        Value::Array(items) => items.iter_mut().for_each(closed),
        _ => {}
    }
}

/// The validator of `verb`'s outcome: its schema with the definitions it refers to.
fn validator(verb: &str) -> jsonschema::Validator {
    let mut generator = output_schemas("/$defs");
    let root = Verb::named(verb)
        .unwrap_or_else(|| panic!("no verb {verb}"))
        .outcome_schema(&mut generator);
    let mut document = root.to_value();
    document["$defs"] = Value::Object(generator.take_definitions(true));
    closed(&mut document);
    jsonschema::draft202012::new(&document)
        .unwrap_or_else(|e| panic!("{verb}'s outcome schema is no valid JSON Schema: {e}"))
}

/// Why `value` is not what `verb`'s outcome schema says, if it is not.
fn violations(verb: &str, value: &Value) -> Vec<String> {
    validator(verb)
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// Runs `verb` with `args` through the engine; its JSON, checked against its schema.
#[track_caller]
fn run(w: &World, verb: &str, args: Value) -> Value {
    let Value::Object(args) = args else {
        panic!("arguments are an object")
    };
    let request = Request::from_verb(verb, args).unwrap_or_else(|e| panic!("{verb}: {e}"));
    let outcome = w
        .engine
        .handle(&w.call(), request)
        .unwrap_or_else(|e| panic!("{verb}: {e}"));
    let value = outcome.to_json();
    let wrong = violations(verb, &value);
    assert!(wrong.is_empty(), "{verb}: {wrong:#?}\nin {value:#}");
    value
}

#[test]
fn every_outcome_is_what_its_schema_says() {
    let w = World::new();
    let work = w.work.as_str();
    std::fs::write(w.work.join("NEW"), "new\n").expect("write");
    // A secret: left out of the capture, its `denied_by` written (absent for other skips).
    std::fs::write(w.work.join(".env"), "KEY=1\n").expect("write");
    let status = run(&w, "status", json!({ "worktree": work }));
    assert!(status["added"][0]["path"] == "NEW", "{status:#}");
    let snapshot = run(&w, "snapshot", json!({ "worktree": work, "message": "m" }));
    let skipped = &snapshot["skipped"][0];
    assert!(
        skipped["denied_by"].is_string(),
        "a denied path's pattern: {snapshot:#}"
    );
    let id = snapshot["snapshot"].as_str().expect("an id").to_owned();
    let diff = run(&w, "diff", json!({ "a": w.base, "b": id }));
    assert_eq!(diff["stats"]["files"], 1, "{diff:#}");
    // Absent when there is nothing to say.
    assert!(diff.get("message").is_none(), "{diff:#}");
    assert!(diff["added"][0].get("from").is_none(), "{diff:#}");
    run(&w, "log", json!({ "target": work }));
    let tree = run(&w, "show", json!({ "object": id }));
    assert!(tree["entries"].is_array(), "a tree listing: {tree:#}");
    let file = run(&w, "show", json!({ "object": format!("{id}:NEW") }));
    assert!(file["blob"].is_string(), "a file: {file:#}");
    run(
        &w,
        "rollback",
        json!({ "worktree": work, "snapshot": w.base, "dry_run": true }),
    );
    run(&w, "checkpoint", json!({ "dir": work, "name": "first" }));
    std::fs::write(w.work.join("NEW"), "newer\n").expect("write");
    run(&w, "checkpoint", json!({ "dir": work }));
    run(&w, "rewind", json!({ "dir": work, "to": "first" }));
    let undone = run(&w, "undo", json!({ "worktree": work }));
    assert!(undone.get("reapplied").is_none(), "{undone:#}");
    run(&w, "redo", json!({ "worktree": work }));
    run(&w, "review", json!({ "dir": work }));
    run(&w, "timeline", json!({ "dir": work }));
    run(&w, "op_log", json!({ "dir": work }));
    run(&w, "ref_set", json!({ "name": "main", "snapshot": id }));
    run(&w, "ref_list", json!({}));
    run(&w, "worktree_list", json!({}));
    run(&w, "policy", json!({ "worktree": work }));
    let url = format!("file://{}", w.dir.join("remote"));
    run(&w, "remote_add", json!({ "name": "origin", "url": url }));
    let pushed = run(&w, "push", json!({ "snapshots": [id] }));
    assert!(pushed.get("warnings").is_none(), "no warnings: {pushed:#}");
    run(&w, "pull", json!({ "snapshots": [id] }));
    let fsck = run(&w, "fsck", json!({}));
    assert!(fsck.get("message").is_none(), "{fsck:#}");
    let gc = run(&w, "gc", json!({ "dry_run": true }));
    let retained = gc["retained"].as_array().expect("retained");
    assert!(
        retained.iter().any(|r| r.get("worktree").is_some())
            && retained.iter().any(|r| r.get("worktree").is_none()),
        "a keeper of a worktree and one of none: {gc:#}"
    );
}

/// The check itself fails on outcomes that are not what the schema says: a field left
/// out, a field not described, a value of another shape, a `null` where the field is
/// left out instead.
#[test]
fn an_outcome_unlike_its_schema_fails() {
    let w = World::new();
    std::fs::write(w.work.join("NEW"), "new\n").expect("write");
    let good = run(&w, "snapshot", json!({ "worktree": w.work.as_str() }));
    let broken = |change: &dyn Fn(&mut Value)| {
        let mut value = good.clone();
        change(&mut value);
        violations("snapshot", &value)
    };
    assert!(!broken(&|v| drop(v.as_object_mut().map(|o| o.remove("tree")))).is_empty());
    assert!(!broken(&|v| v["unknown"] = json!(1)).is_empty());
    assert!(!broken(&|v| v["parent"] = json!("not an id")).is_empty());
    assert!(!broken(&|v| v["added"] = json!(-1)).is_empty());
    assert!(
        !broken(&|v| v["skipped"] = json!([{ "path": "a", "reason": "r", "denied_by": null }]))
            .is_empty()
    );
}
