//! `cairn`: content-addressed snapshots, isolated worktrees and merge-back for coding agents.
//!
//! The interface contract (commands, JSON fields, exit codes) is `shared/SPEC.md`; this binary
//! parses arguments into a `cairn_engine::Request`, has it run by the `cairn serve` holding
//! the store or by an engine in this process, and prints the typed outcome.

mod budget;
#[cfg(test)]
mod command_tree;
mod commands;
mod context;
mod error;
#[cfg(test)]
mod help_drift;
mod http;
mod output;
mod progress;
mod render;
mod target;
mod ui;

use std::ffi::OsString;
use std::process::ExitCode;

use cairn_engine::Request;
use camino::Utf8PathBuf;
use clap::Parser;

use commands::Command;
use context::Ctx;
use error::{CliError, Error};
use output::Rendered;
use render::View;
use target::Target;

#[derive(Parser, Debug)]
#[command(
    name = "cairn",
    version,
    about = "Content-addressed snapshots and worktrees for coding agents"
)]
struct Cli {
    /// Print exactly one JSON object on stdout.
    #[arg(long, global = true)]
    json: bool,
    /// The store folder (default: nearest .cairn/ above the current directory, else the
    /// per-user store).
    #[arg(long, global = true, env = "CAIRN_STORE", value_name = "PATH")]
    store: Option<Utf8PathBuf>,
    /// Never fetch from a remote: ids and NAME@REMOTE refs not in the store are unknown.
    #[arg(long, global = true)]
    offline: bool,
    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // A mount's prefetch reports its progress in the server's log.
                .unwrap_or_else(|_| {
                    tracing_subscriber::EnvFilter::new("warn,cairn::prefetch=info")
                }),
        )
        .with_writer(std::io::stderr)
        .init();

    let json_requested = std::env::args_os().any(|a| a == "--json");
    if let Some(e) = non_utf8_argument(std::env::args_os().skip(1)) {
        return fail(json_requested, &e);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if json_requested && e.use_stderr() => {
            let message = e.render().to_string();
            let first = message.lines().next().unwrap_or("invalid usage");
            let message = first.trim_start_matches("error: ").to_owned();
            return fail(true, &CliError::Usage { message }.into());
        }
        Err(e) => e.exit(),
    };
    // Refused up front, whatever the command: every store this process opens would use it.
    if let Err(e) = cairn_engine::OpenOptions::try_from_env() {
        return fail(cli.json, &e.into());
    }
    match &cli.command {
        Command::Completions(args) => {
            commands::completions::completions::<Cli>(args);
            return ExitCode::SUCCESS;
        }
        Command::Man(args) => {
            return match commands::man::man_pages::<Cli>(&args.dir) {
                Ok(written) => {
                    let listed: String = written.iter().map(|p| format!("{p}\n")).collect();
                    output::write_stdout(listed.as_bytes());
                    ExitCode::SUCCESS
                }
                Err(e) => fail(cli.json, &e),
            };
        }
        _ => {}
    }
    if let Command::Mcp(_) = cli.command {
        return match commands::mcp::run(cli.store) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(false, &e),
        };
    }
    let mut ctx = Ctx::new(cli.json, cli.store.clone());
    ctx.offline = cli.offline;
    // A server runs for long: the commands that call it say it, each once.
    let check_budget = !matches!(cli.command, Command::Serve(_));
    let code = match error::contain_panics(|| run(&ctx, cli.command)) {
        Ok(out) => out.emit(),
        Err(e) => fail(ctx.json, &e),
    };
    if check_budget {
        warn_past_budget(&ctx);
    }
    code
}

/// Says on stderr if the command's store is past `CAIRN_STORE_BUDGET`.
fn warn_past_budget(ctx: &Ctx) {
    let value = std::env::var_os(budget::STORE_BUDGET_VAR);
    if value.is_none() {
        return;
    }
    let Some(cwd) = std::env::current_dir()
        .ok()
        .and_then(|d| Utf8PathBuf::from_path_buf(d).ok())
    else {
        return;
    };
    let Ok(store) = ctx.store_path(&cwd) else {
        return;
    };
    if let Some(said) = budget::warning(&store, value.as_deref()) {
        eprintln!("{said}");
    }
}

/// The first argument before `--` that is not UTF-8, refused naming it in SPEC.md's quoted
/// form (clap would refuse it without saying which). Paths after `--` may be any bytes.
fn non_utf8_argument(args: impl Iterator<Item = OsString>) -> Option<Error> {
    use std::os::unix::ffi::OsStrExt;
    let mut args = args.peekable();
    // The sandbox helper's arguments are cairn's own, not the user's.
    if args.peek().is_some_and(|a| a == "__sandbox-exec") {
        return None;
    }
    let bad = args
        .take_while(|a| a != "--")
        .find(|a| a.to_str().is_none())?;
    Some(
        CliError::ArgumentNotUtf8 {
            path: output::quote_path(bad.as_bytes()),
        }
        .into(),
    )
}

fn run(ctx: &Ctx, command: Command) -> Result<Rendered, Error> {
    let report = match command {
        Command::Init(args) => commands::init::run(ctx, args)?,
        Command::Run(args) => commands::run::run(ctx, args)?,
        Command::SandboxExec(args) => commands::run::sandbox_exec(&args),
        Command::MaterializeCopy(args) => {
            commands::materialize_copy::run(&args)?;
            return Ok(Rendered::default());
        }
        Command::Mcp(_) | Command::Completions(_) | Command::Man(_) => {
            return Err(CliError::RunsOnItsOwn.into());
        }
        Command::Rewind(args) if args.interactive => {
            return commands::picker::rewind(ctx, args.dir);
        }
        Command::Serve(args) => commands::serve::run(ctx, args)?,
        Command::Ui(args) => {
            commands::ui::run(ctx, args)?;
            return Ok(Rendered::default());
        }
        other => {
            let (request, view) = other.request(ctx.json)?;
            return perform(ctx, request, view);
        }
    };
    Ok(Rendered::report(ctx.json, report))
}

/// Runs `request` where the store is (its server, or here) and renders the outcome.
fn perform(ctx: &Ctx, request: Request, mut view: View) -> Result<Rendered, Error> {
    use std::io::IsTerminal;
    let cwd = context::current_dir()?;
    let store = ctx.store_path(&cwd)?;
    let target = Target::for_request(&store, ctx.offline, &request)?;
    view.color = context::colour();
    let bar = progress::Bar::new();
    // A server's progress is streamed only to be drawn here.
    let stream = std::io::stderr().is_terminal() && !ctx.json;
    // Granting asks a person on this terminal first, naming what it grants.
    let request = match request {
        Request::PolicyAllow(options) => {
            Request::PolicyAllow(commands::policy::ask(&target, &cwd, options)?)
        }
        other => other,
    };
    let granting = matches!(request, Request::PolicyAllow(_));
    let answer = match target.call(&cwd, request.clone(), &bar, stream) {
        // Asking before discarding everything needs this terminal.
        Err(e) => match (e.confirmation_root(), request) {
            (Some(root), Request::Discard(mut options)) if commands::discard::confirm(root)? => {
                options.yes = true;
                target.call(&cwd, Request::Discard(options), &bar, stream)
            }
            _ => Err(e),
        },
        other => other,
    };
    let (outcome, _exit) = answer?;
    if let (true, cairn_engine::Outcome::PolicyRequest(asked)) = (granting, &outcome) {
        // A server that does not know this binary for its own takes it as an agent.
        return Err(CliError::OtherServerBinary {
            worktree: asked.worktree.clone(),
            request: asked.requested.unwrap_or_default(),
        }
        .into());
    }
    Ok(Rendered::report(ctx.json, render::report(&outcome, &view)))
}

fn fail(json: bool, e: &Error) -> ExitCode {
    Rendered::error(json, e).emit()
}
