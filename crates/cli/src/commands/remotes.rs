//! `remote add|rm|list`: the subcommands.

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum RemoteAction {
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
