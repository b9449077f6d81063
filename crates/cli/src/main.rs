//! `cairn`: content-addressed snapshots, isolated worktrees and merge-back for coding agents.
//!
//! The interface contract (commands, JSON fields, exit codes) is `shared/SPEC.md`; this binary
//! parses arguments, finds the store, calls the library crates and prints their outcomes.

mod commands;
mod context;
mod error;
mod output;
mod progress;

use std::process::ExitCode;

use camino::Utf8PathBuf;
use clap::{Parser, Subcommand};

use context::Ctx;
use error::CliError;
use output::{Render, Report};

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
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a store: PATH, else the one --store or $CAIRN_STORE names, else ./.cairn.
    Init {
        /// The store folder to create.
        path: Option<Utf8PathBuf>,
    },
    /// Snapshot directory SRC (working files, uncommitted changes included) and register it
    /// as an in-place worktree.
    Onboard {
        /// The directory.
        src: Utf8PathBuf,
        /// Snapshot message.
        #[arg(short, long)]
        message: Option<String>,
        /// A `key=value` label (repeatable).
        #[arg(long = "label", value_name = "K=V")]
        labels: Vec<String>,
        /// Keep deny-pattern paths (secrets such as .env, *.pem) in scope for this worktree.
        #[arg(long)]
        include_denied: bool,
        /// Import the tree of this git commit of SRC instead (registers no worktree).
        #[arg(long, value_name = "REV")]
        git: Option<String>,
        /// Leave files larger than this many bytes out of this worktree's captures (each
        /// one is reported in `skipped`).
        #[arg(long, value_name = "BYTES")]
        max_file_size: Option<u64>,
    },
    /// New snapshot of a worktree, parent = its head.
    Snapshot {
        /// The worktree (or a directory inside it).
        worktree: Utf8PathBuf,
        /// Snapshot message.
        #[arg(short, long)]
        message: Option<String>,
        /// A `key=value` label (repeatable).
        #[arg(long = "label", value_name = "K=V")]
        labels: Vec<String>,
    },
    /// Hydrate a snapshot into a new or empty directory and register it as a worktree.
    Checkout {
        /// The snapshot (ref name or id prefix).
        snapshot: String,
        /// The destination directory.
        dest: Utf8PathBuf,
    },
    /// Make a worktree's scope equal a snapshot (only the given paths, if any).
    Rollback {
        /// The worktree.
        worktree: Utf8PathBuf,
        /// The snapshot (ref name or id prefix).
        snapshot: String,
        /// List what would change; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Paths relative to the worktree root.
        #[arg(last = true)]
        paths: Vec<std::ffi::OsString>,
    },
    /// Three-way merge a snapshot into the git repository it was onboarded from, as a
    /// commit on a new branch (or, with --checkout, the current one); with conflicts, report
    /// them and change nothing.
    Merge {
        /// The snapshot (ref name or id prefix).
        snapshot: String,
        /// The git repository.
        #[arg(long, value_name = "REPO")]
        into: Utf8PathBuf,
        /// The common ancestor (default: the nearest ancestor onboarded from REPO).
        #[arg(long, value_name = "SNAP")]
        base: Option<String>,
        /// The branch to create (default cairn/<first 12 hex of SNAP>).
        #[arg(long, value_name = "B")]
        branch: Option<String>,
        /// Commit to the current branch and move index and working tree with it, if every
        /// path that changes is clean.
        #[arg(long)]
        checkout: bool,
        /// Commit message (default: the snapshot's).
        #[arg(short, long)]
        message: Option<String>,
    },
    /// The worktree registry.
    Worktree {
        #[command(subcommand)]
        action: commands::worktrees::WorktreeAction,
    },
    /// Compare two snapshots or worktrees (a path means its live files).
    Diff {
        /// A snapshot (ref name or id prefix) or a worktree path.
        a: String,
        /// A snapshot (ref name or id prefix) or a worktree path.
        b: String,
        /// Per-file counts and a summary, as git prints them.
        #[arg(long, conflicts_with = "name_status")]
        stat: bool,
        /// One line per file: status letter and path.
        #[arg(long)]
        name_status: bool,
        /// Lines of context around each change.
        #[arg(short = 'U', long = "unified", value_name = "N", default_value_t = 3)]
        context: u32,
        /// Exit 1 if anything differs.
        #[arg(long)]
        exit_code: bool,
        /// Only these paths (relative to the tree root; a directory means all below it).
        #[arg(last = true)]
        paths: Vec<std::ffi::OsString>,
    },
    /// Changes in a worktree since its head snapshot.
    Status {
        /// The worktree (default: the one holding the current directory).
        worktree: Option<Utf8PathBuf>,
        /// One status line: `[checkpoint: N files changed]`.
        #[arg(long)]
        short: bool,
    },
    /// Run a command confined to a worktree (Landlock): it may write only there and in a
    /// private temporary directory; secrets it touches are put back.
    Run {
        /// The worktree.
        worktree: Utf8PathBuf,
        /// Write nowhere but the private temporary directory (for verifiers).
        #[arg(long)]
        read_only: bool,
        /// Allow TCP bind and connect.
        #[arg(long)]
        network: bool,
        /// Also allow writing beneath PATH (repeatable).
        #[arg(long = "allow-write", value_name = "PATH")]
        allow_write: Vec<Utf8PathBuf>,
        /// Run unconfined (where Landlock is missing).
        #[arg(long)]
        no_sandbox: bool,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
    #[command(name = "__sandbox-exec", hide = true)]
    SandboxExec {
        policy: String,
        scratch: std::path::PathBuf,
        #[arg(last = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Print a file's bytes or a tree listing: SNAP, SNAP:PATH, or any object id.
    Show {
        /// A snapshot (ref name or id prefix), optionally `:PATH`, or a tree or blob id.
        object: String,
    },
    /// History, newest first.
    Log {
        /// A snapshot (ref name or id prefix) or a worktree path (default: the worktree
        /// holding the current directory).
        target: Option<String>,
        /// Show at most N snapshots.
        #[arg(short = 'n', long = "max-count", value_name = "N")]
        max_count: Option<usize>,
        /// Each snapshot's change summary against its first parent.
        #[arg(long)]
        stat: bool,
    },
    /// Named pointers that keep snapshots alive for gc.
    Ref {
        #[command(subcommand)]
        action: commands::refs::RefAction,
    },
    /// Verify every object and reference.
    Fsck,
    /// Drop what nothing reaches.
    Gc {
        /// Report what would be removed; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// First drop op-log entries older than DAYS days.
        #[arg(long, value_name = "DAYS")]
        prune_ops: Option<u32>,
    },
    /// Snapshot with a name on the worktree's checkpoint stack (onboards DIR in place if it
    /// is not a worktree yet; nothing git owns is touched). The first one starts a task.
    Checkpoint {
        /// The directory (default: the current one).
        dir: Option<Utf8PathBuf>,
        /// A name for it, usable wherever a snapshot is expected in this worktree.
        #[arg(long)]
        name: Option<String>,
        /// Snapshot message.
        #[arg(short, long)]
        message: Option<String>,
        /// Leave files larger than this many bytes out of this worktree's captures.
        #[arg(long, value_name = "BYTES")]
        max_file_size: Option<u64>,
    },
    /// Roll the worktree back to a checkpoint (default: the latest); later ones stay.
    Rewind {
        /// The worktree (default: the one holding the current directory).
        dir: Option<Utf8PathBuf>,
        /// A checkpoint name, ref name or id prefix.
        #[arg(long, value_name = "SNAP")]
        to: Option<String>,
        /// List what would change; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Revert the newest change set not yet undone, if its files are as it left them.
    Undo {
        /// The worktree (default: the one holding the current directory).
        dir: Option<Utf8PathBuf>,
    },
    /// Re-apply the newest undone change set, if its files are as the undo left them.
    Redo {
        /// The worktree (default: the one holding the current directory).
        dir: Option<Utf8PathBuf>,
    },
    /// The worktree's operation log.
    Op {
        #[command(subcommand)]
        action: commands::reversible::OpAction,
    },
    /// The task's changes against its baseline.
    Review {
        /// The worktree (default: the one holding the current directory).
        dir: Option<Utf8PathBuf>,
    },
    /// Keep the task's changes (only under the given paths, if any; else the task ends).
    Accept {
        /// The worktree (default: the one holding the current directory).
        dir: Option<Utf8PathBuf>,
        /// Paths relative to the worktree root.
        #[arg(last = true)]
        paths: Vec<std::ffi::OsString>,
    },
    /// Put the task's changes back to its baseline (only under the given paths, if any;
    /// else the task ends). `cairn undo` brings them back.
    Discard {
        /// The worktree (default: the one holding the current directory).
        dir: Option<Utf8PathBuf>,
        /// Do not ask before discarding everything.
        #[arg(long)]
        yes: bool,
        /// Paths relative to the worktree root.
        #[arg(last = true)]
        paths: Vec<std::ffi::OsString>,
    },
    /// Finish an operation that was interrupted (nothing to do: exit 0).
    Recover {
        /// The worktree (default: the one holding the current directory).
        dir: Option<Utf8PathBuf>,
    },
    /// A Model Context Protocol server on stdio exposing cairn's verbs as tools.
    Mcp,
    /// A foreground daemon that owns the store so many processes can use it at once; every
    /// other command uses it while it runs. Stops on SIGTERM.
    Serve {
        /// The socket (default: `serve.sock` in the store folder).
        #[arg(long, value_name = "PATH")]
        socket: Option<Utf8PathBuf>,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
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
            return fail(
                true,
                &CliError::usage("usage", first.trim_start_matches("error: ")),
            );
        }
        Err(e) => e.exit(),
    };
    // Refused up front, whatever the command: every store this process opens would use it.
    if let Err(e) = cas::OpenOptions::try_from_env() {
        return fail(cli.json, &e.into());
    }
    if let Command::Mcp = cli.command {
        return match commands::mcp::run(cli.store) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => fail(false, &e),
        };
    }
    let ctx = Ctx::new(cli.json, cli.store.clone());
    if forwardable(&cli.command) {
        match forward(&ctx, &cli) {
            Ok(Some(out)) => return out.emit(),
            Ok(None) => {}
            Err(e) => return fail(ctx.json, &e),
        }
    }
    match error::contain_panics(|| run(&ctx, cli.command)) {
        Ok(report) => finish(&ctx, report),
        Err(e) => fail(ctx.json, &e),
    }
}

/// The first argument before `--` that is not UTF-8, refused naming it in SPEC.md's quoted
/// form (clap would refuse it without saying which). Paths after `--` may be any bytes.
fn non_utf8_argument(args: impl Iterator<Item = std::ffi::OsString>) -> Option<CliError> {
    use std::os::unix::ffi::OsStrExt;
    let mut args = args.peekable();
    // The sandbox helper's arguments are cairn's own, not the user's.
    if args.peek().is_some_and(|a| a == "__sandbox-exec") {
        return None;
    }
    let bad = args
        .take_while(|a| a != "--")
        .find(|a| a.to_str().is_none())?;
    Some(CliError::usage(
        "invalid_path",
        format!(
            "{}: not valid UTF-8 (cairn takes paths and names in UTF-8, except paths after `--`)",
            output::quote_path(bad.as_bytes())
        ),
    ))
}

/// Commands a running `cairn serve` runs for us; the rest run here (`run` executes the
/// user's command in this process; `init` creates the store a server would open).
fn forwardable(command: &Command) -> bool {
    !matches!(
        command,
        Command::Init { .. }
            | Command::Run { .. }
            | Command::SandboxExec { .. }
            | Command::Mcp
            | Command::Serve { .. }
    )
}

/// `argv` naming `store` explicitly (the server resolves nothing from the caller's
/// environment): any `--store` given is replaced.
fn with_store(argv: &[String], store: &camino::Utf8Path) -> Vec<String> {
    let mut out = vec!["--store".to_owned(), store.to_string()];
    let mut args = argv.iter();
    while let Some(a) = args.next() {
        if a == "--" {
            out.push(a.clone());
            out.extend(args.by_ref().cloned());
            break;
        }
        if a == "--store" {
            args.next();
        } else if !a.starts_with("--store=") {
            out.push(a.clone());
        }
    }
    out
}

/// Runs this command line in the `cairn serve` holding the store, if one answers; `None`
/// when there is none (the command then opens the store itself).
fn forward(ctx: &Ctx, cli: &Cli) -> Result<Option<output::Rendered>, CliError> {
    let store = ctx.store_path()?;
    let socket = cairn_client::Client::socket_of(&store);
    let Ok(client) = cairn_client::Client::new(&socket) else {
        return Ok(None);
    };
    let mut argv = Vec::new();
    for a in std::env::args_os().skip(1) {
        match a.into_string() {
            Ok(a) => argv.push(a),
            Err(a) => {
                return Err(CliError::usage(
                    "invalid_path",
                    format!(
                        "{}: an argument that is not UTF-8 cannot be sent to the cairn serve holding {store}",
                        output::quote_path(std::os::unix::ffi::OsStrExt::as_bytes(a.as_os_str()))
                    ),
                ));
            }
        }
    }
    let mut argv = with_store(&argv, &store);
    // Asking before discarding everything needs this terminal, not the server's.
    if let Command::Discard {
        yes: false,
        paths,
        dir,
    } = &cli.command
        && paths.is_empty()
    {
        let dir = match dir {
            Some(d) => context::absolute(&context::current_dir()?, d),
            None => context::current_dir()?,
        };
        commands::reversible::confirm(&dir)?;
        argv.push("--yes".to_owned());
    }
    let request = cairn_client::CommandRequest {
        argv,
        cwd: context::current_dir()?,
        color: std::io::IsTerminal::is_terminal(&std::io::stdout())
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    };
    // On a terminal, draw the server's progress here.
    let reply = if std::io::IsTerminal::is_terminal(&std::io::stderr()) && !ctx.json {
        let bar = progress::Bar::new();
        client.command_streaming(&request, |e| bar.show(e))
    } else {
        client.command(&request)
    };
    match reply {
        Ok(out) => Ok(Some(out)),
        // A stale socket (the server was killed): open the store here instead.
        Err(e @ cairn_client::ClientError::Unavailable { .. }) => {
            tracing::debug!("not using a server: {e}");
            Ok(None)
        }
        Err(e) => Err(CliError::store("server", e.to_string())),
    }
}

/// Runs the command line `argv` (without the program name) as if from `cwd`, for another
/// process (`cairn mcp` tools), and returns what it would print.
pub(crate) fn dispatch(argv: &[String], cwd: Utf8PathBuf) -> output::Rendered {
    let line = std::iter::once("cairn".to_owned()).chain(argv.iter().cloned());
    if let Ok(cli) = Cli::try_parse_from(line) {
        let ctx = Ctx::new(cli.json, cli.store.clone());
        if let Ok(store) = context::with_request_dir(cwd.clone(), || ctx.store_path()) {
            let socket = cairn_client::Client::socket_of(&store);
            if let Ok(client) = cairn_client::Client::new(&socket) {
                let request = cairn_client::CommandRequest {
                    argv: with_store(argv, &store),
                    cwd: cwd.clone(),
                    color: false,
                };
                match client.command(&request) {
                    Ok(out) => return out,
                    Err(cairn_client::ClientError::Unavailable { .. }) => {}
                    Err(e) => {
                        return output::Rendered::error(
                            cli.json,
                            &CliError::store("server", e.to_string()),
                        );
                    }
                }
            }
        }
    }
    execute(argv, cwd, false, None)
}

/// Runs `argv` in this process; with `shared`, on that open store instead of opening one.
pub(crate) fn execute(
    argv: &[String],
    cwd: Utf8PathBuf,
    color: bool,
    shared: Option<context::SharedStore>,
) -> output::Rendered {
    let json_requested = argv.iter().any(|a| a == "--json");
    // No process's command line or directory can hold a NUL byte; one sent to the server is
    // bad input, as it would be from a shell, never a path to try.
    if let Some(bad) = argv
        .iter()
        .map(String::as_str)
        .chain([cwd.as_str()])
        .find(|a| a.contains('\0'))
    {
        return output::Rendered::error(
            json_requested,
            &CliError::usage(
                "invalid_input",
                format!(
                    "{}: contains a NUL byte, which no argument or path can",
                    diff::path_text(bad.as_bytes())
                ),
            ),
        );
    }
    let line = std::iter::once("cairn".to_owned()).chain(argv.iter().cloned());
    let cli = match Cli::try_parse_from(line) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            return output::Rendered {
                stdout: e.render().to_string().into_bytes(),
                ..output::Rendered::default()
            };
        }
        Err(e) => {
            let message = e.render().to_string();
            let first = message.lines().next().unwrap_or("invalid usage");
            return output::Rendered::error(
                json_requested,
                &CliError::usage("usage", first.trim_start_matches("error: ")),
            );
        }
    };
    if !forwardable(&cli.command) {
        return output::Rendered::error(
            cli.json,
            &CliError::usage(
                "usage",
                "this command runs only as its own process, not for another one",
            ),
        );
    }
    context::with_request(cwd, color, || {
        let ctx = match shared {
            Some(s) => Ctx::serving(cli.json, cli.store, s),
            None => Ctx::new(cli.json, cli.store),
        };
        match run(&ctx, cli.command) {
            Ok(report) => output::Rendered::report(ctx.json, report),
            Err(e) => output::Rendered::error(ctx.json, &e),
        }
    })
}

fn run(ctx: &Ctx, command: Command) -> Result<Report, CliError> {
    match command {
        Command::Init { path } => commands::init::run(ctx, path),
        Command::Onboard {
            src,
            message,
            labels,
            include_denied,
            git: Some(rev),
            ..
        } => commands::worktrees::import(
            ctx,
            &src,
            &rev,
            message.as_deref(),
            &labels,
            include_denied,
        ),
        Command::Onboard {
            src,
            message,
            labels,
            include_denied,
            git: None,
            max_file_size,
        } => commands::worktrees::onboard(
            ctx,
            &src,
            message.as_deref(),
            &labels,
            include_denied,
            max_file_size,
        ),
        Command::Snapshot {
            worktree,
            message,
            labels,
        } => commands::worktrees::snapshot(ctx, &worktree, message.as_deref(), &labels),
        Command::Checkout { snapshot, dest } => {
            commands::worktrees::checkout(ctx, &snapshot, &dest)
        }
        Command::Rollback {
            worktree,
            snapshot,
            dry_run,
            paths,
        } => commands::worktrees::rollback(ctx, &worktree, &snapshot, dry_run, &paths),
        Command::Merge {
            snapshot,
            into,
            base,
            branch,
            checkout,
            message,
        } => commands::merge::merge(
            ctx,
            &snapshot,
            &into,
            base.as_deref(),
            branch.as_deref(),
            checkout,
            message.as_deref(),
        ),
        Command::Worktree { action } => commands::worktrees::worktree(ctx, action),
        Command::Diff {
            a,
            b,
            stat,
            name_status,
            context,
            exit_code,
            paths,
        } => {
            let format = if stat {
                commands::diff::Format::Stat
            } else if name_status {
                commands::diff::Format::NameStatus
            } else {
                commands::diff::Format::Patch
            };
            let args = commands::diff::DiffArgs {
                a: &a,
                b: &b,
                format,
                context,
                exit_code,
                paths: &paths,
            };
            commands::diff::run(ctx, &args)
        }
        Command::Status { worktree, short } => {
            commands::diff::status(ctx, worktree.as_deref(), short)
        }
        Command::Run {
            worktree,
            read_only,
            network,
            allow_write,
            no_sandbox,
            command,
        } => {
            let args = commands::run::RunArgs {
                worktree: &worktree,
                read_only,
                network,
                allow_write: &allow_write,
                no_sandbox,
                command: &command,
            };
            commands::run::run(ctx, &args)
        }
        Command::SandboxExec {
            policy,
            scratch,
            command,
        } => commands::run::sandbox_exec(&policy, &scratch, &command),
        Command::Show { object } => commands::show::run(ctx, &object),
        Command::Log {
            target,
            max_count,
            stat,
        } => commands::log::run(ctx, target.as_deref(), max_count, stat),
        Command::Ref { action } => commands::refs::run(ctx, action),
        Command::Fsck => commands::maintenance::fsck(ctx),
        Command::Gc { dry_run, prune_ops } => commands::maintenance::gc(ctx, dry_run, prune_ops),
        Command::Checkpoint {
            dir,
            name,
            message,
            max_file_size,
        } => commands::reversible::checkpoint(
            ctx,
            dir.as_deref(),
            name.as_deref(),
            message.as_deref(),
            max_file_size,
        ),
        Command::Rewind { dir, to, dry_run } => {
            commands::reversible::rewind(ctx, dir.as_deref(), to.as_deref(), dry_run)
        }
        Command::Undo { dir } => commands::reversible::undo(ctx, dir.as_deref(), false),
        Command::Redo { dir } => commands::reversible::undo(ctx, dir.as_deref(), true),
        Command::Op { action } => commands::reversible::op(ctx, action),
        Command::Review { dir } => commands::reversible::review(ctx, dir.as_deref()),
        Command::Accept { dir, paths } => commands::reversible::accept(ctx, dir.as_deref(), &paths),
        Command::Discard { dir, yes, paths } => {
            commands::reversible::discard(ctx, dir.as_deref(), yes, &paths)
        }
        Command::Recover { dir } => commands::reversible::recover(ctx, dir.as_deref()),
        Command::Mcp => Err(CliError::usage("usage", "cairn mcp runs on its own")),
        Command::Serve { socket } => commands::serve::run(ctx, socket.as_deref()),
    }
}

fn finish(ctx: &Ctx, report: Report) -> ExitCode {
    output::Rendered::report(ctx.json, report).emit()
}

fn fail(json: bool, e: &CliError) -> ExitCode {
    output::Rendered::error(json, e).emit()
}
