//! `cairn checkout SNAP DEST`: hydrate a snapshot into a new worktree.

use cairn_engine::{CheckoutOptions, CheckoutOutcome, Request, verbs};
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
        }
    }
}

impl Human for verbs::Checkout {
    fn report(o: &CheckoutOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, checkout(o))
    }
}

fn checkout(o: &CheckoutOutcome) -> String {
    format!(
        "checked out {} into {} ({} files, {} bytes)\n",
        o.snapshot, o.worktree, o.files, o.bytes
    )
}
