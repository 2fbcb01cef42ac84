//! Postal-code normalisation (`src/domain/postal_code.rs`): never a panic, and a key is
//! compact, upper case and normalises to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use postal::domain::country::ISO_CODES;
use postal::domain::postal_code::{ZipInput, compact};
use postal::domain::{CountryCode, PostalQuery};

fuzz_target!(|input: (u8, u64, &str)| {
    let (country, integer, text) = input;
    let code = ISO_CODES[usize::from(country) % ISO_CODES.len()];
    let country = CountryCode::parse(code).expect("an ISO code");
    for candidate in [
        text.to_string(),
        ZipInput::Integer(integer).text("99999"),
        ZipInput::Integer(integer).text("AA9A 99 9999999"),
    ] {
        if let Some(query) = PostalQuery::parse(country, &candidate) {
            let key = query.key();
            assert!(!key.is_empty());
            assert_eq!(compact(key), key);
            let again = PostalQuery::parse(country, key).expect("a key parses");
            assert_eq!(again.key(), key, "{code} {candidate:?}");
        }
    }
});
