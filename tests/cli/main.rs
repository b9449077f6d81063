//! End-to-end tests of the `cairn` binary: exit codes, JSON shapes and messages as
//! `shared/SPEC.md` fixes them.

mod api_contract;
mod big_files;
mod combine_commands;
mod crash_recovery;
mod damaged_store;
mod diff_commands;
mod engines;
mod full_disk;
mod fuzz_seeds;
mod human_output;
mod import_commands;
mod mcp_client;
mod merge_commands;
mod mount_commands;
mod mount_lifecycle;
mod mount_posix;
mod mount_scope;
mod picker;
mod pjdfstest;
mod policy_commands;
mod remote_commands;
mod remote_engines;
mod reversible_commands;
mod run_commands;
mod run_faces;
mod serve_commands;
mod serve_watch;
mod shell_docs;
mod store_apart;
mod store_budget;
mod store_commands;
mod store_upgrade;
mod support;
mod verify_commands;
mod worktree_commands;
