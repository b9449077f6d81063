//! Integration tests for `fs_manager` over temporary directories.

mod capture;
mod checkout;
mod hostile;
mod rollback;
mod scope;
mod support;
mod walk;
