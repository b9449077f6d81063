//! `cairn unmount DIR`: unmount a mounted worktree.

use cairn_engine::{Request, UnmountOptions, UnmountOutcome, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View};

/// Unmount a mounted worktree (its layer stays for the next `mount`).
#[derive(clap::Args, Debug)]
#[command(display_order = 8)]
pub struct Args {
    /// The mounted worktree.
    dir: Utf8PathBuf,
    /// Leave an ordinary directory with the worktree's current files instead.
    #[arg(long)]
    materialize: bool,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Unmount(self.into()))
    }
}

impl From<Args> for UnmountOptions {
    fn from(args: Args) -> UnmountOptions {
        UnmountOptions {
            dir: args.dir,
            materialize: args.materialize,
        }
    }
}

impl Human for verbs::Unmount {
    fn report(o: &UnmountOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(
            json,
            if o.materialized {
                format!(
                    "unmounted {}; its files are an ordinary directory now\n",
                    o.worktree
                )
            } else {
                format!("unmounted {}\n", o.worktree)
            },
        )
    }
}
