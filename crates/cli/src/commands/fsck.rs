//! `cairn fsck`: verify the store.

use cairn_engine::FsckOptions;

/// Verify every object and reference.
#[derive(clap::Args, Debug)]
#[group(skip)]
pub struct Args {}

impl From<Args> for FsckOptions {
    fn from(_: Args) -> FsckOptions {
        FsckOptions {}
    }
}
