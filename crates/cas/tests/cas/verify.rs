use cas::*;

fn tree() -> Tree {
    Tree::new(vec![TreeEntry {
        name: b"a.txt".to_vec(),
        kind: EntryKind::File,
        id: BlobId::of(b"a").into(),
        size: 1,
    }])
    .unwrap()
}

/// What `cairn serve` stores from an upload: the object its bytes are, under its own id;
/// the messages are the ones the server answered with before the check moved here.
#[test]
fn received_objects_are_checked_against_their_ids() {
    let blob = verify_object(ObjectKind::Blob, BlobId::of(b"a").into(), b"a").unwrap();
    assert_eq!(blob.id(), BlobId::of(b"a").into());
    let tree = tree();
    let verified = verify_object(ObjectKind::Tree, tree.id().into(), &tree.encode()).unwrap();
    assert!(matches!(&verified, VerifiedObject::Tree(t) if *t == tree));

    let claimed = ObjectId::from(BlobId::of(b"something else"));
    let err = verify_object(ObjectKind::Blob, claimed, b"a").unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("Blob {claimed}: its bytes hash to {}", BlobId::of(b"a"))
    );
    let err = verify_object(ObjectKind::Tree, claimed, &tree.encode()).unwrap_err();
    assert!(matches!(err, VerifyError::HashMismatch { actual, .. } if actual == tree.id().into()));
    let err = verify_object(ObjectKind::Tree, claimed, b"not a tree").unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("tree {claimed}: truncated encoding")
    );
    let err = verify_object(ObjectKind::Snapshot, claimed, &tree.encode()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("snapshot {claimed}: ")),
        "{err}"
    );

    let mut batch = WriteBatch::new();
    assert_eq!(batch.add_verified(verified), tree.id().into());
    assert!(!batch.is_empty());
}
