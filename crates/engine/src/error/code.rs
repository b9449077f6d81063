//! The stable codes of errors: the one list, each with its exit status.

use super::{EXIT_STORE, EXIT_USAGE};

/// The stable code of an error, as `--json`, HTTP and MCP carry it (`invalid_path`, `io`,
/// ...). Its exit status: 2 for bad usage or input, 3 for a store or I/O failure.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
#[allow(missing_docs)]
pub enum Code {
    // Bad usage or input (exit 2).
    Usage,
    InvalidPath,
    InvalidInput,
    InvalidArguments,
    InvalidName,
    InvalidLabel,
    InvalidConfig,
    InvalidEnv,
    InvalidGrant,
    InvalidRemote,
    UnknownId,
    AmbiguousId,
    UnknownRef,
    UnknownRemote,
    UnknownGrant,
    UnknownRequest,
    NotOnRemote,
    NotAWorktree,
    NotAMount,
    NotMounted,
    NotEmpty,
    NotPermitted,
    NotConfirmed,
    NoStore,
    StoreMissing,
    NoGit,
    NoCheckpoint,
    NoTask,
    NoBase,
    NoTerminal,
    NothingToRewind,
    WorktreeExists,
    WorktreeMoved,
    RemoteExists,
    BranchExists,
    RepositoryBusy,
    MountBusy,
    Blocked,
    ConfirmationNeeded,
    Offline,
    FuseUnavailable,
    SandboxUnavailable,
    NeedsServer,
    TooLarge,
    TooManyRequests,
    CannotPush,
    // A store or I/O failure (exit 3).
    Io,
    Corrupt,
    Store,
    StoreBusy,
    StoreFormat,
    NoSpace,
    Interrupted,
    Mount,
    Git,
    Server,
    Mcp,
    Internal,
    RemoteTimeout,
    RemoteFailed,
    RemoteCredentials,
    RemoteCorrupt,
    RemoteFormat,
    NoConditionalWrites,
    RefMoved,
}

impl Code {
    /// The code's text (`invalid_path`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The exit status of an error with this code: 2 bad usage or input, 3 store or I/O.
    pub fn exit(self) -> u8 {
        use Code::*;
        match self {
            Io | Corrupt | Store | StoreBusy | StoreFormat | NoSpace | Interrupted | Mount
            | Git | Server | Mcp | Internal | RemoteTimeout | RemoteFailed | RemoteCredentials
            | RemoteCorrupt | RemoteFormat | NoConditionalWrites | RefMoved => EXIT_STORE,
            _ => EXIT_USAGE,
        }
    }

    /// Every code.
    pub fn all() -> &'static [Code] {
        <Code as strum::VariantArray>::VARIANTS
    }
}

/// A string, one of the codes.
impl schemars::JsonSchema for Code {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Code".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let codes: Vec<&str> = Code::all().iter().map(|c| c.as_str()).collect();
        schemars::json_schema!({
            "type": "string",
            "enum": codes,
            "description": "The stable code of an error (exit status 2: bad usage or input; 3: a store or I/O failure).",
        })
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_unique_snake_case_and_parses_back() {
        let mut seen = std::collections::HashSet::new();
        for &code in Code::all() {
            let text = code.as_str();
            assert!(seen.insert(text), "{text} twice");
            assert!(
                !text.is_empty()
                    && !text.starts_with('_')
                    && !text.ends_with('_')
                    && !text.contains("__")
                    && text.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{text} is not snake_case"
            );
            assert_eq!(text.parse::<Code>(), Ok(code), "{text}");
            assert!([EXIT_USAGE, EXIT_STORE].contains(&code.exit()), "{text}");
        }
        assert!("no_such_code".parse::<Code>().is_err());
    }

    #[test]
    fn exits_are_those_of_the_spec() {
        for (code, exit) in [
            (Code::InvalidPath, EXIT_USAGE),
            (Code::UnknownId, EXIT_USAGE),
            (Code::ConfirmationNeeded, EXIT_USAGE),
            (Code::NotPermitted, EXIT_USAGE),
            (Code::Io, EXIT_STORE),
            (Code::Corrupt, EXIT_STORE),
            (Code::NoSpace, EXIT_STORE),
            (Code::StoreBusy, EXIT_STORE),
            (Code::RefMoved, EXIT_STORE),
        ] {
            assert_eq!(code.exit(), exit, "{code}");
        }
    }
}
