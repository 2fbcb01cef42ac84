//! City-name folding (`src/domain/text.rs`): lower-case ASCII words separated by single
//! spaces, and folding a folded name changes nothing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use postal::domain::text::fold;

fuzz_target!(|name: &str| {
    let folded = fold(name);
    assert!(
        folded
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b' ')
    );
    assert!(!folded.starts_with(' ') && !folded.ends_with(' ') && !folded.contains("  "));
    assert_eq!(fold(&folded), folded);
});
