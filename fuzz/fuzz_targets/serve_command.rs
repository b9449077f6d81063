//! `POST /v1/command` of `cairn serve`: the JSON command request; and the replies the
//! client reads back (command output with base64 stdout, streamed NDJSON lines).
#![no_main]

use cairn_client::{CommandOutput, CommandRequest, StreamLine};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = serde_json::from_slice::<CommandRequest>(data) {
        let written = serde_json::to_vec(&request).expect("a request encodes");
        let again: CommandRequest = serde_json::from_slice(&written).expect("decodes");
        assert_eq!(again, request);
    }
    if let Ok(output) = serde_json::from_slice::<CommandOutput>(data) {
        let written = serde_json::to_vec(&output).expect("an output encodes");
        let again: CommandOutput = serde_json::from_slice(&written).expect("decodes");
        assert_eq!(again, output);
    }
    if let Ok(line) = serde_json::from_slice::<StreamLine>(data) {
        let written = serde_json::to_vec(&line).expect("a line encodes");
        let again: StreamLine = serde_json::from_slice(&written).expect("decodes");
        assert_eq!(serde_json::to_vec(&again).expect("encodes"), written);
    }
});
