//! `CAIRN_STORE_BUDGET`: a store whose folder takes more bytes than it says (every file in
//! it, mount layers included) is told so on stderr once per command, with the `gc` command
//! that would bring it back under, or that none can.

use camino::Utf8Path;

/// The variable: a whole number of bytes.
pub const STORE_BUDGET_VAR: &str = "CAIRN_STORE_BUDGET";

/// What to say about the store at `store` given the variable's `value`: nothing if it is
/// unset or the store fits; a warning naming the variable if it is not a number.
pub fn warning(store: &Utf8Path, value: Option<&std::ffi::OsStr>) -> Option<String> {
    let value = value?;
    let Some(budget) = value.to_str().and_then(|v| v.trim().parse::<u64>().ok()) else {
        return Some(format!(
            "cairn: warning: {STORE_BUDGET_VAR}={}: not a whole number of bytes; no budget is checked",
            value.to_string_lossy()
        ));
    };
    if !store.is_dir() {
        return None;
    }
    let used = cas::store_bytes(store);
    if used <= budget {
        return None;
    }
    let database = std::fs::metadata(store.join(cas::DATABASE_FILE)).map_or(0, |m| m.len());
    // Mount layers and anything else in the folder: no gc shrinks them.
    let other = used.saturating_sub(database);
    let said = format!(
        "cairn: warning: store {store} takes {used} bytes (every file in its folder), past \
         {STORE_BUDGET_VAR}={budget}"
    );
    let fix = |room: u64| {
        format!(
            "to bring it under, run: cairn gc --store {} --max-size {room}",
            shell_word(store.as_str())
        )
    };
    let cannot = format!("{other} of them are mount layers and other files gc cannot shrink");
    Some(if other == 0 {
        format!("{said}; {}", fix(budget))
    } else if other < budget {
        format!("{said}; {cannot}; {}", fix(budget - other))
    } else {
        format!("{said}; {cannot}, so no gc brings it under")
    })
}

/// `word` quoted for a POSIX shell when it needs it.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_of(bytes: usize) -> (tempfile::TempDir, camino::Utf8PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = camino::Utf8PathBuf::from_path_buf(dir.path().join("my store"))
            .expect("utf-8 temp path");
        std::fs::create_dir(&root).expect("store folder");
        std::fs::write(root.join(cas::DATABASE_FILE), vec![0u8; bytes]).expect("store file");
        (dir, root)
    }

    #[test]
    fn a_store_past_its_budget_is_told_the_gc_command() {
        let (_dir, root) = store_of(5000);
        let said = warning(&root, Some("4096".as_ref())).expect("a warning");
        assert!(said.contains("takes 5000 bytes"), "{said}");
        assert!(said.contains("CAIRN_STORE_BUDGET=4096"), "{said}");
        assert!(
            said.ends_with(&format!("cairn gc --store '{root}' --max-size 4096")),
            "{said}"
        );
        assert_eq!(warning(&root, Some("5000".as_ref())), None);
        assert_eq!(warning(&root, None), None);
    }

    /// A mount layer counts in what the store takes, but no gc shrinks it: the command
    /// leaves room for it, or the warning says no gc helps.
    #[test]
    fn mount_layers_count_but_the_gc_command_leaves_room_for_them() {
        let (_dir, root) = store_of(5000);
        let layer = root.join("mounts").join("x");
        std::fs::create_dir_all(&layer).expect("layer folder");
        std::fs::write(layer.join("f"), vec![0u8; 1000]).expect("layer file");
        let said = warning(&root, Some("4096".as_ref())).expect("a warning");
        assert!(
            said.contains("takes 6000 bytes (every file in its folder)"),
            "{said}"
        );
        assert!(said.contains("1000 of them are mount layers"), "{said}");
        assert!(said.ends_with("--max-size 3096"), "{said}");
        let said = warning(&root, Some("1000".as_ref())).expect("a warning");
        assert!(said.ends_with("so no gc brings it under"), "{said}");
    }

    #[test]
    fn a_budget_that_is_not_a_number_is_named() {
        let (_dir, root) = store_of(10);
        for bad in ["10G", "-1", "", "1.5"] {
            let said = warning(&root, Some(bad.as_ref())).expect("a warning");
            assert!(
                said.contains(&format!("CAIRN_STORE_BUDGET={bad}: not a whole number")),
                "{said}"
            );
        }
    }
}
