//! `cairn ui`: a local web page over the store (see [`crate::ui`]).

use crate::commands::OwnCommand;
use crate::context::Ctx;
use crate::error::Error;

/// A local web page over the store for people supervising agents: worktrees, timelines,
/// diffs, checks, attempts side by side, and the actions rewind, accept/discard, combine
/// and merge. Served on 127.0.0.1 only, to requests that carry the token of the URL it
/// prints; runs in the foreground until SIGTERM or Ctrl-C.
#[derive(clap::Args, Debug)]
#[command(display_order = 45)]
pub struct Args {
    /// The port to listen on (0: a free one).
    #[arg(long, value_name = "N", default_value_t = 0)]
    port: u16,
    /// Open the page in the browser (`xdg-open`).
    #[arg(long)]
    open: bool,
}

impl OwnCommand for Args {}

/// `cairn ui [--port N] [--open]`: prints the URL (with `--json`, `{"url": ...}`) once it
/// listens, then serves until stopped.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), Error> {
    let cwd = crate::context::current_dir()?;
    let store = ctx.store_path(&cwd)?;
    crate::ui::serve(&store, args.port, ctx.offline, |url| {
        let line = if ctx.json {
            format!("{}\n", serde_json::json!({ "url": url }))
        } else {
            format!("{url}\n")
        };
        crate::output::write_stdout(line.as_bytes());
        eprintln!("cairn ui: store {store}; open the URL above (Ctrl-C stops)");
        if args.open {
            open_in_browser(url);
        }
    })
}

/// Runs `xdg-open URL`; a failure is a warning: the URL is printed anyway.
fn open_in_browser(url: &str) {
    let opened = std::process::Command::new("xdg-open")
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match opened {
        // Reaped when it ends (xdg-open may outlive a quick look).
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(e) => {
            eprintln!("cairn ui: warning: could not run xdg-open ({e}); open the URL by hand")
        }
    }
}
