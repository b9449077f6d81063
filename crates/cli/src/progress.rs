//! A progress bar on stderr (files and bytes), only when stderr is a terminal.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};

use cairn_client::ProgressEvent;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Bar {
    bar: Option<ProgressBar>,
    files: AtomicU64,
    total_files: AtomicU64,
}

impl Bar {
    /// Shows a progress event from a server on this terminal's bar.
    pub fn show(&self, e: &ProgressEvent) {
        if let Some(b) = &self.bar {
            if b.prefix() != e.what {
                b.reset();
                b.set_prefix(e.what.clone());
            }
            b.set_length(e.total_bytes);
            b.set_position(e.bytes);
            b.set_message(format!("{}/{}", e.files, e.total_files));
            if e.done {
                b.finish_and_clear();
            }
        }
    }
}

impl Bar {
    /// A bar that draws nothing (the terminal is not the caller's).
    pub fn hidden() -> Bar {
        Bar {
            bar: None,
            files: AtomicU64::new(0),
            total_files: AtomicU64::new(0),
        }
    }

    pub fn new() -> Bar {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{prefix:>9} [{bar:30}] {msg} files, {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar
        });
        Bar {
            bar,
            files: AtomicU64::new(0),
            total_files: AtomicU64::new(0),
        }
    }
}

impl cairn_engine::Progress for Bar {
    fn start(&self, what: &str, files: u64, bytes: u64) {
        if let Some(b) = &self.bar {
            b.reset();
            b.set_prefix(what.to_owned());
            b.set_length(bytes);
            self.files.store(0, Ordering::Relaxed);
            self.total_files.store(files, Ordering::Relaxed);
            b.set_message(format!("0/{files}"));
        }
    }

    fn advance(&self, files: u64, bytes: u64) {
        if let Some(b) = &self.bar {
            let done = self.files.fetch_add(files, Ordering::Relaxed) + files;
            b.inc(bytes);
            if done.is_multiple_of(256) {
                b.set_message(format!(
                    "{done}/{}",
                    self.total_files.load(Ordering::Relaxed)
                ));
            }
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
