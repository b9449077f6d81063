//! Printing: human text on stdout, or exactly one JSON object with `--json`.

use std::io::Write;

use serde::Serialize;

use crate::error::Error;

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
    /// Notes for stderr (`cairn: NOTE`), in JSON mode too.
    pub notes: Vec<String>,
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
            notes: Vec::new(),
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

/// What a command prints and its exit status, before it is printed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// Bytes for standard output.
    pub stdout: Vec<u8>,
    /// Text for standard error.
    pub stderr: String,
    /// The exit status: 0 success, 1 refusal, 2 bad input, 3 store or I/O failure.
    pub code: u8,
}

impl Rendered {
    pub fn report(json_mode: bool, report: Report) -> Rendered {
        let mut out = Rendered::default();
        for note in &report.notes {
            out.stderr.push_str(&format!("cairn: {note}\n"));
        }
        if json_mode {
            let mut json = report.json;
            if let (Some(message), Some(obj)) = (&report.refusal, json.as_object_mut()) {
                obj.insert("message".into(), message.clone().into());
            }
            out.stdout = format!("{json}\n").into_bytes();
        } else {
            out.stdout = report
                .human_bytes
                .unwrap_or_else(|| report.human.into_bytes());
            match &report.refusal {
                Some(message) if report.verbatim => out.stderr.push_str(&format!("{message}\n")),
                Some(message) => out.stderr.push_str(&format!("cairn: {message}\n")),
                None => {}
            }
        }
        out.code = match report.exit {
            Some(code) => u8::try_from(code).unwrap_or(1),
            None if report.refusal.is_some() => 1,
            None => 0,
        };
        out
    }

    pub fn error(json_mode: bool, e: &Error) -> Rendered {
        let mut out = Rendered::default();
        if json_mode {
            out.stdout = format!("{}\n", error_json(e)).into_bytes();
        } else {
            out.stderr = format!("cairn: error: {e}\n");
        }
        out.code = if e.exit() == 0 {
            cairn_engine::EXIT_USAGE
        } else {
            e.exit()
        };
        out
    }

    /// Prints it and returns the exit status.
    pub fn emit(&self) -> std::process::ExitCode {
        write_stdout(&self.stdout);
        if !self.stderr.is_empty() {
            eprint!("{}", self.stderr);
        }
        std::process::ExitCode::from(self.code)
    }
}

/// `--json`'s error object, `{"error": {"code", "message"}}` (also a verb route's and an
/// MCP tool's).
pub fn error_json(e: &Error) -> serde_json::Value {
    let obj = ErrorJson {
        error: ErrorBody {
            code: e.code(),
            message: e.to_string(),
        },
    };
    serde_json::to_value(obj).unwrap_or_default()
}

#[derive(Serialize)]
struct ErrorJson<'a> {
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: &'a str,
    message: String,
}

/// Writes `bytes` to stdout, ignoring a closed pipe (`cairn show … | head`).
pub fn write_stdout(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes).and_then(|()| out.flush());
}

pub use diff::quote_path;

/// A path for JSON: as it is when valid UTF-8, else in the quoted form.
pub use diff::path_text as json_path;

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
