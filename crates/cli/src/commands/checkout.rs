//! `cairn checkout SNAP DEST`: hydrate a snapshot into a new worktree.

use cairn_engine::{AttachedDeps, CheckoutOptions, CheckoutOutcome, Request, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View};

/// Hydrate a snapshot into a new or empty directory and register it as a worktree.
#[derive(clap::Args, Debug)]
#[command(display_order = 6)]
pub struct Args {
    /// The snapshot (ref name or id prefix).
    snapshot: String,
    /// The destination directory.
    dest: Utf8PathBuf,
    /// Leave dependency layers (node_modules, .venv, ... saved by `cairn deps save`) out.
    #[arg(long)]
    no_deps: bool,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Checkout(self.into()))
    }
}

impl From<Args> for CheckoutOptions {
    fn from(args: Args) -> CheckoutOptions {
        CheckoutOptions {
            snapshot: args.snapshot,
            dest: args.dest,
            no_deps: args.no_deps,
        }
    }
}

impl Human for verbs::Checkout {
    fn report(o: &CheckoutOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, checkout(o))
    }
}

fn checkout(o: &CheckoutOutcome) -> String {
    let mut text = format!(
        "checked out {} into {} ({} files, {} bytes)\n",
        o.snapshot, o.worktree, o.files, o.bytes
    );
    text.push_str(&attached(&o.deps));
    text
}

/// A line for each dependency layer written into a folder (`checkout`, `verify`).
pub(crate) fn attached(deps: &[AttachedDeps]) -> String {
    let mut text = String::new();
    for d in deps {
        let cloned = match d.cloned {
            Some(n) if n > 0 => format!(", {n} cloned"),
            _ => String::new(),
        };
        text.push_str(&format!(
            "attached dependency layer {} at {} ({} files, {} bytes{cloned})\n",
            d.key.chars().take(12).collect::<String>(),
            d.path,
            d.files,
            d.bytes
        ));
    }
    text
}
