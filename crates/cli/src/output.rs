//! Printing: human text on stdout, or exactly one JSON object with `--json`.

use std::io::Write;

use serde::Serialize;

/// A command's result: its JSON object and its human rendering.
pub struct Report {
    pub json: serde_json::Value,
    pub human: String,
    /// Exit 1 with this message (a refusal or negative answer).
    pub refusal: Option<String>,
}

impl Report {
    pub fn new(json: impl Serialize, human: impl Into<String>) -> Report {
        let json = serde_json::to_value(json).unwrap_or(serde_json::Value::Null);
        Report {
            json,
            human: human.into(),
            refusal: None,
        }
    }

    pub fn refused(mut self, message: impl Into<String>) -> Report {
        self.refusal = Some(message.into());
        self
    }
}

/// Writes `bytes` to stdout, ignoring a closed pipe (`cairn show … | head`).
pub fn write_stdout(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes).and_then(|()| out.flush());
}

/// A path or name as git prints it with `core.quotePath=true`: unchanged when it holds only
/// printable ASCII other than `"` and `\`, else in double quotes with C escapes and octal
/// for other bytes.
pub fn quote_path(name: &[u8]) -> String {
    let plain = name
        .iter()
        .all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\');
    if plain {
        // Only printable ASCII: valid UTF-8.
        return String::from_utf8_lossy(name).into_owned();
    }
    let mut out = String::with_capacity(name.len() + 8);
    out.push('"');
    for &b in name {
        match b {
            b'\x07' => out.push_str("\\a"),
            b'\x08' => out.push_str("\\b"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\x0b' => out.push_str("\\v"),
            b'\x0c' => out.push_str("\\f"),
            b'\r' => out.push_str("\\r"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}

/// A path for JSON: as it is when valid UTF-8, else in the quoted form.
pub fn json_path(name: &[u8]) -> String {
    match std::str::from_utf8(name) {
        Ok(s) => s.to_owned(),
        Err(_) => quote_path(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_matches_git() {
        assert_eq!(quote_path(b"src/main.rs"), "src/main.rs");
        assert_eq!(quote_path(b"with space"), "with space");
        assert_eq!(quote_path(b"tab\there"), "\"tab\\there\"");
        assert_eq!(quote_path(b"q\"uote"), "\"q\\\"uote\"");
        assert_eq!(quote_path(b"back\\slash"), "\"back\\\\slash\"");
        assert_eq!(quote_path("caf\u{e9}".as_bytes()), "\"caf\\303\\251\"");
        assert_eq!(quote_path(b"\xff"), "\"\\377\"");
        assert_eq!(quote_path(b"del\x7f"), "\"del\\177\"");
        assert_eq!(json_path("caf\u{e9}".as_bytes()), "caf\u{e9}");
        assert_eq!(json_path(b"\xff"), "\"\\377\"");
    }
}
