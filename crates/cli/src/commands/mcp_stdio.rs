//! `cairn mcp`'s stdio transport: newline-delimited JSON-RPC, framed with rmcp's own codec
//! but answering what rmcp's stdio transport drops in silence (a line over the size limit
//! or not JSON, a message that is not JSON-RPC, a request whose params do not fit its
//! method), and deciding what a `notifications/cancelled` may still stop: a tool call that
//! has not started never starts (rmcp drops its answer); one that has started finishes
//! and answers (the cancellation is not passed on, so rmcp does not drop the answer).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::BytesMut;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestMethod, CallToolRequestParams, ClientNotification, ClientRequest, ConstString,
    ErrorData, InitializeResultMethod, JsonRpcMessage, ListToolsRequestMethod, PingRequestMethod,
    RequestId,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::codec::Decoder;

/// The longest message line read (rmcp's own limit for stdio): a longer one is answered
/// with an error and skipped, never buffered whole.
pub const MAX_LINE_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// The requests this server answers (besides rmcp's own): params that do not fit one of
/// them are invalid params, not an unknown method.
const SERVED: &[&str] = &[
    InitializeResultMethod::VALUE,
    PingRequestMethod::VALUE,
    ListToolsRequestMethod::VALUE,
    CallToolRequestMethod::VALUE,
];

/// Bytes asked of stdin at a time.
const READ_BYTES: usize = 64 << 10;

/// Where a tool call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Received; its command has not started (it may be waiting for the store).
    Waiting,
    /// Its command runs, or its answer is on its way: it will be answered.
    Started,
    /// Cancelled before it started: it never starts and is not answered.
    Cancelled,
}

/// The tool calls under way, by request id, shared by the transport (which sees them
/// arrive, be cancelled and be answered) and the handler (which starts them).
#[derive(Clone, Default)]
pub struct Calls(Arc<Mutex<HashMap<RequestId, Phase>>>);

impl Calls {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Phase>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn arrived(&self, id: &RequestId) {
        self.table().entry(id.clone()).or_insert(Phase::Waiting);
    }

    /// Whether a cancellation of `id` is passed on: not once its call has started.
    fn cancel(&self, id: &RequestId) -> bool {
        match self.table().get_mut(id) {
            Some(phase @ Phase::Waiting) => {
                *phase = Phase::Cancelled;
                true
            }
            Some(Phase::Started) => false,
            Some(Phase::Cancelled) | None => true,
        }
    }

    fn answered(&self, id: &RequestId) {
        self.table().remove(id);
    }

    /// Whether the call `id` goes on: false if it was cancelled before now (it is then
    /// forgotten); otherwise it counts as started from now on, and will be answered.
    pub fn proceed(&self, id: &RequestId) -> bool {
        let mut table = self.table();
        if table.get(id) == Some(&Phase::Cancelled) {
            table.remove(id);
            return false;
        }
        table.insert(id.clone(), Phase::Started);
        true
    }
}

type Output = Arc<tokio::sync::Mutex<Option<tokio::io::Stdout>>>;

/// The transport on this process's stdin and stdout.
pub struct Stdio {
    input: tokio::io::Stdin,
    buffer: BytesMut,
    codec: JsonRpcMessageCodec<serde_json::Value>,
    ended: bool,
    output: Output,
    calls: Calls,
}

impl Stdio {
    pub fn new(calls: Calls) -> Stdio {
        Stdio {
            input: tokio::io::stdin(),
            buffer: BytesMut::new(),
            codec: JsonRpcMessageCodec::new_with_max_length(MAX_LINE_BYTES),
            ended: false,
            output: Arc::new(tokio::sync::Mutex::new(Some(tokio::io::stdout()))),
            calls,
        }
    }

    /// Answers a line that is no message rmcp can take, with `error` (for request `id`, if
    /// it has one), and goes on with the next line. Written by a task of its own, so
    /// `receive` stays safe to cancel.
    fn refuse(&self, id: Option<RequestId>, error: ErrorData) {
        tracing::debug!(?id, message = %error.message, "refused a message");
        let line = TxJsonRpcMessage::<RoleServer>::error(error, id);
        let output = self.output.clone();
        tokio::spawn(async move {
            if let Err(e) = write(&output, &line).await {
                tracing::warn!("answering a malformed message: {e}");
            }
        });
    }

    /// The message a line holds, or `None` once it is answered or dropped here.
    fn message(&self, value: serde_json::Value) -> Option<RxJsonRpcMessage<RoleServer>> {
        let message = match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value.clone()) {
            Ok(message) => message,
            Err(e) => {
                let id = value
                    .get("id")
                    .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
                let method = value.get("method").and_then(serde_json::Value::as_str);
                match (method, id) {
                    // Unknown methods are read as custom ones: a known method's params
                    // did not fit.
                    (Some(method), Some(id)) => self.refuse(
                        Some(id),
                        ErrorData::invalid_params(format!("params of {method}: {e}"), None),
                    ),
                    // A notification is never answered.
                    (Some(method), None) if value.get("id").is_none() => {
                        tracing::debug!("dropped notification {method}: {e}");
                    }
                    (_, id) => self.refuse(
                        id,
                        ErrorData::invalid_request(
                            format!("not a JSON-RPC 2.0 message: {e}"),
                            None,
                        ),
                    ),
                }
                return None;
            }
        };
        match &message {
            JsonRpcMessage::Request(r)
                if matches!(r.request, ClientRequest::CallToolRequest(_)) =>
            {
                self.calls.arrived(&r.id);
            }
            // rmcp reads a method it knows whose params do not fit as a custom one, and
            // answers that the method is not found.
            JsonRpcMessage::Request(r) => {
                if let ClientRequest::CustomRequest(custom) = &r.request
                    && SERVED.contains(&custom.method.as_str())
                {
                    let why = match custom.params_as::<CallToolRequestParams>() {
                        Err(e) if custom.method == CallToolRequestMethod::VALUE => e.to_string(),
                        _ => "they do not fit it".to_owned(),
                    };
                    self.refuse(
                        Some(r.id.clone()),
                        ErrorData::invalid_params(
                            format!("params of {}: {why}", custom.method),
                            None,
                        ),
                    );
                    return None;
                }
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                    && !self.calls.cancel(id)
                {
                    tracing::info!(%id, "the call has started: it finishes and answers");
                    return None;
                }
            }
            _ => {}
        }
        Some(message)
    }
}

async fn write(output: &Output, message: &TxJsonRpcMessage<RoleServer>) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    let mut output = output.lock().await;
    let Some(out) = output.as_mut() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "the transport is closed",
        ));
    };
    out.write_all(&line).await?;
    out.flush().await
}

impl Transport<RoleServer> for Stdio {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let output = self.output.clone();
        let calls = self.calls.clone();
        async move {
            match &item {
                JsonRpcMessage::Response(r) => calls.answered(&r.id),
                JsonRpcMessage::Error(e) => {
                    if let Some(id) = &e.id {
                        calls.answered(id);
                    }
                }
                _ => {}
            }
            write(&output, &item).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let decoded = if self.ended {
                self.codec.decode_eof(&mut self.buffer)
            } else {
                self.codec.decode(&mut self.buffer)
            };
            match decoded {
                Ok(Some(value)) => match self.message(value) {
                    Some(message) => return Some(message),
                    None => continue,
                },
                Ok(None) if self.ended => return None,
                Ok(None) => {}
                Err(JsonRpcMessageCodecError::MaxLineLengthExceeded) => {
                    self.refuse(
                        None,
                        ErrorData::invalid_request(
                            format!("a message line longer than {MAX_LINE_BYTES} bytes"),
                            None,
                        ),
                    );
                    continue;
                }
                Err(JsonRpcMessageCodecError::Serde(e)) => {
                    self.refuse(None, ErrorData::parse_error(format!("not JSON: {e}"), None));
                    continue;
                }
                Err(e) => {
                    tracing::error!("reading stdin: {e}");
                    return None;
                }
            }
            // Cancel safe: what a dropped read took stays in the stdin handle's buffer.
            self.buffer.reserve(READ_BYTES);
            match self.input.read_buf(&mut self.buffer).await {
                Ok(0) => self.ended = true,
                Ok(_) => {}
                Err(e) => {
                    tracing::error!("reading stdin: {e}");
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        if let Some(mut out) = self.output.lock().await.take() {
            out.flush().await?;
        }
        Ok(())
    }
}
