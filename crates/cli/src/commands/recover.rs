//! `cairn recover [DIR]`: finish an interrupted operation.

use cairn_engine::{RecoverOptions, RecoverOutcome, Request, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View};

/// Finish an operation that was interrupted (nothing to do: exit 0).
#[derive(clap::Args, Debug)]
#[command(display_order = 34)]
pub struct Args {
    /// The worktree (default: the one holding the current directory).
    dir: Option<Utf8PathBuf>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Recover(self.into()))
    }
}

impl From<Args> for RecoverOptions {
    fn from(args: Args) -> RecoverOptions {
        RecoverOptions { dir: args.dir }
    }
}

impl Human for verbs::Recover {
    fn report(o: &RecoverOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, recover(o))
    }
}

fn recover(o: &RecoverOutcome) -> String {
    match (&o.commit, &o.recovered) {
        (Some(commit), _) => format!(
            "finished the interrupted merge --checkout in {} ({} paths); HEAD is at {commit}\n",
            o.worktree, o.paths
        ),
        (None, Some(op)) => format!(
            "finished the interrupted {op} in {} ({} paths)\n",
            o.worktree, o.paths
        ),
        (None, None) => format!("nothing to recover in {}\n", o.worktree),
    }
}
