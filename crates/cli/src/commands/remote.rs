//! `cairn remote add|rm|list`: where snapshots go to be shared.

use cairn_engine::{RemoteAddOptions, RemoteListOptions, RemoteRmOptions, Request};
use clap::Subcommand;

/// Remotes: where snapshots go to be shared across machines.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    action: RemoteAction,
}

#[derive(Subcommand, Debug)]
enum RemoteAction {
    /// Add a remote: s3://BUCKET[/PREFIX] on any S3-compatible engine, or file:///PATH.
    /// Credentials come from the AWS environment variables and files, never the store.
    Add {
        /// Its name here (the default remote is `origin`).
        name: String,
        /// s3://BUCKET[/PREFIX] or file:///PATH.
        url: String,
        /// The S3 endpoint, for engines other than AWS (http:// allowed).
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
        /// The S3 region.
        #[arg(long, value_name = "R")]
        region: Option<String>,
    },
    /// Forget a remote (nothing on it changes).
    Rm {
        /// Its name.
        name: String,
    },
    /// List remotes.
    List,
}

impl Args {
    pub fn request(self) -> Request {
        match self.action {
            RemoteAction::Add {
                name,
                url,
                endpoint,
                region,
            } => Request::RemoteAdd(RemoteAddOptions {
                name,
                url,
                endpoint,
                region,
            }),
            RemoteAction::Rm { name } => Request::RemoteRm(RemoteRmOptions { name }),
            RemoteAction::List => Request::RemoteList(RemoteListOptions {}),
        }
    }
}
