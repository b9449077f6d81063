//! Tree encodings (`docs/format.md`): what `cairn serve` accepts in object uploads and
//! what every stored tree decodes through.
#![no_main]

use cas::{EntryKind, TREE_CONTEXT, Tree, fuzzing};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(tree) = Tree::decode(data) else {
        return;
    };
    // One encoding per tree: what decodes is exactly what encodes.
    assert_eq!(
        tree.encode(),
        data,
        "decoding accepted a non-canonical encoding"
    );
    let expected = blake3::Hasher::new_derive_key(TREE_CONTEXT)
        .update(data)
        .finalize();
    assert_eq!(tree.id().as_bytes(), expected.as_bytes());

    // The tree rules: names valid and strictly ascending, each found by lookup.
    let entries = tree.entries();
    for pair in entries.windows(2) {
        assert!(
            pair[0].name < pair[1].name,
            "entries not strictly ascending"
        );
    }
    let mut total = Some(0u64);
    for e in entries {
        assert!(
            cas::validate_name(&e.name).is_ok(),
            "invalid name {:?}",
            e.name
        );
        assert!(!e.name.is_empty() && !e.name.contains(&b'/') && !e.name.contains(&0));
        assert!(e.name != b"." && e.name != b"..");
        assert_eq!(tree.get(&e.name), Some(e));
        assert_eq!(e.blob().is_some(), e.kind != EntryKind::Tree);
        assert_eq!(e.tree().is_some(), e.kind == EntryKind::Tree);
        total = total.and_then(|t| t.checked_add(e.size));
    }
    // A tree's size is the sum of its entries' sizes, and always representable.
    assert_eq!(
        Some(tree.size()),
        total,
        "entry sizes overflow the tree's size"
    );
    assert_eq!(Tree::new(entries.to_vec()).as_ref(), Ok(&tree));

    // Stored and read back through the store's record format.
    let record = fuzzing::encode_tree_record(&tree);
    match fuzzing::decode_tree_record(tree.id(), &record, &[]) {
        Ok(back) => assert_eq!(back, tree),
        Err(e) => panic!("a tree's own record does not decode: {e}"),
    }
});
