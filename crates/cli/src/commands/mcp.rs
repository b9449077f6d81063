//! `cairn mcp`: a Model Context Protocol server on stdio. Each tool is the engine verb of
//! the same name, run by `cairn serve` when one holds the store, else by the one engine of
//! this process (calls at once share it; between calls the store is closed); it returns
//! the verb's JSON object; a refusal or error comes back as a tool error with the same
//! object (`{"error": {"code", "message"}}` for an error), so the model sees the message.
//! A call cancelled before it starts (while it waits for the store) never starts; one
//! cancelled later finishes and answers (`mcp_stdio`). `policy_allow` grants nothing by
//! itself: see [`super::mcp_grant`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use camino::Utf8PathBuf;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

use cairn_engine::{Call, Face, Outcome, Request, Verb};

use crate::commands::OwnCommand;
use crate::commands::mcp_stdio::{Calls, Stdio};
use crate::commands::verbs::schema;
use crate::error::{CliError, Error, io_error};
use crate::progress::Bar;
use crate::target::{Shared, Target};

#[derive(Clone)]
struct Server {
    /// `--store` given to `cairn mcp`, passed on to every command.
    store: Option<Utf8PathBuf>,
    cwd: Utf8PathBuf,
    /// The engine calls share when no `cairn serve` holds the store.
    engines: Arc<Shared>,
    /// Where each call is, for cancellations.
    calls: Calls,
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cairn", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "cairn: content-addressed snapshots of worktrees. Snapshot after every change; \
                 pass snapshot ids between agents; undo, rewind or roll back any change; merge \
                 the result into the user's git repository.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = Verb::all()
            .iter()
            .filter(|v| v.on(Face::Tool))
            .map(|v| {
                let tool = Tool::new(v.name(), v.description(), schema(v));
                if v.reads_only() {
                    tool.annotate(ToolAnnotations::new().read_only(true))
                } else {
                    tool
                }
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let id = context.id.clone();
        // A call that answers without starting a command (a bad tool or arguments) is
        // answered too, unless it was cancelled first.
        match self.answer(request, &context).await {
            Some(answer) if self.calls.proceed(&id) => answer,
            // Cancelled before it started: nothing ran, and no answer goes out (rmcp
            // drops it).
            _ => Err(ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                "cancelled before it started",
                None,
            )),
        }
    }
}

impl Server {
    /// The answer to a tool call; `None` if it was cancelled before it started.
    async fn answer(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        let Some(spec) = Verb::named(request.name.as_ref()).filter(|v| v.on(Face::Tool)) else {
            return Some(Err(ErrorData::invalid_params(
                format!("no such tool: {}", request.name),
                None,
            )));
        };
        let args = request.arguments.unwrap_or_default();
        let request = match spec.request(args) {
            Ok(request) => request,
            Err(e) => {
                let text = format!("invalid arguments for {}: {e}", spec.name());
                return Some(Ok(
                    CallToolResult::error(vec![ContentBlock::text(text)]).into()
                ));
            }
        };
        if let Request::PolicyAllow(options) = request {
            // Cancelled before its first request ran: nothing ran.
            let cancelled = AtomicBool::new(false);
            let perform = |request| {
                let cancelled = &cancelled;
                async move {
                    match self.run(context, request).await {
                        Some(answer) => answer.map(|(outcome, _)| outcome),
                        None => {
                            cancelled.store(true, Ordering::Relaxed);
                            Err(CliError::McpCancelled.into())
                        }
                    }
                }
            };
            let (body, is_error) =
                super::mcp_grant::policy_allow(options, &context.peer, perform).await;
            if cancelled.load(Ordering::Relaxed) {
                return None;
            }
            let content = vec![ContentBlock::text(body.to_string())];
            let result = if is_error {
                CallToolResult::error(content)
            } else {
                CallToolResult::success(content)
            };
            return Some(Ok(result.into()));
        }
        let (text, code) = match self.run(context, request).await? {
            Ok((outcome, exit)) => (outcome.to_json().to_string(), exit),
            Err(e) => (crate::output::error_json(&e).to_string(), e.exit()),
        };
        let result = if code == 0 {
            CallToolResult::success(vec![ContentBlock::text(text)])
        } else {
            CallToolResult::error(vec![ContentBlock::text(text)])
        };
        Some(Ok(result.into()))
    }

    /// Runs `request` on the server holding the store, else on this process's engine once
    /// it has the store (waiting while another process holds it). `None` if the call was
    /// cancelled before it started.
    async fn run(
        &self,
        context: &RequestContext<RoleServer>,
        request: Request,
    ) -> Option<Result<(Outcome, u8), Error>> {
        let id = &context.id;
        let store = match cairn_engine::discover_store(self.store.as_deref(), &self.cwd) {
            Ok(store) => store,
            Err(e) => return Some(Err(e)),
        };
        let cwd = self.cwd.clone();
        let (to_find, wanted) = (store.clone(), request.clone());
        let server = blocking(move || Target::server(&to_find, false, &wanted))
            .await
            .and_then(|server| server);
        match server {
            Ok(Some(server)) => {
                if !self.calls.proceed(id) {
                    return None;
                }
                let (cwd, request) = (cwd.clone(), request.clone());
                let answer =
                    blocking(move || server.on_server(&cwd, request, &Bar::hidden(), false)).await;
                match answer {
                    Ok(Some(answer)) => return Some(answer),
                    Err(e) => return Some(Err(e)),
                    // No server answers there (a stale socket): run here.
                    Ok(None) => {}
                }
            }
            Ok(None) => {}
            Err(e) => return Some(Err(e)),
        }
        // A read runs offline first, beside other reads (the store opened read-only): one
        // that would fetch what the store lacks from a remote fails so, and runs again as
        // a write does.
        let mut read_first = request.reads_only();
        loop {
            let held = async {
                if read_first {
                    Ok(self.engines.hold_to_read(&store).await)
                } else {
                    self.engines.hold(&store).await
                }
            };
            let engine = tokio::select! {
                held = held => held,
                () = context.ct.cancelled() => return None,
            };
            let engine = match engine {
                Ok(engine) => engine,
                Err(e) => return Some(Err(e)),
            };
            if !self.calls.proceed(id) {
                return None;
            }
            let (cwd, request) = (cwd.clone(), request.clone());
            let offline = read_first;
            let answer = blocking(move || {
                let call = Call::new(cwd).offline(offline);
                let outcome = engine.isolated(|| engine.handle(&call, request))?;
                let exit = outcome.exit();
                Ok((outcome, exit))
            })
            .await
            .and_then(|answer| answer);
            if read_first && answer.is_err() {
                read_first = false;
                continue;
            }
            return Some(answer);
        }
    }
}

/// Runs `f` on a blocking thread.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Error> {
    tokio::task::spawn_blocking(f).await.map_err(|source| {
        CliError::Task {
            what: "the command failed to run".to_owned(),
            source,
        }
        .into()
    })
}

/// A Model Context Protocol server on stdio exposing cairn's verbs as tools.
#[derive(clap::Args, Debug)]
#[group(skip)]
#[command(display_order = 35)]
pub struct Args {}

impl OwnCommand for Args {}

/// `cairn mcp`: serves until the client closes stdin.
pub fn run(store: Option<Utf8PathBuf>) -> Result<(), Error> {
    let cwd = crate::context::current_dir()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| io_error("starting the MCP server", e))?;
    runtime.block_on(async {
        let calls = Calls::default();
        let server = Server {
            store,
            cwd,
            engines: Arc::new(Shared::new(crate::target::open_options())),
            calls: calls.clone(),
        };
        let service = server
            .serve(Stdio::new(calls))
            .await
            .map_err(|e| CliError::Mcp {
                what: "MCP handshake on stdio",
                source: Box::new(e),
            })?;
        service.waiting().await.map_err(|e| CliError::Mcp {
            what: "MCP server",
            source: Box::new(e),
        })?;
        Ok::<(), Error>(())
    })
}
