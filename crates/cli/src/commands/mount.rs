//! `cairn mount [SNAP] DIR`: a copy-on-write worktree served by `cairn serve`.

use cairn_engine::{MountOptions, MountOutcome, Request, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View};

/// Mount a snapshot at DIR as a copy-on-write worktree, ready at once (`cairn mount DIR`
/// attaches a registered mount again). Served by `cairn serve`, started if none runs.
#[derive(clap::Args, Debug)]
#[command(display_order = 7)]
pub struct Args {
    /// The snapshot, then the directory; or only the directory of a registered mount.
    #[arg(num_args = 1..=2, value_name = "SNAP DIR")]
    args: Vec<String>,
    /// Refuse every write.
    #[arg(long)]
    read_only: bool,
    /// For a snapshot read from a remote: fetch the rest of its files in the background
    /// (`worktree list` shows how far it is).
    #[arg(long)]
    prefetch: bool,
    /// Leave out the dependency layers the snapshot's lockfiles name (with a snapshot: a
    /// mount attached again shows those it was made with).
    #[arg(long)]
    no_deps: bool,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Mount(self.into()))
    }
}

impl From<Args> for MountOptions {
    fn from(args: Args) -> MountOptions {
        let Args {
            mut args,
            read_only,
            prefetch,
            no_deps,
        } = args;
        // The last one is the directory, the one before it (if any) the snapshot.
        let dir = Utf8PathBuf::from(args.pop().unwrap_or_default());
        MountOptions {
            snapshot: args.pop(),
            dir,
            read_only,
            prefetch,
            no_deps,
        }
    }
}

impl Human for verbs::Mount {
    fn report(o: &MountOutcome, json: serde_json::Value, _: &View) -> Report {
        let mut text = format!(
            "mounted {} at {}{}{}\n",
            o.snapshot
                .map(|s| s.short(12))
                .unwrap_or_else(|| "-".into()),
            o.worktree,
            if o.read_only { " (read-only)" } else { "" },
            match &o.remote {
                Some(r) => format!(" (files fetched from remote {r} when first read)"),
                None => String::new(),
            }
        );
        for d in &o.deps {
            text.push_str(&format!(
                "  dependency layer {} at {} ({} files)\n",
                d.key.get(..12).unwrap_or(&d.key),
                d.path,
                d.files
            ));
        }
        Report::new(json, text)
    }
}
