//! `CountryCode`: an ISO 3166-1 alpha-2 code from GeoNames' countryInfo.txt.

use std::fmt;

/// The 252 codes of GeoNames' `countryInfo.txt`, sorted (decisions.md: a `country` must be
/// one of them). Kept here so that parsing a request needs no database; the test
/// `iso_codes_equal_those_of_country_info` compares this list with the shared file.
pub const ISO_CODES: [&str; 252] = [
    "AD", "AE", "AF", "AG", "AI", "AL", "AM", "AN", "AO", "AQ", "AR", "AS", "AT", "AU", "AW", "AX",
    "AZ", "BA", "BB", "BD", "BE", "BF", "BG", "BH", "BI", "BJ", "BL", "BM", "BN", "BO", "BQ", "BR",
    "BS", "BT", "BV", "BW", "BY", "BZ", "CA", "CC", "CD", "CF", "CG", "CH", "CI", "CK", "CL", "CM",
    "CN", "CO", "CR", "CS", "CU", "CV", "CW", "CX", "CY", "CZ", "DE", "DJ", "DK", "DM", "DO", "DZ",
    "EC", "EE", "EG", "EH", "ER", "ES", "ET", "FI", "FJ", "FK", "FM", "FO", "FR", "GA", "GB", "GD",
    "GE", "GF", "GG", "GH", "GI", "GL", "GM", "GN", "GP", "GQ", "GR", "GS", "GT", "GU", "GW", "GY",
    "HK", "HM", "HN", "HR", "HT", "HU", "ID", "IE", "IL", "IM", "IN", "IO", "IQ", "IR", "IS", "IT",
    "JE", "JM", "JO", "JP", "KE", "KG", "KH", "KI", "KM", "KN", "KP", "KR", "KW", "KY", "KZ", "LA",
    "LB", "LC", "LI", "LK", "LR", "LS", "LT", "LU", "LV", "LY", "MA", "MC", "MD", "ME", "MF", "MG",
    "MH", "MK", "ML", "MM", "MN", "MO", "MP", "MQ", "MR", "MS", "MT", "MU", "MV", "MW", "MX", "MY",
    "MZ", "NA", "NC", "NE", "NF", "NG", "NI", "NL", "NO", "NP", "NR", "NU", "NZ", "OM", "PA", "PE",
    "PF", "PG", "PH", "PK", "PL", "PM", "PN", "PR", "PS", "PT", "PW", "PY", "QA", "RE", "RO", "RS",
    "RU", "RW", "SA", "SB", "SC", "SD", "SE", "SG", "SH", "SI", "SJ", "SK", "SL", "SM", "SN", "SO",
    "SR", "SS", "ST", "SV", "SX", "SY", "SZ", "TC", "TD", "TF", "TG", "TH", "TJ", "TK", "TL", "TM",
    "TN", "TO", "TR", "TT", "TV", "TW", "TZ", "UA", "UG", "UM", "US", "UY", "UZ", "VA", "VC", "VE",
    "VG", "VI", "VN", "VU", "WF", "WS", "XK", "YE", "YT", "ZA", "ZM", "ZW",
];

/// Whether the pair of letters of each [`CountryCode::slot`] is one of [`ISO_CODES`].
const ISO_SLOTS: [bool; CountryCode::SLOTS] = {
    let mut slots = [false; CountryCode::SLOTS];
    let mut i = 0;
    while i < ISO_CODES.len() {
        let code = ISO_CODES[i].as_bytes();
        slots[CountryCode::slot_of([code[0], code[1]])] = true;
        i += 1;
    }
    slots
};

/// `AAABAC...ZZ`: every pair of letters, in [`CountryCode::slot`] order.
const LETTER_PAIRS: &[u8] = &{
    let mut bytes = [0u8; CountryCode::SLOTS * 2];
    let mut slot = 0;
    while slot < CountryCode::SLOTS {
        bytes[slot * 2] = b'A' + (slot / 26) as u8;
        bytes[slot * 2 + 1] = b'A' + (slot % 26) as u8;
        slot += 1;
    }
    bytes
};

/// Each pair of letters as text, by [`CountryCode::slot`].
static PAIRS: [&str; CountryCode::SLOTS] = {
    let mut pairs = [""; CountryCode::SLOTS];
    let mut slot = 0;
    while slot < CountryCode::SLOTS {
        let (pair, _) = LETTER_PAIRS.split_at(slot * 2).1.split_at(2);
        pairs[slot] = match std::str::from_utf8(pair) {
            Ok(text) => text,
            Err(_) => panic!("ASCII letters"),
        };
        slot += 1;
    }
    pairs
};

/// A valid ISO 3166-1 alpha-2 code, upper case. Whether postal data is loaded for it is
/// a question for the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CountryCode([u8; 2]);

impl CountryCode {
    pub const US: CountryCode = CountryCode(*b"US");
    pub const JP: CountryCode = CountryCode(*b"JP");

    /// Trims and upper-cases `input`; `None` unless it is one of [`ISO_CODES`].
    pub fn parse(input: &str) -> Option<CountryCode> {
        let trimmed = input.trim();
        let bytes = trimmed.as_bytes();
        if bytes.len() != 2 || !bytes.iter().all(u8::is_ascii_alphabetic) {
            return None;
        }
        let code = CountryCode([bytes[0].to_ascii_uppercase(), bytes[1].to_ascii_uppercase()]);
        // A table, not a search of the list: `/api/validate-bulk` parses a code a record.
        ISO_SLOTS[code.slot()].then_some(code)
    }

    /// How many [`CountryCode::slot`]s there are: every pair of letters.
    pub const SLOTS: usize = 26 * 26;

    /// This code's place among all pairs of letters (`AA` 0, `AB` 1, ... `ZZ` 675): a
    /// table indexed by it finds a country's data without hashing.
    pub fn slot(self) -> usize {
        CountryCode::slot_of(self.0)
    }

    /// The [`CountryCode::slot`] of two upper-case letters, for tables built at compile
    /// time (anything else panics or is out of the slots' range).
    pub(crate) const fn slot_of(letters: [u8; 2]) -> usize {
        let [a, b] = letters;
        (a - b'A') as usize * 26 + (b - b'A') as usize
    }

    /// Its two letters.
    pub fn bytes(self) -> [u8; 2] {
        self.0
    }

    pub fn as_str(&self) -> &'static str {
        // From a table of every pair of letters: `from_utf8` of the two bytes took about 50
        // instructions, and slicing one text of all pairs 12 (the checks that both ends are
        // whole characters); `/api/validate-bulk` asks it twice a record.
        PAIRS[self.slot()]
    }
}

impl fmt::Display for CountryCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_trimmed_and_case_insensitive() {
        for input in ["DE", "de", "De", " dE "] {
            assert_eq!(
                CountryCode::parse(input).map(|c| c.to_string()),
                Some("DE".into())
            );
        }
    }

    #[test]
    fn codes_outside_the_iso_list_are_rejected() {
        for input in ["D", "DEU", "XX", "ZZ", "1A", "D-", "ÄÖ"] {
            assert_eq!(CountryCode::parse(input), None, "{input:?}");
        }
    }

    #[test]
    fn exactly_the_listed_pairs_of_letters_are_codes() {
        for a in b'A'..=b'Z' {
            for b in b'A'..=b'Z' {
                let pair = String::from_utf8(vec![a, b]).unwrap();
                assert_eq!(
                    CountryCode::parse(&pair).is_some(),
                    ISO_CODES.contains(&pair.as_str()),
                    "{pair}"
                );
            }
        }
    }

    #[test]
    fn every_code_has_its_own_slot() {
        let slots: std::collections::BTreeSet<usize> = ISO_CODES
            .iter()
            .map(|c| CountryCode::parse(c).expect("an ISO code").slot())
            .collect();
        assert_eq!(slots.len(), ISO_CODES.len());
        assert!(slots.iter().all(|&s| s < CountryCode::SLOTS));
        for code in ISO_CODES {
            assert_eq!(CountryCode::parse(code).unwrap().as_str(), code);
        }
    }

    #[test]
    fn the_list_is_sorted() {
        assert!(ISO_CODES.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn iso_codes_equal_those_of_country_info() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/geonames/countryInfo.txt"
        );
        let text = std::fs::read_to_string(path).expect("../shared/geonames/countryInfo.txt");
        let mut from_file: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| l.split('\t').next().unwrap_or(""))
            .collect();
        from_file.sort_unstable();
        assert_eq!(from_file, ISO_CODES.to_vec());
    }
}
