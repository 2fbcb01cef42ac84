//! Postal-code normalisation: from what a caller sends to the compact key stored in the data.
//!
//! decisions.md, "Postal codes: normalisation": input is trimmed and upper-cased; matching
//! ignores spaces and hyphens, so every stored code is also indexed by its compact form
//! (`db` column `compact_key`); then a per-country rule maps the accepted long forms to
//! the stored key (GB full postcode -> outcode, CA -> FSA, ...).

use std::ops::Range;

use super::country::CountryCode;
use super::word::{HIGH, splat, word};

/// A postal code as a caller sent it, already mapped to the compact key to look up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostalQuery {
    /// Trimmed, upper-cased input, for the country's `Postal Code Regex`.
    input: String,
    /// Compact key after the country rule: what `postal_codes.compact_key` holds.
    key: String,
    /// The compact input before the country rule, when the rule changed it: a few stored
    /// codes are full forms (CA `T3T 0E5`), so this is tried first.
    full: Option<String>,
}

impl PostalQuery {
    /// `None` when the input is `invalid_format` whatever the country's data: characters
    /// other than ASCII letters, digits, spaces and hyphens, or nothing but spaces and
    /// hyphens.
    pub fn parse(country: CountryCode, input: &str) -> Option<PostalQuery> {
        let input = input.trim().to_ascii_uppercase();
        if !input
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b' ' || b == b'-')
        {
            return None;
        }
        let compact = compact(&input);
        if compact.is_empty() {
            return None;
        }
        let key = match country_rule(country, compact.as_bytes()) {
            RuleKey::Part(part) => compact[part].to_string(),
            RuleKey::Prefixed => format!("{}{compact}", country.as_str()),
        };
        let full = (key != compact).then_some(compact);
        Some(PostalQuery { input, key, full })
    }

    /// The compact key to match against `postal_codes.compact_key`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The keys to try, in order: the full compact input when the country rule shortened
    /// it (a stored full code wins), then the rule's key.
    pub fn candidates(&self) -> impl Iterator<Item = &str> {
        self.full
            .as_deref()
            .into_iter()
            .chain(std::iter::once(self.key.as_str()))
    }

    /// decisions.md, `invalid_format`: well-formed when the key has the shape of some
    /// stored key of the country (`key_shapes`, space-separated, from `countries`), or
    /// when the input matches the country's `Postal Code Regex`.
    /// `regex` must match the whole input (see `anchored`).
    pub fn is_well_formed(&self, key_shapes: &str, regex: Option<&regex::Regex>) -> bool {
        let shape = shape(&self.key);
        key_shapes.split(' ').any(|s| s == shape) || regex.is_some_and(|r| r.is_match(&self.input))
    }
}

/// countryInfo.txt's `Postal Code Regex` made to match a whole code: some patterns are
/// anchored at one end only (IE), or bind `^` and `$` to one alternative each (GB).
pub fn anchored(pattern: &str) -> String {
    format!("^(?:{pattern})$")
}

/// Upper case with spaces and hyphens removed: `lv-1001` -> `LV1001`. The import stores
/// every code's compact form with this same function.
pub fn compact(code: &str) -> String {
    // Only ASCII bytes are dropped or changed, so the bytes stay UTF-8.
    String::from_utf8(compact_bytes(code).collect()).unwrap_or_default()
}

/// [`compact`]'s bytes, one by one (`CanonicalCode` writes them inline).
fn compact_bytes(code: &str) -> impl Iterator<Item = u8> + '_ {
    code.bytes()
        .filter(|b| *b != b' ' && *b != b'-')
        .map(|b| b.to_ascii_uppercase())
}

/// The shape of a code: every ASCII letter `A`, every digit `9`, anything else kept
/// (`SW1A` -> `AA9A`).
pub fn shape(code: &str) -> String {
    code.chars()
        .map(|c| match c {
            c if c.is_ascii_alphabetic() => 'A',
            c if c.is_ascii_digit() => '9',
            c => c,
        })
        .collect()
}

/// A `zipcode` sent as a JSON integer: zero-padded to the length of the country's codes
/// when every stored key of the country is digits of one length (US `2134` -> `02134`);
/// otherwise the digits as they are. `key_shapes` as in [`PostalQuery::is_well_formed`].
pub fn integer_zipcode(value: u64, key_shapes: &str) -> String {
    let digits = value.to_string();
    let mut shapes = key_shapes.split(' ').filter(|s| !s.is_empty());
    let Some(first) = shapes.next() else {
        return digits;
    };
    let fixed_digits = first.bytes().all(|b| b == b'9')
        && shapes.all(|s| s.len() == first.len() && s.bytes().all(|b| b == b'9'));
    if fixed_digits && digits.len() < first.len() {
        format!("{digits:0>width$}", width = first.len())
    } else {
        digits
    }
}

/// The canonical form of a stored code that the API shows (`normalized` in bulk results,
/// `meta.postalCode`): the data's own form, except JP, written as seven digits without
/// its hyphen as postal-api.md does.
pub fn canonical(country: CountryCode, stored: &str) -> String {
    if country.as_str() == "JP" {
        compact(stored)
    } else {
        stored.to_string()
    }
}

/// Whether `key` is [`canonical`]`(country, stored)`, without writing it out (the load
/// asks it of every code; a test holds the two together). Written through
/// `CanonicalCode::of` instead, validate-bulk's work measured 379 instructions a record,
/// not 364 (bench/counts.sh); why, I did not find.
pub fn is_canonical(country: CountryCode, stored: &str, key: &str) -> bool {
    if country == CountryCode::JP {
        compact_bytes(stored).eq(key.bytes())
    } else {
        stored == key
    }
}

/// The longest [`CanonicalCode`] held inline (stored codes are at most 10 characters).
const INLINE_CODE: usize = 22;

/// [`canonical`] without an allocation for a code of up to [`INLINE_CODE`] bytes:
/// `/api/validate-bulk` answers one a record, and a `String` each was a quarter of its
/// work (issue 37).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanonicalCode {
    Inline { len: u8, bytes: [u8; INLINE_CODE] },
    Long(Box<str>),
}

impl CanonicalCode {
    /// As [`canonical`]`(country, stored)`.
    pub fn of(country: CountryCode, stored: &str) -> CanonicalCode {
        if stored.len() > INLINE_CODE {
            return CanonicalCode::Long(canonical(country, stored).into());
        }
        let mut bytes = [0u8; INLINE_CODE];
        if country != CountryCode::JP {
            bytes[..stored.len()].copy_from_slice(stored.as_bytes());
            return CanonicalCode::Inline {
                len: stored.len() as u8,
                bytes,
            };
        }
        // JP: `compact` (only ASCII bytes change, so UTF-8 stays UTF-8).
        let mut len = 0;
        for b in compact_bytes(stored) {
            bytes[len] = b;
            len += 1;
        }
        CanonicalCode::Inline {
            len: len as u8,
            bytes,
        }
    }

    /// A canonical code of at most 8 bytes, zero-padded (as the postal index packs its
    /// keys): its bytes up to the last non-zero one.
    pub fn padded(text: [u8; 8]) -> CanonicalCode {
        let mut bytes = [0u8; INLINE_CODE];
        bytes[..8].copy_from_slice(&text);
        CanonicalCode::Inline {
            len: (8 - u64::from_le_bytes(text).leading_zeros() / 8) as u8,
            bytes,
        }
    }

    /// The text's bytes, UTF-8 (for a writer that need not check it again).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            CanonicalCode::Inline { len, bytes } => &bytes[..usize::from(*len)],
            CanonicalCode::Long(text) => text.as_bytes(),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            // Whole characters of a `&str` (`of`), so always UTF-8.
            CanonicalCode::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            CanonicalCode::Long(text) => text,
        }
    }
}

/// A `zipcode` as the request carried it: a JSON string or a JSON integer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZipInput {
    Text(String),
    Integer(u64),
}

impl ZipInput {
    /// The text to normalise; integers are zero-padded per [`integer_zipcode`].
    pub fn text(&self, key_shapes: &str) -> String {
        match self {
            ZipInput::Text(s) => s.clone(),
            ZipInput::Integer(n) => integer_zipcode(*n, key_shapes),
        }
    }
}

/// The key the country rule makes of a compact code.
enum RuleKey {
    /// These bytes of the compact code (all of them when no rule applies).
    Part(Range<usize>),
    /// The country's code, then the compact code.
    Prefixed,
}

/// The per-country rules of decisions.md: which accepted long form a country's codes
/// have (most countries have none).
#[derive(Clone, Copy)]
enum CountryRule {
    /// The whole compact code (most countries).
    Whole,
    /// `02134-1234`, `021341234` -> `02134`
    ZipPlusFour,
    /// full postcode (5 to 7 characters) -> outward code: drop a trailing inward code
    /// `9AA`. Longer inputs are no postcode; shortening them once would leave a key that
    /// shortens again (`SW19AA1AA` -> `SW19AA` -> `SW1`).
    Outward,
    /// `K1A0B1` -> FSA `K1A`
    Fsa,
    /// Eircode `D02X285` -> routing key `D02`
    RoutingKey,
    /// `1012AB` -> `1012`
    NlDigits,
    /// CPA `C1425ABC` -> `1425`
    Cpa,
    /// `VLT1117` -> `VLT`
    MtLocality,
    /// `1001` -> `LV1001` (stored `LV-1001`)
    Prefixed,
}

/// The countries with a rule.
const RULED: [([u8; 2], CountryRule); 12] = [
    (*b"US", CountryRule::ZipPlusFour),
    (*b"GB", CountryRule::Outward),
    (*b"IM", CountryRule::Outward),
    (*b"JE", CountryRule::Outward),
    (*b"GG", CountryRule::Outward),
    (*b"CA", CountryRule::Fsa),
    (*b"IE", CountryRule::RoutingKey),
    (*b"NL", CountryRule::NlDigits),
    (*b"AR", CountryRule::Cpa),
    (*b"MT", CountryRule::MtLocality),
    (*b"LV", CountryRule::Prefixed),
    (*b"MD", CountryRule::Prefixed),
];

/// Each country's rule by its slot: one load, then a jump on the rule, where the match on
/// the country's bytes compared it with each ruled country.
static RULES: [CountryRule; CountryCode::SLOTS] = {
    let mut rules = [CountryRule::Whole; CountryCode::SLOTS];
    let mut i = 0;
    while i < RULED.len() {
        rules[CountryCode::slot_of(RULED[i].0)] = RULED[i].1;
        i += 1;
    }
    rules
};

/// The key the country rule makes of `code`, the compact code: ASCII letters and digits
/// (as [`PostalQuery::parse`] and [`ShortQuery::parse`] leave it). Always inlined: as a
/// call it cost validate-bulk 29 instructions a record (bench/counts.sh: 343 / 314).
#[inline(always)]
fn country_rule(country: CountryCode, code: &[u8]) -> RuleKey {
    let len = code.len();
    match RULES[country.slot()] {
        CountryRule::Whole => RuleKey::Part(0..len),
        CountryRule::ZipPlusFour if shape_is(code, b"999999999") => RuleKey::Part(0..5),
        CountryRule::Outward if (5..=7).contains(&len) && shape_is(&code[len - 3..], b"9AA") => {
            RuleKey::Part(0..len - 3)
        }
        CountryRule::Fsa if len == 6 => RuleKey::Part(0..3),
        CountryRule::RoutingKey if len == 7 => RuleKey::Part(0..3),
        CountryRule::NlDigits if shape_is(code, b"9999AA") => RuleKey::Part(0..4),
        CountryRule::Cpa if shape_is(code, b"A9999AAA") => RuleKey::Part(1..5),
        CountryRule::MtLocality if shape_is(code, b"AAA9999") => RuleKey::Part(0..3),
        CountryRule::Prefixed if shape_is(code, b"9999") => RuleKey::Prefixed,
        // A ruled country's code of another shape.
        _ => RuleKey::Part(0..len),
    }
}

/// Whether `code` has the [`shape`] `pattern`, without writing the shape out.
fn shape_is(code: &[u8], pattern: &[u8]) -> bool {
    code.len() == pattern.len()
        && code.iter().zip(pattern).all(|(&c, &p)| {
            p == match c {
                c if c.is_ascii_alphabetic() => b'A',
                c if c.is_ascii_digit() => b'9',
                c => c,
            }
        })
}

/// Of a word of ASCII bytes: the high bit of each byte that is at least `b` (at most 0x80).
fn at_least(word: u64, b: u8) -> u64 {
    // No byte borrows from the next: each is at least 0x80 before the subtraction.
    ((word | HIGH) - splat(b)) & HIGH
}

/// Of a word of ASCII bytes: the high bit of each byte that is `b`.
fn equal(word: u64, b: u8) -> u64 {
    !(((word ^ splat(b)) | HIGH) - splat(0x01)) & HIGH
}

/// The compact form of a code of 1 to 8 bytes, all upper-case ASCII letters and digits but
/// for at most one space or hyphen (`100-0001`, `90210`, `SW1A 1AA`): its bytes in a word
/// (little-endian, zero-padded) and their count, computed a word at a time; `None` for
/// any other code (the byte loop's).
#[inline]
fn compact_word(code: &[u8]) -> Option<(u64, usize)> {
    let len = code.len();
    if len == 0 || len > 8 {
        return None;
    }
    let word = word(code);
    // The high bit of each byte of the code (the padding is zeros).
    let used = HIGH >> (64 - 8 * len);
    if word & HIGH != 0 {
        return None;
    }
    let digit = at_least(word, b'0') & !at_least(word, b'9' + 1);
    let upper = at_least(word, b'A') & !at_least(word, b'Z' + 1);
    let gap = equal(word, b' ') | equal(word, b'-');
    if (digit | upper | gap) & used != used {
        return None;
    }
    let gap = gap & used;
    if gap == 0 {
        return Some((word, len));
    }
    // One gap: the bytes after it move down one.
    if gap & (gap - 1) != 0 {
        return None;
    }
    let at = gap.trailing_zeros() as usize / 8;
    let below = (1u64 << (8 * at)) - 1;
    Some(((word & below) | ((word >> 8) & !below), len - 1))
}

/// The longest compact code [`ShortQuery`] holds: stored keys are at most 10 characters.
const SHORT_CODE: usize = 24;

/// Room for a [`ShortQuery`]'s bytes: the country's code, then the compact code (the
/// `Prefixed` key needs both).
pub type ShortBuffer = [u8; SHORT_CODE + 2];

/// A [`PostalQuery`]'s keys to try, in a [`ShortBuffer`] on the caller's stack: `/api/validate-bulk` parses up to 1,000 codes a request, and three
/// `String`s each were most of its work (issue 37). Only the lookup: whether a code not
/// found is well-formed is [`PostalQuery`]'s to say.
pub struct ShortQuery<'b> {
    /// The compact code, when the rule's key is not all of it (a stored full code wins).
    full: Option<&'b [u8]>,
    /// The rule's key.
    key: &'b [u8],
}

/// What [`ShortQuery::parse`] made of an input.
pub enum ShortParse<'b> {
    Query(ShortQuery<'b>),
    /// [`PostalQuery::parse`] would say `None`: `invalid_format` whatever the data.
    Invalid,
    /// A compact code longer than [`ShortQuery`] holds, or one with bytes outside ASCII
    /// (valid or not past that): ask [`PostalQuery`].
    Long,
}

impl<'b> ShortQuery<'b> {
    /// As [`PostalQuery::parse`] of the text whose bytes `code` are (same keys, same `None`
    /// as `Invalid`), allocating nothing; the keys are in `buffer`. Always inlined: as a
    /// call it cost validate-bulk 25 instructions a record (bench/counts.sh: 389 / 364).
    #[inline(always)]
    pub fn parse(
        country: CountryCode,
        code: &'b [u8],
        buffer: &'b mut ShortBuffer,
    ) -> ShortParse<'b> {
        // Most codes come as upper-case letters and digits of at most 8 bytes, some with a
        // space or a hyphen (JP `100-0001`): compacted as one word; else in one plain pass;
        // anything else in `compact_into`.
        let mut len = 0;
        if let Some((word, word_len)) = compact_word(code) {
            buffer[2..10].copy_from_slice(&word.to_le_bytes());
            len = word_len;
        } else {
            for &b in code {
                if b.is_ascii_uppercase() || b.is_ascii_digit() {
                    if len == SHORT_CODE {
                        return ShortParse::Long;
                    }
                    buffer[2 + len] = b;
                    len += 1;
                } else if b != b' ' && b != b'-' {
                    len = match Self::compact_into(buffer, code) {
                        Ok(len) => len,
                        Err(parse) => return parse,
                    };
                    break;
                }
            }
        }
        if len == 0 {
            return ShortParse::Invalid;
        }
        match country_rule(country, &buffer[2..2 + len]) {
            RuleKey::Part(part) => {
                let compact: &'b [u8] = &buffer[2..2 + len];
                ShortParse::Query(ShortQuery {
                    full: (part != (0..len)).then_some(compact),
                    key: &compact[part],
                })
            }
            RuleKey::Prefixed => {
                buffer[..2].copy_from_slice(&country.bytes());
                let buffer: &'b ShortBuffer = buffer;
                ShortParse::Query(ShortQuery {
                    full: Some(&buffer[2..2 + len]),
                    key: &buffer[..2 + len],
                })
            }
        }
    }

    /// The compact form of `code` (trimmed, spaces and hyphens removed, upper case) into
    /// `buffer` after room for the country's code; its length, or what `parse` answers
    /// when there is none.
    fn compact_into(buffer: &mut ShortBuffer, code: &[u8]) -> Result<usize, ShortParse<'b>> {
        // A byte outside ASCII anywhere: `PostalQuery` trims Unicode whitespace
        // (`"90210\t\u{A0}"` is `90210`), so nothing before it is `Invalid` yet.
        if !code.is_ascii() {
            return Err(ShortParse::Long);
        }
        let mut end = 2;
        // `str::trim`'s whitespace among ASCII; a code with other bytes is left to
        // `PostalQuery` (its Unicode whitespace is trimmed, the rest is invalid).
        let space = |b: &u8| matches!(b, b'\t' | b'\n' | b'\x0B' | b'\x0C' | b'\r' | b' ');
        let first = code.iter().position(|b| !space(b)).unwrap_or(code.len());
        let last = code
            .iter()
            .rposition(|b| !space(b))
            .map_or(first, |at| at + 1);
        for &b in &code[first..last] {
            match b {
                b' ' | b'-' => {}
                b if b.is_ascii_alphanumeric() => {
                    if end == buffer.len() {
                        return Err(ShortParse::Long);
                    }
                    buffer[end] = b.to_ascii_uppercase();
                    end += 1;
                }
                // ASCII only (checked above).
                _ => return Err(ShortParse::Invalid),
            }
        }
        if end == 2 {
            return Err(ShortParse::Invalid);
        }
        Ok(end - 2)
    }

    /// The first of [`PostalQuery::candidates`], as bytes (ASCII letters and digits),
    /// that `find` finds something for: the full compact code when the rule changed it,
    /// then the rule's key (without an iterator's machinery: a tenth of the work a
    /// record).
    pub fn first_found<T>(&self, mut find: impl FnMut(&'b [u8]) -> Option<T>) -> Option<T> {
        match self.full {
            Some(full) => find(full).or_else(|| find(self.key)),
            None => find(self.key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(country: &str, input: &str) -> Option<String> {
        let country = CountryCode::parse(country).expect("test country");
        PostalQuery::parse(country, input).map(|q| q.key().to_string())
    }

    #[test]
    fn spaces_and_hyphens_never_decide_a_match() {
        assert_eq!(key("SE", "100 05").as_deref(), Some("10005"));
        assert_eq!(key("PT", "1000-001").as_deref(), Some("1000001"));
        assert_eq!(key("LV", "lv-1001").as_deref(), Some("LV1001"));
        assert_eq!(key("PL", " 00-950 ").as_deref(), Some("00950"));
    }

    #[test]
    fn us_zip_plus_four_keeps_the_first_five_digits() {
        assert_eq!(key("US", "02134-1234").as_deref(), Some("02134"));
        assert_eq!(key("US", "021341234").as_deref(), Some("02134"));
        assert_eq!(key("US", "02134").as_deref(), Some("02134"));
        assert_eq!(key("US", "0213412").as_deref(), Some("0213412"));
    }

    #[test]
    fn a_full_british_postcode_becomes_its_outcode() {
        for input in ["SW1A 1AA", "sw1a1aa", "SW1A"] {
            assert_eq!(key("GB", input).as_deref(), Some("SW1A"), "{input}");
        }
        assert_eq!(key("GB", "M1 1AE").as_deref(), Some("M1"));
        assert_eq!(key("IM", "IM1 1AA").as_deref(), Some("IM1"));
        assert_eq!(key("JE", "JE2 3AB").as_deref(), Some("JE2"));
        assert_eq!(key("GG", "GY1 1AA").as_deref(), Some("GY1"));
    }

    #[test]
    fn a_country_without_a_rule_keeps_a_ruled_shape_whole() {
        assert_eq!(key("DE", "1012 AB").as_deref(), Some("1012AB"));
        assert_eq!(key("FR", "SW1A 1AA").as_deref(), Some("SW1A1AA"));
        assert_eq!(key("EE", "1001").as_deref(), Some("1001"));
    }

    #[test]
    fn each_ruled_country_is_an_iso_code_listed_once() {
        for (i, (letters, _)) in RULED.iter().enumerate() {
            let code = std::str::from_utf8(letters).unwrap();
            assert!(CountryCode::parse(code).is_some(), "{code}");
            assert!(!RULED[..i].iter().any(|(l, _)| l == letters), "{code}");
        }
    }

    #[test]
    fn an_input_longer_than_a_postcode_is_not_shortened_so_its_key_is_stable() {
        assert_eq!(key("GB", "SW19AA1AA").as_deref(), Some("SW19AA1AA"));
        assert_eq!(key("GB", "SW19AA").as_deref(), Some("SW1"));
    }

    #[test]
    fn long_forms_of_other_countries_map_to_their_stored_keys() {
        assert_eq!(key("CA", "K1A 0B1").as_deref(), Some("K1A"));
        assert_eq!(key("IE", "D02 X285").as_deref(), Some("D02"));
        assert_eq!(key("NL", "1012 AB").as_deref(), Some("1012"));
        assert_eq!(key("AR", "C1425ABC").as_deref(), Some("1425"));
        assert_eq!(key("MT", "VLT 1117").as_deref(), Some("VLT"));
        assert_eq!(key("MD", "2001").as_deref(), Some("MD2001"));
        assert_eq!(key("JP", "100-0001").as_deref(), Some("1000001"));
    }

    #[test]
    fn characters_outside_letters_digits_spaces_and_hyphens_are_invalid() {
        for input in ["902!0", "9021_0", "Ⅸ", "90210.", "", " - "] {
            assert_eq!(key("US", input), None, "{input:?}");
        }
    }

    #[test]
    fn shape_writes_letters_as_a_and_digits_as_nine() {
        assert_eq!(shape("SW1A"), "AA9A");
        assert_eq!(shape("LV1001"), "AA9999");
    }

    #[test]
    fn well_formed_means_a_stored_shape_or_the_country_regex() {
        let us = CountryCode::US;
        let regex = regex::Regex::new(&anchored(r"^\d{5}(-\d{4})?$")).ok();
        let check = |input: &str| {
            PostalQuery::parse(us, input)
                .unwrap()
                .is_well_formed("99999", regex.as_ref())
        };
        assert!(check("99999"));
        assert!(!check("ABCDE"));
        assert!(!check("123456"));
        assert!(!check("1234"));
    }

    #[test]
    fn integer_zipcodes_keep_leading_zeros_where_codes_have_a_fixed_digit_length() {
        assert_eq!(integer_zipcode(2134, "99999"), "02134");
        assert_eq!(integer_zipcode(90210, "99999"), "90210");
        assert_eq!(integer_zipcode(1000001, "9999999"), "1000001");
        assert_eq!(integer_zipcode(950, "99999 AA9"), "950");
        assert_eq!(integer_zipcode(7, ""), "7");
    }

    #[test]
    fn a_country_regex_must_match_the_whole_code() {
        let ie = CountryCode::parse("IE").unwrap();
        let regex = regex::Regex::new(&anchored(
            r"^(D6W|[AC-FHKNPRTV-Y][0-9]{2})\s?([AC-FHKNPRTV-Y0-9]{4})",
        ))
        .ok();
        let check = |input: &str| {
            PostalQuery::parse(ie, input)
                .unwrap()
                .is_well_formed("A99", regex.as_ref())
        };
        assert!(check("D02 X285"));
        assert!(!check("D02X2855555"));
    }

    #[test]
    fn a_full_code_is_tried_before_the_country_rule_shortens_it() {
        let ca = CountryCode::parse("CA").unwrap();
        let query = PostalQuery::parse(ca, "T3T 0E5").unwrap();
        assert_eq!(query.candidates().collect::<Vec<_>>(), ["T3T0E5", "T3T"]);
        let plain = PostalQuery::parse(ca, "K1A").unwrap();
        assert_eq!(plain.candidates().collect::<Vec<_>>(), ["K1A"]);
    }

    #[test]
    fn japanese_codes_are_shown_without_their_hyphen() {
        let jp = CountryCode::parse("JP").unwrap();
        assert_eq!(canonical(jp, "100-0001"), "1000001");
        assert_eq!(canonical(CountryCode::US, "02134"), "02134");
    }

    #[test]
    fn the_canonical_code_on_the_stack_is_the_canonical_string() {
        let jp = CountryCode::JP;
        for (country, stored) in [
            (jp, "100-0001"),
            (jp, "100 0001"),
            (jp, "abc-1"),
            (CountryCode::US, "02134"),
            (CountryCode::US, ""),
            (CountryCode::US, "Ø-1234 é"),
            (jp, "東京-1"),
            (CountryCode::US, "1234567890123456789012"),
            (CountryCode::US, "12345678901234567890123"),
            (jp, "12345678901234567890-12"),
            (jp, "1234567890123456789012-3"),
        ] {
            let written = canonical(country, stored);
            assert_eq!(
                CanonicalCode::of(country, stored).as_str(),
                written,
                "{country:?} {stored:?}"
            );
            // `is_canonical`, the load's check, says the same without writing it.
            assert!(is_canonical(country, stored, &written), "{stored:?}");
            assert!(!is_canonical(country, stored, &format!("{written}0")));
            assert_eq!(is_canonical(country, stored, stored), written == stored);
        }
    }

    #[test]
    fn the_short_query_stops_at_the_first_key_found() {
        let gb = CountryCode::parse("GB").unwrap();
        let mut buffer = ShortBuffer::default();
        let ShortParse::Query(short) = ShortQuery::parse(gb, b"SW1A 1AA", &mut buffer) else {
            panic!("a query");
        };
        let mut tried = 0;
        let found = short.first_found(|key| {
            tried += 1;
            Some(key.to_vec())
        });
        assert_eq!((found, tried), (Some(b"SW1A1AA".to_vec()), 1));
        assert_eq!(
            short.first_found(|key| (key == b"SW1A").then_some(1)),
            Some(1)
        );
    }

    #[test]
    fn a_word_holds_the_bytes_zero_padded() {
        let text = b"12345678";
        for len in 0..=8 {
            let mut padded = [0u8; 8];
            padded[..len].copy_from_slice(&text[..len]);
            assert_eq!(word(&text[..len]), u64::from_le_bytes(padded), "{len}");
        }
    }

    #[test]
    fn a_code_of_up_to_eight_bytes_is_compacted_as_one_word_when_it_can_be() {
        let expected = |code: &[u8]| {
            let kept = |b: &u8| b.is_ascii_uppercase() || b.is_ascii_digit();
            let gaps = code.iter().filter(|b| matches!(b, b' ' | b'-')).count();
            let fits = (1..=8).contains(&code.len()) && gaps <= 1;
            (fits && code.iter().all(|b| kept(b) || matches!(b, b' ' | b'-'))).then(|| {
                let compact: Vec<u8> = code.iter().copied().filter(kept).collect();
                let mut word = [0u8; 8];
                word[..compact.len()].copy_from_slice(&compact);
                (u64::from_le_bytes(word), compact.len())
            })
        };
        for a in 0..=0xFFu8 {
            for b in 0..=0xFFu8 {
                for code in [
                    vec![a],
                    vec![a, b],
                    vec![b'1', a, b'2', b],
                    vec![b'9', b'Z', b'0', b'A', b'-', b'1', a, b],
                    vec![a, b'1', b'2', b'3', b'4', b'5', b'6', b],
                ] {
                    assert_eq!(compact_word(&code), expected(&code), "{code:?}");
                }
            }
        }
        assert_eq!(compact_word(b"123456789"), None);
        assert_eq!(compact_word(b""), None);
    }

    #[test]
    fn the_short_query_tries_the_same_keys_as_the_postal_query() {
        let countries = [
            "US", "GB", "IM", "JE", "GG", "CA", "IE", "NL", "AR", "MT", "LV", "MD", "JP", "DE",
        ];
        let inputs = [
            "90210",
            "12345678",
            "123456789",
            "1234-5678",
            "-1000001",
            "1000001-",
            "10-00-01",
            "100 0001",
            "-",
            " ",
            "a-1",
            "SW1A1AA",
            "LV 1001",
            "MD-2001",
            "/9:@",
            "Z[`{",
            "1\u{0}2",
            "\u{7f}",
            " 02134-1234 ",
            "021341234",
            "0213412",
            "sw1a 1aa",
            "SW19AA1AA",
            "M1 1AE",
            "K1A 0B1",
            "T3T 0E5",
            "D02 X285",
            "1012 ab",
            "C1425ABC",
            "VLT 1117",
            "lv-1001",
            "1001",
            "2001",
            "100-0001",
            "902!0",
            "Ⅸ",
            "",
            " - ",
            "é1",
            "12345678901234567890123",
            "123456789012345678901234",
            "1234567890123456789012345",
            "a-b-c-d-e-f-g-h-i-j-k-l-m",
            "\t90210\r\n",
            "\u{0B}90210\u{0C}",
            "\u{A0}90210\u{2003}",
            // ASCII whitespace before Unicode whitespace: trimmed, not invalid.
            "90210\t\u{A0}",
            "\u{2003}\n90210",
            "90\t210\u{A0}",
            "902\t10",
            "90210\u{1C}",
        ];
        for country in countries {
            let country = CountryCode::parse(country).expect("test country");
            for input in inputs {
                let slow = PostalQuery::parse(country, input);
                let mut buffer = ShortBuffer::default();
                match ShortQuery::parse(country, input.as_bytes(), &mut buffer) {
                    ShortParse::Query(short) => {
                        let slow = slow.expect("the same input is valid");
                        let mut keys: Vec<&[u8]> = Vec::new();
                        short.first_found(|key| -> Option<()> {
                            keys.push(key);
                            None
                        });
                        let expected: Vec<&[u8]> = slow.candidates().map(str::as_bytes).collect();
                        assert_eq!(keys, expected, "{country:?} {input:?}");
                    }
                    ShortParse::Invalid => assert!(slow.is_none(), "{country:?} {input:?}"),
                    // Left to the postal query: too long, or not ASCII.
                    ShortParse::Long => assert!(
                        slow.is_none_or(|q| !input.is_ascii() || q.key().len() > SHORT_CODE),
                        "{country:?} {input:?}"
                    ),
                }
            }
        }
    }
}
