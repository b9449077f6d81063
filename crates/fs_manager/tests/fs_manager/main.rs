//! Integration tests for `fs_manager` over temporary directories.

mod capture;
mod checkout;
mod hostile;
mod races;
mod registry;
mod rollback;
mod scope;
mod support;
mod undo;
mod walk;
