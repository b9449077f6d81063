//! Printing: human text on stdout, or exactly one JSON object with `--json`.

use std::io::Write;

use serde::Serialize;

/// A command's result: its JSON object and its human rendering.
pub struct Report {
    pub json: serde_json::Value,
    pub human: String,
    /// Exit 1 with this message (a refusal or negative answer).
    pub refusal: Option<String>,
    /// When set, printed instead of `human`.
    pub human_bytes: Option<Vec<u8>>,
    /// A non-zero exit status to pass on (`cairn run` exits with its command's).
    pub exit: Option<i32>,
    /// Print the refusal exactly as it is, without the `cairn: ` prefix.
    pub verbatim: bool,
}

impl Report {
    pub fn new(json: impl Serialize, human: impl Into<String>) -> Report {
        let json = serde_json::to_value(json).unwrap_or(serde_json::Value::Null);
        Report {
            json,
            human: human.into(),
            refusal: None,
            human_bytes: None,
            exit: None,
            verbatim: false,
        }
    }

    pub fn refused(mut self, message: impl Into<String>) -> Report {
        self.refusal = Some(message.into());
        self
    }

    /// A refusal whose message is fixed by the contract, printed exactly as given.
    pub fn refused_verbatim(mut self, message: impl Into<String>) -> Report {
        self.refusal = Some(message.into());
        self.verbatim = true;
        self
    }

    /// Exit with `code` if it is not zero.
    pub fn with_exit(mut self, code: i32) -> Report {
        self.exit = (code != 0).then_some(code);
        self
    }

    /// Human output that is raw bytes (file contents, patches of non-UTF-8 files).
    pub fn with_bytes(mut self, bytes: Vec<u8>) -> Report {
        self.human_bytes = Some(bytes);
        self
    }
}

/// Writes `bytes` to stdout, ignoring a closed pipe (`cairn show … | head`).
pub fn write_stdout(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes).and_then(|()| out.flush());
}

pub use diff::quote_path;

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
