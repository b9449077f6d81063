//! `POST /v1/call` of `cairn serve`: the typed call the CLI sends (`cairn-engine`'s
//! `CallRequest`), and the replies it reads back (`CallReply`, streamed NDJSON lines).
//! Whatever decodes must encode and decode again to the same encoding.
#![no_main]

use cairn_client::StreamLine;
use cairn_engine::wire::{CallReply, CallRequest};
use libfuzzer_sys::fuzz_target;

fn stable<T: serde::Serialize + serde::de::DeserializeOwned>(value: &T) {
    let written = serde_json::to_vec(value).expect("encodes");
    let again: T = serde_json::from_slice(&written).expect("decodes what it wrote");
    let rewritten = serde_json::to_vec(&again).expect("encodes");
    let third: T = serde_json::from_slice(&rewritten).expect("decodes");
    assert_eq!(serde_json::to_vec(&third).expect("encodes"), rewritten);
}

fuzz_target!(|data: &[u8]| {
    if let Ok(call) = serde_json::from_slice::<CallRequest>(data) {
        stable(&call);
    }
    if let Ok(reply) = serde_json::from_slice::<CallReply>(data) {
        stable(&reply);
    }
    if let Ok(line) = serde_json::from_slice::<StreamLine>(data) {
        let written = serde_json::to_vec(&line).expect("a line encodes");
        let again: StreamLine = serde_json::from_slice(&written).expect("decodes");
        assert_eq!(serde_json::to_vec(&again).expect("encodes"), written);
    }
});
