//! The postal codes a city query may carry (`10115 Berlin`, `Chicago IL 60601`), taken
//! out before the name is matched (`CountryCities::clean`), at bounded cost whatever the
//! query (issue "Hardening v2"); and the municipality of a JP office code (`office_city`).

use super::{CityIndex, CountryCities};
use crate::domain::CountryCode;

/// Most words a postal code is written in (`13273 CEDEX 09`).
pub(super) const MAX_CODE_WORDS: usize = 3;
/// How far from either end of a query `clean` looks for a postal code, in words: forms put
/// the code before or after the city (`10115 Berlin`, `Chicago IL 60601`). A code search
/// at every position of a long query (a hostile one: `"s2 " x 66`, or 200 characters that
/// transliterate to 400 words) cost 0.6 ms a record (issue "Hardening v2"); now at most
/// twice this many positions are searched, whatever the query.
pub(super) const CODE_EDGE_WORDS: usize = 8;
/// The longest postal code searched for in a query (GeoNames' are at most 10 bytes): a
/// code longer than this is not found in a query (`CodeShape`), the others are.
pub(super) const MAX_CODE_BYTES: usize = 32;
/// The longest code matched by shape alone (`is_code_shaped`): countryInfo's formats are
/// at most 10 characters (`#####-####`).
const MAX_SHAPED_BYTES: usize = 12;

/// The lengths and first characters of a country's codes.
#[derive(Debug, Clone, Default)]
pub(super) struct CodeShape {
    shortest: usize,
    pub(super) longest: usize,
    /// Bit b: some code starts with byte b.
    first_bytes: [u64; 4],
}

/// The words of a folded query that `clean` looks at: every word of a short one; of a
/// long one, the words a code may start at or reach from either end, with what lies
/// between them as one word, never looked into. Splitting a hostile query of 1,200
/// bytes into its 400 words, twice per record of a verify-bulk, was most of its cost.
fn edge_words(folded: &str) -> Vec<&str> {
    let head = CODE_EDGE_WORDS + MAX_CODE_WORDS - 1;
    // The space after the first `head` words, and the one before the last 8.
    let after_head = folded.match_indices(' ').nth(head - 1).map(|(at, _)| at);
    let before_tail = folded
        .rmatch_indices(' ')
        .nth(CODE_EDGE_WORDS - 1)
        .map(|(at, _)| at);
    match (after_head, before_tail) {
        (Some(h), Some(t)) if h + 1 < t => folded[..h]
            .split(' ')
            .chain(std::iter::once(&folded[h + 1..t]))
            .chain(folded[t + 1..].split(' '))
            .collect(),
        _ => folded.split(' ').collect(),
    }
}

/// `text` without one of `names` (folded, longest first) as its last words, with a word
/// before it.
fn without_country<'a>(text: &'a str, names: &[Box<str>]) -> &'a str {
    names
        .iter()
        .filter(|name| !name.is_empty())
        .find_map(|name| {
            text.strip_suffix(&**name)
                .filter(|before| before.len() > 1 && before.ends_with(' '))
                .map(|before| &before[..before.len() - 1])
        })
        .unwrap_or(text)
}

/// Code `i` of a country's arena (`codes_text`, `code_starts`).
pub(super) fn code_text<'a>(text: &'a str, starts: &[u32], i: usize) -> &'a str {
    let end = starts.get(i + 1).map_or(text.len(), |e| *e as usize);
    &text[starts[i] as usize..end]
}

impl CodeShape {
    pub(super) fn of<'c>(codes: impl IntoIterator<Item = &'c str>) -> CodeShape {
        let mut shape = CodeShape {
            shortest: usize::MAX,
            ..CodeShape::default()
        };
        for code in codes {
            shape.shortest = shape.shortest.min(code.len());
            shape.longest = shape.longest.max(code.len()).min(MAX_CODE_BYTES);
            if let Some(&b) = code.as_bytes().first() {
                shape.first_bytes[usize::from(b / 64)] |= 1 << (b % 64);
            }
        }
        shape
    }

    fn may_start_with(&self, b: u8) -> bool {
        self.first_bytes[usize::from(b / 64)] & (1 << (b % 64)) != 0
    }

    fn may_be_long(&self, len: usize) -> bool {
        self.shortest <= len && len <= self.longest
    }
}

impl CountryCities {
    /// The query without what forms add to a city: postal codes of the country (`10115
    /// Berlin`, `Chicago IL 60601`; a code of several words as the data writes it, with its
    /// spaces or hyphens folded away: `114 49 Stockholm`, `1600-165 Lisbon`, `LV-1067
    /// Riga`, `13273 CEDEX 09 Marseille`) and the country's name at its end (`Paris,
    /// France`). `lenient` (a second reading, asked when the first finds nothing) also
    /// takes the country's name in its own languages off the end, before and after the
    /// codes (`Roma, Italia`, `London SW1A 1AA, UK`), and a code the data lacks written in
    /// the country's format at either end (`00-950 Warszawa`). The first reading stays as
    /// strict as before: `Assis Brasil`, `Kamienica Polska` and `3731 De Bilt` are names
    /// and a code, not a name, a country and a code (`De` is no NL code's letters there).
    pub(super) fn clean(&self, folded: &str, lenient: bool) -> String {
        let names: &[Box<str>] = if lenient {
            &self.country_names
        } else {
            std::slice::from_ref(&self.country_name)
        };
        let text = if lenient {
            without_country(folded, names)
        } else {
            folded
        };
        let all = edge_words(text);
        let mut words = Vec::with_capacity(all.len());
        let mut i = 0;
        while i < all.len() {
            let near_an_end = i < CODE_EDGE_WORDS || i + CODE_EDGE_WORDS >= all.len();
            let at_an_end = |n: usize| lenient && (i == 0 || i + n == all.len());
            let code_words = (1..=MAX_CODE_WORDS.min(all.len() - i))
                .rev()
                .filter(|_| near_an_end)
                .find(|&n| {
                    let window = &all[i..i + n];
                    self.is_code(window) || at_an_end(n) && self.is_code_shaped(window)
                });
            match code_words {
                Some(n) => i += n,
                None => {
                    words.push(all[i]);
                    i += 1;
                }
            }
        }
        // One of the country's names as the query's last words (on the text: a long
        // query's middle is one of `words`, and may hold its first words).
        let joined = words.join(" ");
        without_country(&joined, names).to_string()
    }

    /// Whether `words` (folded), with a digit among them, are one of the country's postal
    /// codes written with spaces, hyphens or nothing between them. A window whose length
    /// or first character no code has is passed over without a search or an allocation:
    /// a hostile query of 200 `㎯` (`rad s2` x 200 once folded) costs a few comparisons
    /// per window.
    fn is_code(&self, words: &[&str]) -> bool {
        if !words.iter().any(|w| w.bytes().any(|b| b.is_ascii_digit())) {
            return false;
        }
        let first = words[0].as_bytes().first().map(u8::to_ascii_uppercase);
        if !first.is_some_and(|b| self.code_shape.may_start_with(b)) {
            return false;
        }
        let letters: usize = words.iter().map(|w| w.len()).sum();
        let gaps = words.len() - 1;
        [" ", "-", ""]
            .iter()
            .take(if gaps == 0 { 1 } else { 3 })
            .any(|between| {
                let len = letters + gaps * between.len();
                if !self.code_shape.may_be_long(len) {
                    return false;
                }
                let mut buffer = [0u8; MAX_CODE_BYTES];
                let mut at = 0;
                for (i, word) in words.iter().enumerate() {
                    if i > 0 {
                        buffer[at..at + between.len()].copy_from_slice(between.as_bytes());
                        at += between.len();
                    }
                    buffer[at..at + word.len()].copy_from_slice(word.as_bytes());
                    at += word.len();
                }
                buffer[..at].make_ascii_uppercase();
                self.has_code(&buffer[..at])
            })
    }

    /// Whether `words`, joined by a space or a hyphen, match the country's postal code
    /// regex (countryInfo's): a code the data lacks (GeoNames has only GB's outward codes,
    /// and few of PL's post-office codes: `SW1A 1AA`, `00-950`). At most
    /// [`MAX_SHAPED_BYTES`] long, with a digit, and only at either end of the query
    /// (`clean`), where forms put it.
    fn is_code_shaped(&self, words: &[&str]) -> bool {
        let Some(regex) = &self.code_regex else {
            return false;
        };
        let len = words.iter().map(|w| w.len() + 1).sum::<usize>() - 1;
        if len > MAX_SHAPED_BYTES || !words.iter().any(|w| w.bytes().any(|b| b.is_ascii_digit())) {
            return false;
        }
        [" ", "-"].iter().any(|between| {
            let text = words.join(between).to_ascii_uppercase();
            regex.is_match(&text)
        })
    }

    /// Whether `upper` (folded, upper-cased) is one of the country's postal codes.
    fn has_code(&self, upper: &[u8]) -> bool {
        self.code_id(upper).is_some()
    }

    /// The id of a canonical postal code of the country (its rank among them).
    pub(super) fn code_id(&self, code: impl AsRef<[u8]>) -> Option<u32> {
        let code = code.as_ref();
        let text = |i: usize| code_text(&self.codes_text, &self.code_starts, i).as_bytes();
        let (mut lo, mut hi) = (0, self.code_starts.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match text(mid).cmp(code) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid as u32),
            }
        }
        None
    }
}

impl CityIndex {
    /// The municipality of a JP office code (a company or office in the place-name
    /// column: 616-8586 `東映太秦映画村` is in `Kyoto Shi`), which `/api/lookup` answers as
    /// its city (issue 34); `None` for every other code. `code` is canonical.
    pub fn office_city(&self, country: CountryCode, code: &str) -> Option<&str> {
        let cities = self.countries.get(&country)?;
        if cities.office_cities.is_empty() {
            return None;
        }
        let id = cities.code_id(code)?;
        let at = cities
            .office_cities
            .binary_search_by_key(&id, |(c, _)| *c)
            .ok()?;
        Some(&cities.office_cities[at].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_query_keeps_its_edge_words_and_its_middle_whole() {
        let words: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
        for n in 1..40 {
            let query = words[..n].join(" ");
            let edge = edge_words(&query);
            // Nothing lost or moved.
            assert_eq!(edge.join(" "), query, "{n}");
            if n <= CODE_EDGE_WORDS + MAX_CODE_WORDS - 1 + CODE_EDGE_WORDS {
                assert_eq!(edge.len(), n, "{n}: every word");
                continue;
            }
            // The first 10 and the last 8 words, the rest as one.
            let head = CODE_EDGE_WORDS + MAX_CODE_WORDS - 1;
            assert_eq!(edge.len(), head + 1 + CODE_EDGE_WORDS, "{n}");
            assert_eq!(edge[..head], words[..head], "{n}");
            assert_eq!(edge[head + 1..], words[n - CODE_EDGE_WORDS..n], "{n}");
        }
    }

    #[test]
    fn a_code_shape_admits_its_lengths_and_first_characters_only() {
        let shape = CodeShape::of(["01067", "99998", "AD100"]);
        assert!(shape.may_be_long(5) && !shape.may_be_long(4) && !shape.may_be_long(6));
        assert!(shape.may_start_with(b'0') && shape.may_start_with(b'9'));
        assert!(shape.may_start_with(b'A') && !shape.may_start_with(b'R'));
        let none = CodeShape::of([]);
        assert!(!none.may_be_long(0) && !none.may_start_with(b'0'));
    }
}
