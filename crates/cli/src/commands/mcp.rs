//! `cairn mcp`: a Model Context Protocol server on stdio. Each tool is the engine verb of
//! the same name, run by `cairn serve` when one holds the store, else by an engine here; it
//! returns the verb's JSON object; a refusal or error comes back as a tool error with the
//! same object (`{"error": {"code", "message"}}` for an error), so the model sees the
//! message. `policy_allow` grants nothing by itself: see [`super::mcp_grant`].

use camino::Utf8PathBuf;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

use cairn_engine::{Outcome, Request};

use crate::commands::verbs::{TOOLS, check, schema};
use crate::error::Error;
use crate::progress::Bar;
use crate::target::Target;

#[derive(Clone)]
struct Server {
    /// `--store` given to `cairn mcp`, passed on to every command.
    store: Option<Utf8PathBuf>,
    cwd: Utf8PathBuf,
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
        let tools = TOOLS
            .iter()
            .filter(|t| t.mcp)
            .map(|t| Tool::new(t.name, t.description, schema(t)))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(spec) = TOOLS
            .iter()
            .find(|t| t.mcp && t.name == request.name.as_ref())
        else {
            return Err(ErrorData::invalid_params(
                format!("no such tool: {}", request.name),
                None,
            ));
        };
        let args = request.arguments.unwrap_or_default();
        let request = match check(spec, &args).and_then(|a| Request::from_verb(spec.name, a)) {
            Ok(request) => request,
            Err(e) => {
                let text = format!("invalid arguments for {}: {e}", spec.name);
                return Ok(CallToolResult::error(vec![ContentBlock::text(text)]).into());
            }
        };
        if let Request::PolicyAllow(options) = request {
            let perform = |request| async move {
                match self.perform(request).await {
                    Ok(answer) => answer.map(|(outcome, _)| outcome),
                    Err(e) => Err(Error::failure("mcp", e.message.to_string())),
                }
            };
            let (body, is_error) =
                super::mcp_grant::policy_allow(options, &context.peer, perform).await;
            let content = vec![ContentBlock::text(body.to_string())];
            let result = if is_error {
                CallToolResult::error(content)
            } else {
                CallToolResult::success(content)
            };
            return Ok(result.into());
        }
        let answer = self.perform(request).await?;
        let (text, code) = match answer {
            Ok((outcome, exit)) => (outcome.to_json().to_string(), exit),
            Err(e) => (crate::output::error_json(&e).to_string(), e.exit()),
        };
        let result = if code == 0 {
            CallToolResult::success(vec![ContentBlock::text(text)])
        } else {
            CallToolResult::error(vec![ContentBlock::text(text)])
        };
        Ok(result.into())
    }
}

impl Server {
    /// Runs `request` where the store is (its server, or an engine here), on a blocking
    /// thread.
    async fn perform(&self, request: Request) -> Result<Result<(Outcome, u8), Error>, ErrorData> {
        let (store, cwd) = (self.store.clone(), self.cwd.clone());
        tokio::task::spawn_blocking(move || {
            let store = cairn_engine::discover_store(store.as_deref(), &cwd)?;
            Target::for_request(&store, false, &request)?.call(&cwd, request, &Bar::hidden(), false)
        })
        .await
        .map_err(|e| ErrorData::internal_error(format!("the command failed to run: {e}"), None))
    }
}

/// `cairn mcp`: serves until the client closes stdin.
pub fn run(store: Option<Utf8PathBuf>) -> Result<(), Error> {
    let cwd = crate::context::current_dir()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::failure("io", format!("starting the MCP server: {e}")))?;
    runtime.block_on(async {
        let server = Server { store, cwd };
        let service = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| Error::failure("mcp", format!("MCP handshake on stdio: {e}")))?;
        service
            .waiting()
            .await
            .map_err(|e| Error::failure("mcp", format!("MCP server: {e}")))?;
        Ok::<(), Error>(())
    })
}
