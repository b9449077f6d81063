//! The README's best-of-N walk-through is `docs/best-of-n.sh` run for real: the script
//! succeeds, and what it prints is what the README shows (ids, times, keys and temporary
//! paths aside), so neither can drift from the commands.

use std::process::Command;

use camino::Utf8Path;

use crate::support::Env;

/// The marker the README puts before the walk-through's console block.
const MARKER: &str = "<!-- the output of docs/best-of-n.sh -->";

/// What differs from one run to the next, replaced by a name for it.
pub(crate) fn normalized(text: &str) -> String {
    let rules = [
        (r"/\S*/cairn-best-of-n\.[A-Za-z0-9]+", "WORK"),
        (r#""/\S+/([a-z_]+\.py)""#, "\"VIEW/$1\""),
        (r"SHA256:[A-Za-z0-9+/]{43}", "KEY"),
        (r"\b[0-9a-f]{12,64}\b", "ID"),
        (r"\d+ ms\b", "N ms"),
        (r"in \d+\.\d+s\b", "in Ns"),
        (r"Date: +\S+", "Date: DATE"),
        (r", in a (mount|checkout)", ", in a VIEW"),
        (r" +\n", "\n"),
        // A command that meets the server a check started while it stops waits for it.
        (
            r"cairn: waiting for store \S+: another process holds it\n",
            "",
        ),
    ];
    let mut text = text.to_owned();
    for (pattern, with) in rules {
        let re = regex::Regex::new(pattern).expect("a valid pattern");
        text = re.replace_all(&text, with).into_owned();
    }
    text
}

/// The console block after `marker` in the README.
pub(crate) fn readme_block(readme: &str, marker: &str) -> String {
    let after = readme
        .split_once(marker)
        .unwrap_or_else(|| panic!("README.md has no {marker}"))
        .1;
    let body = after
        .split_once("```console\n")
        .expect("a console block after the marker")
        .1;
    body.split_once("```")
        .expect("the console block ends")
        .0
        .to_owned()
}

#[test]
fn the_readme_walkthrough_is_what_the_script_prints() {
    let env = Env::new();
    let root = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = Utf8Path::new(env!("CARGO_BIN_EXE_cairn"))
        .parent()
        .expect("the binary's folder");
    let tmp = env.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg("exec sh \"$0\" 2>&1")
        .arg(root.join("docs/best-of-n.sh"))
        .env(
            "PATH",
            format!("{bin}:{}", std::env::var("PATH").unwrap_or_default()),
        )
        .env("TMPDIR", tmp.as_str())
        .env_remove("CAIRN_STORE")
        .output()
        .unwrap();
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "the walk-through failed:\n{printed}");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let shown = readme_block(&readme, MARKER);
    assert!(
        normalized(&printed) == normalized(&shown),
        "README.md's walk-through is not what docs/best-of-n.sh prints now; the line that \
         differs first:\n  README: {:?}\n  script: {:?}\nthe script's output, to paste under \
         {MARKER}:\n{printed}",
        first_difference(&normalized(&shown), &normalized(&printed)).0,
        first_difference(&normalized(&shown), &normalized(&printed)).1,
    );
}

/// The first line where `a` and `b` differ (`""` past the end of one).
pub(crate) fn first_difference<'a>(a: &'a str, b: &'a str) -> (&'a str, &'a str) {
    let (mut a, mut b) = (a.lines(), b.lines());
    loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) if x == y => {}
            (None, None) => return ("", ""),
            (x, y) => return (x.unwrap_or(""), y.unwrap_or("")),
        }
    }
}
