//! Every request goes through `Engine::handle` and its outcome back and forth as JSON (the
//! whole agent loop, which ends in a merge, is `cairn-git`'s test: it needs git).

mod support;

use cairn_engine::*;
use support::World;

#[test]
fn every_request_goes_through_handle_and_back_as_json() {
    let w = World::new();
    let call = w.call();
    let request = Request::from_verb(
        "status",
        serde_json::json!({ "worktree": w.work })
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
    .expect("a request");
    let outcome = w.engine.handle(&call, request).expect("status");
    assert_eq!((outcome.verb(), outcome.exit()), ("status", 0));
    // The outcome comes back from its wire form as it was.
    let wire = serde_json::to_string(&outcome).expect("encodes");
    let back: Outcome = serde_json::from_str(&wire).expect("decodes");
    assert_eq!(back.to_json(), outcome.to_json());
    // A NUL byte is bad input, whatever the verb.
    let bad = Request::Snapshot(SnapshotOptions::new("a\0b"));
    let e = w.engine.handle(&call, bad).expect_err("refused");
    assert_eq!((e.exit(), e.code()), (EXIT_USAGE, "invalid_input"));
}
