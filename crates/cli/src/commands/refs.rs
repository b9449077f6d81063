//! `ref set|rm|list`: the subcommands.

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum RefAction {
    /// Point NAME (or NAME@REMOTE) at a snapshot.
    Set {
        /// The ref name, or NAME@REMOTE for a ref on a remote.
        name: String,
        /// The snapshot (ref name or id prefix).
        snapshot: String,
        /// For NAME@REMOTE: only if it still holds this snapshot (without: only if it does
        /// not exist).
        #[arg(long, value_name = "OLD")]
        expect: Option<String>,
    },
    /// Remove a ref (NAME@REMOTE: on the remote; ID@REMOTE: unpin a snapshot pushed by id).
    Rm {
        /// The ref name, NAME@REMOTE or ID@REMOTE.
        name: String,
        /// For NAME@REMOTE: only if it still holds this snapshot.
        #[arg(long, value_name = "OLD")]
        expect: Option<String>,
    },
    /// List refs (with --remote: a remote's).
    List {
        /// The remote whose refs to list.
        #[arg(long, value_name = "NAME")]
        remote: Option<String>,
    },
}
