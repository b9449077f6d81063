//! `cairn-client`: the wire types of `cairn serve`'s HTTP API and a client for it.
//!
//! `cairn serve` owns a store and answers HTTP/1.1 + JSON on a Unix socket in the store
//! folder (`serve.sock`). Every verb has a route (`/v1/snapshot`, `/v1/checkout`, ...)
//! taking its JSON arguments and answering its JSON object; `/v1/call` takes any verb's
//! typed request as the `cairn` CLI sends it; the content-addressed object routes move
//! objects between stores. All are described in `docs/openapi.yaml`. This crate is the
//! transport: the request and outcome types are `cairn-engine`'s, and with the feature
//! `engine` [`Client::run`] sends and answers them typed.
#![deny(unsafe_code, clippy::unwrap_used)]
#![warn(missing_docs)]

use camino::{Utf8Path, Utf8PathBuf};

mod transport;
#[cfg(feature = "engine")]
mod typed;

#[cfg(feature = "engine")]
pub use typed::Answer;

/// The socket's file name inside the store folder.
pub const SOCKET_NAME: &str = "serve.sock";

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

/// Which kind of object an id names, as the object routes write it (`blob`, `tree`,
/// `snapshot`): the store's `ObjectKind` on the wire, declared here so that the client
/// without its `engine` feature does not link the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireObjectKind {
    /// File content; its id is the BLAKE3 of the bytes.
    Blob,
    /// A directory listing in cairn's canonical encoding (`docs/format.md`).
    Tree,
    /// A snapshot (commit object) in cairn's canonical encoding.
    Snapshot,
}

/// An object named by kind and id (64 hex digits).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ObjectRef {
    /// Its kind.
    pub kind: WireObjectKind,
    /// Its id, lowercase hex.
    pub id: String,
}

/// An object with its bytes: a blob's content, or a tree's or snapshot's canonical
/// encoding. The server recomputes the id from the bytes and refuses a mismatch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Object {
    /// Its kind.
    pub kind: WireObjectKind,
    /// Its id, lowercase hex.
    pub id: String,
    /// Its bytes (base64 on the wire).
    #[serde(with = "bytes")]
    pub data: Vec<u8>,
}

/// Talking to `cairn serve` failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// No server answers on the socket (none running, or a stale socket file).
    #[error("no cairn server answers on {socket}: {reason}")]
    Unavailable {
        /// The socket path.
        socket: Utf8PathBuf,
        /// Why.
        reason: String,
        /// The failure `reason` tells of (I/O, HTTP, encoding), when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The server went away during a request: the request may or may not have taken effect.
    #[error(
        "cairn server on {socket} went away during the request ({reason}); it may or may not have completed"
    )]
    Interrupted {
        /// The socket path.
        socket: Utf8PathBuf,
        /// Why.
        reason: String,
        /// The failure `reason` tells of (HTTP, decoding), when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The server answered with an error status.
    #[error("cairn server on {socket} answered {status}: {body}")]
    Status {
        /// The socket path.
        socket: Utf8PathBuf,
        /// The HTTP status.
        status: u16,
        /// The response body.
        body: String,
    },
}

/// The failure under a [`ClientError`] (the HTTP library's own types are not part of
/// this crate's interface).
type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

impl ClientError {
    /// No server answers on `socket`, for `reason` (told by `source`, if there is one).
    fn unavailable(socket: &Utf8Path, reason: String, source: Option<BoxError>) -> ClientError {
        ClientError::Unavailable {
            socket: socket.to_owned(),
            reason,
            source,
        }
    }

    /// The server on `socket` went away, for `reason` (told by `source`, if there is one).
    fn interrupted(socket: &Utf8Path, reason: String, source: Option<BoxError>) -> ClientError {
        ClientError::Interrupted {
            socket: socket.to_owned(),
            reason,
            source,
        }
    }

    /// `source`, as the reason of the error `make` makes.
    fn of(
        make: fn(&Utf8Path, String, Option<BoxError>) -> ClientError,
        socket: &Utf8Path,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> ClientError {
        make(socket, source.to_string(), Some(Box::new(source)))
    }
}

/// A blocking client of one `cairn serve`.
pub struct Client {
    http: transport::Transport,
    socket: Utf8PathBuf,
    /// Calls never fetch from a remote (used by typed calls, feature `engine`).
    #[cfg_attr(not(feature = "engine"), allow(dead_code))]
    offline: bool,
}

impl Client {
    /// A client of the server listening on `socket`, if a socket file is there. No request
    /// is made: a stale socket shows as [`ClientError::Unavailable`] on the first call, before
    /// anything was sent.
    pub fn new(socket: &camino::Utf8Path) -> Result<Client, ClientError> {
        if !socket.exists() {
            return Err(ClientError::unavailable(
                socket,
                "no socket file".into(),
                None,
            ));
        }
        let http = transport::Transport::new(socket)
            .map_err(|e| ClientError::of(ClientError::unavailable, socket, e))?;
        Ok(Client {
            offline: false,
            http,
            socket: socket.to_owned(),
        })
    }

    /// A client of the server listening on `socket`, if one answers there (checked with a
    /// health request).
    pub fn connect(socket: &camino::Utf8Path) -> Result<Client, ClientError> {
        let client = Client::new(socket)?;
        match client
            .http
            .send(hyper::Method::GET, "/v1/health", None, None)
        {
            Ok(reply) if (200..300).contains(&reply.status) => Ok(client),
            Ok(reply) => Err(ClientError::unavailable(
                socket,
                format!("health: status {}", reply.status),
                None,
            )),
            Err(transport::Failure::Unsent(e) | transport::Failure::Sent(e)) => {
                Err(ClientError::of(ClientError::unavailable, socket, e))
            }
        }
    }

    /// The socket of the server serving the store folder `store`.
    pub fn socket_of(store: &camino::Utf8Path) -> Utf8PathBuf {
        store.join(SOCKET_NAME)
    }

    fn post<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &impl serde::Serialize,
    ) -> Result<(u16, T), ClientError> {
        let body = serde_json::to_vec(body).map_err(|e| {
            ClientError::unavailable(
                &self.socket,
                format!("encoding the request: {e}"),
                Some(Box::new(e)),
            )
        })?;
        let response = self
            .http
            .send(hyper::Method::POST, path, Some(body), None)
            .map_err(|e| self.send_failed(e))?;
        let status = response.status;
        let text = response
            .bytes()
            .map_err(|e| ClientError::of(ClientError::interrupted, &self.socket, e))?;
        let text = String::from_utf8_lossy(&text).into_owned();
        match serde_json::from_str(&text) {
            Ok(v) => Ok((status, v)),
            Err(_) => Err(ClientError::Status {
                socket: self.socket.clone(),
                status,
                body: text,
            }),
        }
    }

    fn expect_ok<T>(
        &self,
        (status, v): (u16, T),
        raw: impl Fn(&T) -> String,
    ) -> Result<T, ClientError> {
        if (200..300).contains(&status) {
            Ok(v)
        } else {
            Err(ClientError::Status {
                socket: self.socket.clone(),
                status,
                body: raw(&v),
            })
        }
    }

    /// Calls a verb (`snapshot`, `checkout`, `undo`, ...; see `docs/openapi.yaml`) with its
    /// JSON arguments. Returns the HTTP status (200 success, 409 a refusal or a conflict,
    /// 400 a malformed request, 404 what it names is not there, 422 a well-formed request
    /// the command cannot carry out, 502/504 a remote failed, 500 a store failure) and the
    /// command's JSON object.
    pub fn call(
        &self,
        verb: &str,
        args: &serde_json::Value,
    ) -> Result<(u16, serde_json::Value), ClientError> {
        self.post(&format!("/v1/{verb}"), args)
    }

    /// Posts `body` to the route `path`: the HTTP status and the JSON reply.
    pub fn post_json(
        &self,
        path: &str,
        body: &impl serde::Serialize,
    ) -> Result<(u16, serde_json::Value), ClientError> {
        self.post(path, body)
    }

    /// Which of `objects` the store lacks.
    pub fn find_missing(&self, objects: &[ObjectRef]) -> Result<Vec<ObjectRef>, ClientError> {
        let reply = self.post::<serde_json::Value>(
            "/v1/objects/find_missing",
            &serde_json::json!({ "objects": objects }),
        )?;
        let v = self.expect_ok(reply, |v| v.to_string())?;
        self.field(&v, "missing")
    }

    /// A field of a reply, or an error quoting the reply.
    fn field<T: serde::de::DeserializeOwned>(
        &self,
        v: &serde_json::Value,
        name: &str,
    ) -> Result<T, ClientError> {
        serde_json::from_value(v[name].clone()).map_err(|e| ClientError::Status {
            socket: self.socket.clone(),
            status: 200,
            body: format!("unexpected reply ({name}: {e}): {v}"),
        })
    }

    /// Stores `objects` (each verified by the server); returns how many were new.
    pub fn put_objects(&self, objects: &[Object]) -> Result<u64, ClientError> {
        let reply = self.post::<serde_json::Value>(
            "/v1/objects/put",
            &serde_json::json!({ "objects": objects }),
        )?;
        let v = self.expect_ok(reply, |v| v.to_string())?;
        self.field(&v, "stored")
    }

    /// The stored objects among `objects`, and the ids that are missing.
    pub fn get_objects(
        &self,
        objects: &[ObjectRef],
    ) -> Result<(Vec<Object>, Vec<ObjectRef>), ClientError> {
        let reply = self.post::<serde_json::Value>(
            "/v1/objects/get",
            &serde_json::json!({ "objects": objects }),
        )?;
        let v = self.expect_ok(reply, |v| v.to_string())?;
        Ok((self.field(&v, "objects")?, self.field(&v, "missing")?))
    }
}

/// Progress of a long call (checkout, onboard, rollback), streamed as NDJSON lines
/// `{"progress": …}` before the final `{"reply": …}` when a request asks for
/// `application/x-ndjson`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProgressEvent {
    /// What is under way (`checkout`, `snapshot`, ...).
    pub what: String,
    /// Files done so far.
    pub files: u64,
    /// Files in all.
    pub total_files: u64,
    /// Bytes done so far.
    pub bytes: u64,
    /// Bytes in all.
    pub total_bytes: u64,
    /// True on the last event of this phase.
    pub done: bool,
}

/// One line of a streamed reply.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamLine {
    /// Progress so far.
    Progress(ProgressEvent),
    /// The reply: what the route answers without streaming; the last line.
    Reply {
        /// Its HTTP status.
        status: u16,
        /// Its JSON body.
        body: serde_json::Value,
    },
}

impl Client {
    /// A request that could not be sent whole. Refused at connect: nothing was sent, so
    /// the caller may go elsewhere; otherwise it may or may not have been carried out.
    fn send_failed(&self, e: transport::Failure) -> ClientError {
        match e {
            transport::Failure::Unsent(e) => {
                ClientError::of(ClientError::unavailable, &self.socket, e)
            }
            transport::Failure::Sent(e) => {
                ClientError::of(ClientError::interrupted, &self.socket, e)
            }
        }
    }

    /// [`Client::post_json`], with progress events passed to `on_progress` as they arrive.
    pub fn post_json_streaming(
        &self,
        path: &str,
        body: &impl serde::Serialize,
        mut on_progress: impl FnMut(&ProgressEvent),
    ) -> Result<(u16, serde_json::Value), ClientError> {
        let gone = |reason: String| ClientError::interrupted(&self.socket, reason, None);
        let transport = |e| ClientError::of(ClientError::interrupted, &self.socket, e);
        let body = serde_json::to_vec(body).map_err(|e| {
            ClientError::interrupted(
                &self.socket,
                format!("encoding the request: {e}"),
                Some(Box::new(e)),
            )
        })?;
        let mut response = self
            .http
            .send(
                hyper::Method::POST,
                path,
                Some(body),
                Some("application/x-ndjson"),
            )
            .map_err(|e| self.send_failed(e))?;
        let is_stream = response
            .content_type
            .as_deref()
            .is_some_and(|v| v.starts_with("application/x-ndjson"));
        if !is_stream {
            // Refused before it ran (bad request): a plain JSON answer.
            let status = response.status;
            let text = response.bytes().map_err(transport)?;
            let text = String::from_utf8_lossy(&text).into_owned();
            return match serde_json::from_str(&text) {
                Ok(v) => Ok((status, v)),
                Err(_) => Err(ClientError::Status {
                    socket: self.socket.clone(),
                    status,
                    body: text,
                }),
            };
        }
        let mut pending: Vec<u8> = Vec::new();
        loop {
            while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = &line[..line.len() - 1];
                match serde_json::from_slice::<StreamLine>(line) {
                    Ok(StreamLine::Progress(p)) => on_progress(&p),
                    Ok(StreamLine::Reply { status, body }) => return Ok((status, body)),
                    Err(e) => {
                        return Err(ClientError::interrupted(
                            &self.socket,
                            format!("unreadable line {:?}: {e}", String::from_utf8_lossy(line)),
                            Some(Box::new(e)),
                        ));
                    }
                }
            }
            match response.chunk().map_err(transport)? {
                Some(chunk) => pending.extend_from_slice(&chunk),
                None => break,
            }
        }
        Err(gone("the reply ended before the call's outcome".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::StreamLine;

    /// A socket file no server listens on: the call is refused before anything is sent,
    /// with the message as before, and the I/O error is kept as the error's cause.
    #[test]
    fn a_socket_nobody_listens_on_is_unavailable_with_its_io_error_kept() {
        let dir = std::env::temp_dir().join(format!("cairn-client-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = camino::Utf8PathBuf::try_from(dir.join("cairn.sock")).unwrap();
        std::fs::write(&socket, b"").unwrap();
        let err = super::Client::connect(&socket)
            .err()
            .expect("nothing listens");
        std::fs::remove_dir_all(&dir).unwrap();
        let super::ClientError::Unavailable { reason, .. } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(
            err.to_string(),
            format!("no cairn server answers on {socket}: {reason}")
        );
        let mut cause = std::error::Error::source(&err);
        let mut io = None;
        while let Some(e) = cause {
            io = io.or(e.downcast_ref::<std::io::Error>());
            cause = e.source();
        }
        let io = io.expect("the I/O error is kept");
        assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
        assert_eq!(*reason, io.to_string());
    }

    /// A server that stops reading a connection before the request is whole (one dying
    /// as a command connects: the write fails with EPIPE) ran nothing: the call is
    /// unavailable, so the command goes elsewhere, not "went away, may or may not have
    /// completed".
    #[test]
    fn a_request_cut_while_written_is_unavailable() {
        let dir = std::env::temp_dir().join(format!("cairn-client-cut-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = camino::Utf8PathBuf::try_from(dir.join("cairn.sock")).unwrap();
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            conn.shutdown(std::net::Shutdown::Read).unwrap();
            // Held open (no EOF for the client to read) until the call is over.
            let _ = finished.recv();
        });
        let client = super::Client::new(&socket).unwrap();
        // More than a socket's buffer holds, so the write is still going.
        let body = serde_json::json!({ "message": "x".repeat(8 << 20) });
        let err = client.call("snapshot", &body).expect_err("nobody answers");
        drop(done);
        server.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            matches!(err, super::ClientError::Unavailable { .. }),
            "{err:?}"
        );
    }

    /// Found by the `serve_call` fuzz target: an integer too large for 64 bits is read as a
    /// float, and without correctly rounded parsing it came back a different number once
    /// written and read again, so a streamed reply changed in transit.
    #[test]
    fn a_streamed_reply_reads_back_as_it_was_written() {
        let line = br#"{"reply":{"status":204,"body":{"bytes":333333333333333333333333333333333333333333333333333333333333333333333333333333333333333,"f":0.1,"g":1e-320,"h":-2.2250738585072014e-308}}}"#;
        let first: StreamLine = serde_json::from_slice(line).expect("a reply line");
        let written = serde_json::to_vec(&first).expect("encodes");
        let again: StreamLine = serde_json::from_slice(&written).expect("decodes");
        assert_eq!(
            String::from_utf8(serde_json::to_vec(&again).expect("encodes")).expect("utf-8"),
            String::from_utf8(written).expect("utf-8")
        );
    }
}
