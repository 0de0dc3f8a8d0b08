//! Progress bars for long library calls, drawn on stderr and hidden when it is not a terminal.

use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use switchgnn_datasets::Progress;

/// One bar per stage; a new stage finishes the previous bar.
#[derive(Debug, Default)]
pub(crate) struct Bars {
    current: Mutex<Option<ProgressBar>>,
}

impl Bars {
    pub(crate) fn new() -> Bars {
        Bars::default()
    }

    /// Close the last bar.
    pub(crate) fn finish(&self) {
        if let Some(bar) = self.current.lock().expect("progress lock").take() {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Bars {
    fn stage(&self, name: &str, total: Option<u64>) {
        let bar = match total {
            Some(total) => ProgressBar::new(total).with_style(
                ProgressStyle::with_template(
                    "{msg:>24} [{bar:32}] {percent:>3}% {human_pos}/{human_len} ({eta})",
                )
                .expect("valid template")
                .progress_chars("=> "),
            ),
            None => ProgressBar::new_spinner(),
        };
        bar.set_message(name.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        tracing::info!(stage = name, "started");
        if let Some(old) = self.current.lock().expect("progress lock").replace(bar) {
            old.finish_and_clear();
        }
    }

    fn advance(&self, delta: u64) {
        if let Some(bar) = self.current.lock().expect("progress lock").as_ref() {
            bar.inc(delta);
        }
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        self.finish();
    }
}
