//! The mount crate's errors keep what they failed on as typed sources, with the messages
//! users have always seen (no FUSE needed).

#[test]
fn a_copy_into_a_missing_directory_names_it_and_keeps_the_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("from");
    std::fs::create_dir(&from).unwrap();
    let to = dir.path().join("missing");
    let err = mount::copy_tree(&from, &to).unwrap_err();
    let mount::CopyError::Target { path, source } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(path, &to);
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(err.to_string(), format!("{}: {source}", to.display()));
    let cause = std::error::Error::source(&err).and_then(|s| s.downcast_ref::<std::io::Error>());
    assert_eq!(
        cause.map(std::io::Error::kind),
        Some(std::io::ErrorKind::NotFound)
    );
}

#[test]
fn a_missing_source_tree_fails_the_copy_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("gone");
    let err = mount::copy_tree(&from, dir.path()).unwrap_err();
    assert!(matches!(err, mount::CopyError::Copy(_)), "{err:?}");
    assert!(
        err.to_string().contains(&from.display().to_string()),
        "{err}"
    );
}
