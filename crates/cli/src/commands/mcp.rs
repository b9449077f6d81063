//! `cairn mcp`: a Model Context Protocol server on stdio. Each tool runs the cairn command
//! of the same name with `--json` (through `cairn serve` when one holds the store) and
//! returns its JSON object; a refusal or error comes back as a tool error with the same
//! object, so the model sees the message.

use camino::Utf8PathBuf;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;

use crate::commands::verbs::{TOOLS, argv, schema};
use crate::error::CliError;
use crate::output::Report;

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
        _context: RequestContext<RoleServer>,
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
        let mut line = match argv(spec, &args) {
            Ok(line) => line,
            Err(e) => {
                let text = format!("invalid arguments for {}: {e}", spec.name);
                return Ok(CallToolResult::error(vec![ContentBlock::text(text)]).into());
            }
        };
        if let Some(store) = &self.store {
            line.splice(0..0, ["--store".to_owned(), store.to_string()]);
        }
        let cwd = self.cwd.clone();
        let out = tokio::task::spawn_blocking(move || crate::dispatch(&line, cwd))
            .await
            .map_err(|e| {
                ErrorData::internal_error(format!("the command failed to run: {e}"), None)
            })?;
        let text = String::from_utf8_lossy(&out.stdout).trim_end().to_owned();
        let result = if out.code == 0 {
            CallToolResult::success(vec![ContentBlock::text(text)])
        } else {
            CallToolResult::error(vec![ContentBlock::text(text)])
        };
        Ok(result.into())
    }
}

/// `cairn mcp`: serves until the client closes stdin.
pub fn run(store: Option<Utf8PathBuf>) -> Result<Report, CliError> {
    let cwd = crate::context::current_dir()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::store("io", format!("starting the MCP server: {e}")))?;
    runtime.block_on(async {
        let server = Server { store, cwd };
        let service = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| CliError::store("mcp", format!("MCP handshake on stdio: {e}")))?;
        service
            .waiting()
            .await
            .map_err(|e| CliError::store("mcp", format!("MCP server: {e}")))?;
        Ok::<(), CliError>(())
    })?;
    Ok(Report::new(json!({}), String::new()))
}
