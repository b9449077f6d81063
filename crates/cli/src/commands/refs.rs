//! `ref set|rm|list`: the subcommands.

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum RefAction {
    /// Point NAME at a snapshot.
    Set {
        /// The ref name.
        name: String,
        /// The snapshot (ref name or id prefix).
        snapshot: String,
    },
    /// Remove a ref.
    Rm {
        /// The ref name.
        name: String,
    },
    /// List refs.
    List,
}
