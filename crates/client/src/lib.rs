//! `cairn-client`: the wire types of `cairn serve`'s HTTP API and a client for it.
//!
//! `cairn serve` owns a store and answers HTTP/1.1 + JSON on a Unix socket in the store
//! folder (`serve.sock`). Every cairn command can run there: [`CommandRequest`] carries the
//! command line and the caller's directory, [`CommandOutput`] the exact bytes it printed
//! and its exit status, so a command gives the same result through the daemon as without
//! it. The per-verb routes (`/v1/snapshot`, `/v1/checkout`, ...) and the content-addressed
//! object routes are described in `docs/openapi.yaml`.
#![deny(unsafe_code, clippy::unwrap_used)]
#![warn(missing_docs)]

use camino::Utf8PathBuf;

/// The socket's file name inside the store folder.
pub const SOCKET_NAME: &str = "serve.sock";

/// Run one cairn command line (without the program name) as if from `cwd`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommandRequest {
    /// The arguments after `cairn`, e.g. `["--json", "snapshot", "wt"]`.
    pub argv: Vec<String>,
    /// The directory relative paths are resolved against.
    pub cwd: Utf8PathBuf,
}

/// What a command printed and its exit status.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommandOutput {
    /// Bytes for standard output (base64 on the wire: file contents need not be UTF-8).
    #[serde(with = "bytes")]
    pub stdout: Vec<u8>,
    /// Text for standard error.
    pub stderr: String,
    /// The exit status: 0 success, 1 refusal, 2 bad input, 3 store or I/O failure.
    pub code: u8,
}

/// Serde for byte strings as base64 text.
pub mod bytes {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;

    /// Writes `v` as base64.
    pub fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }

    /// Reads base64.
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}
