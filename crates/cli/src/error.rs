//! The CLI's errors are the engine's ([`cairn_engine::Error`]: a code, an exit status and a
//! message naming the path or id); here, the last guard against a panic.

pub use cairn_engine::Error;

thread_local! {
    /// Whether this thread runs inside [`contain_panics`].
    static CONTAINING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The message and place of the panic [`contain_panics`] caught.
    static CAUGHT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs a command so that a panic ends it as exit 3 with the usual error shape, not exit 101.
///
/// A last guard: store contents never panic (the store contains redb's panics itself), so a
/// panic here is a bug in cairn, and the message says so and where.
pub fn contain_panics<T>(run: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CONTAINING.with(std::cell::Cell::get) {
                let message = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                CAUGHT.with(|c| *c.borrow_mut() = Some(format!("{message}{at}")));
            } else {
                previous(info);
            }
        }));
    });
    let outer = CONTAINING.with(|c| c.replace(true));
    // Unwind safety: nothing the command touched is used after it failed.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
    CONTAINING.with(|c| c.set(outer));
    caught.unwrap_or_else(|_| {
        let what = CAUGHT
            .with(|c| c.borrow_mut().take())
            .unwrap_or_else(|| "a panic".to_owned());
        Err(Error::failure(
            "internal",
            format!("internal error, a bug in cairn (please report it): {what}"),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_exit_3_naming_where() {
        let result: Result<(), Error> = contain_panics(|| panic!("boom {}", 7));
        let e = result.expect_err("the panic is an error");
        assert_eq!((e.exit(), e.code()), (cairn_engine::EXIT_STORE, "internal"));
        assert!(e.to_string().contains("boom 7"), "{e}");
        assert!(e.to_string().contains("error.rs:"), "{e}");
        assert_eq!(contain_panics(|| Ok(5)).expect("no panic"), 5);
    }
}
