//! HTTP/1.1 on the server's Unix socket (hyper, on a runtime of this thread). Nothing
//! here speaks TLS, so making a client reads no certificate store: a call through a
//! server costs what the call costs.

use bytes::Bytes;
use camino::{Utf8Path, Utf8PathBuf};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

/// Why a request failed: before anything was sent (the caller may go elsewhere), or after.
pub(crate) enum Failure {
    Unsent(TransportError),
    Sent(TransportError),
}

/// What failed in talking to the server; shown as the failure underneath says it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TransportError {
    /// Connecting to the socket.
    #[error("{0}")]
    Connect(#[source] std::io::Error),
    /// HTTP on the connection: the handshake, the request or the reply's body.
    #[error("{0}")]
    Http(#[source] hyper::Error),
    /// Building the request.
    #[error("{0}")]
    Request(#[source] hyper::http::Error),
}

/// One server's socket.
pub(crate) struct Transport {
    socket: Utf8PathBuf,
    runtime: tokio::runtime::Runtime,
}

/// A reply whose body is read as it arrives.
pub(crate) struct Reply<'a> {
    pub(crate) status: u16,
    pub(crate) content_type: Option<String>,
    body: Incoming,
    runtime: &'a tokio::runtime::Runtime,
}

impl Transport {
    pub(crate) fn new(socket: &Utf8Path) -> std::io::Result<Transport> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?;
        Ok(Transport {
            socket: socket.to_owned(),
            runtime,
        })
    }

    /// Sends `method path` with `body` (JSON) on a new connection.
    pub(crate) fn send(
        &self,
        method: hyper::Method,
        path: &str,
        body: Option<Vec<u8>>,
        accept: Option<&str>,
    ) -> Result<Reply<'_>, Failure> {
        self.runtime.block_on(async {
            let stream = tokio::net::UnixStream::connect(self.socket.as_std_path())
                .await
                .map_err(|e| Failure::Unsent(TransportError::Connect(e)))?;
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .map_err(|e| Failure::Unsent(TransportError::Http(e)))?;
            tokio::spawn(connection);
            let mut request = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header(hyper::header::HOST, "cairn");
            if let Some(accept) = accept {
                request = request.header(hyper::header::ACCEPT, accept);
            }
            if body.is_some() {
                request = request.header(hyper::header::CONTENT_TYPE, "application/json");
            }
            let request = request
                .body(Full::new(Bytes::from(body.unwrap_or_default())))
                .map_err(|e| Failure::Unsent(TransportError::Request(e)))?;
            let response = sender.send_request(request).await.map_err(|e| {
                if cut_while_written(&e) {
                    Failure::Unsent(TransportError::Http(e))
                } else {
                    Failure::Sent(TransportError::Http(e))
                }
            })?;
            Ok(Reply {
                status: response.status().as_u16(),
                content_type: response
                    .headers()
                    .get(hyper::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
                body: response.into_body(),
                runtime: &self.runtime,
            })
        })
    }
}

/// The server closed the connection while the request was still being written: a write,
/// never a read, fails with EPIPE on a Unix socket. It never had the whole request, and a
/// route runs only on a whole one, so nothing was done (a server that died just after
/// accepting the connection).
fn cut_while_written(e: &hyper::Error) -> bool {
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::BrokenPipe;
        }
        cause = c.source();
    }
    false
}

impl Reply<'_> {
    /// The next piece of the body, or `None` at its end.
    pub(crate) fn chunk(&mut self) -> Result<Option<Bytes>, TransportError> {
        self.runtime.block_on(async {
            loop {
                match self.body.frame().await {
                    None => return Ok(None),
                    Some(Err(e)) => return Err(TransportError::Http(e)),
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            return Ok(Some(data));
                        }
                    }
                }
            }
        })
    }

    /// The whole body.
    pub(crate) fn bytes(mut self) -> Result<Vec<u8>, TransportError> {
        let mut out = Vec::new();
        while let Some(c) = self.chunk()? {
            out.extend_from_slice(&c);
        }
        Ok(out)
    }
}
