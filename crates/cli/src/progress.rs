//! A progress bar on stderr, only when stderr is a terminal.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Bar {
    bar: Option<ProgressBar>,
}

impl Bar {
    pub fn new() -> Bar {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{msg:>10} [{bar:30}] {pos}/{len} files {per_sec} {elapsed}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar
        });
        Bar { bar }
    }
}

impl fs_manager::Progress for Bar {
    fn start(&self, what: &str, files: u64, _bytes: u64) {
        if let Some(b) = &self.bar {
            b.reset();
            b.set_message(what.to_owned());
            b.set_length(files);
        }
    }

    fn advance(&self, files: u64, _bytes: u64) {
        if let Some(b) = &self.bar {
            b.inc(files);
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
