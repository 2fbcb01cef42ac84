//! Folding of place and region names, so that case, accents and punctuation never decide a match.

/// Folds a name for matching: transliterated to ASCII (`deunicode`: `Łódź` -> `Lodz`,
/// `Straße` -> `Strasse`, `Þórshöfn` -> `Thorshofn`, which SQLite's own
/// `remove_diacritics` leaves alone), lower case, apostrophes dropped (`O'Fallon` ->
/// `ofallon`), every other run of non-alphanumerics one space (`St. Louis` -> `st louis`,
/// `Winston-Salem` -> `winston salem`), trimmed. Import and queries go through this same
/// function, so the stored `place_folded` and a folded query compare with `=`.
///
/// Except Chinese characters and Japanese kana (`is_written`), kept as written: a
/// transliteration gives a kanji one Chinese reading, so different names fold to one
/// string (`富山市` Toyama and `福山市` Fukuyama were both `fu shan shi`), and Japan reads
/// them otherwise anyway. A name in them matches as it is written (issue 34).
pub fn fold(name: &str) -> String {
    fold_at_most(name, usize::MAX).unwrap_or_default()
}

/// `fold(name)` when it is at most `max` bytes long, else `None`, found without folding
/// the rest: a name that transliterates to far more than it is (`㎯` is `rad s2`) costs
/// no more than `max` bytes of work.
pub fn fold_at_most(name: &str, max: usize) -> Option<String> {
    let mut folded = String::with_capacity(name.len().min(max));
    let mut pending_space = false;
    let letter = |c: char, folded: &mut String, pending_space: &mut bool| {
        if *pending_space && !folded.is_empty() {
            folded.push(' ');
        }
        *pending_space = false;
        folded.push(c);
    };
    for c in name.chars() {
        if folded.len() > max {
            return None;
        }
        if is_written(c) {
            letter(c, &mut folded, &mut pending_space);
            continue;
        }
        let ascii = match c {
            c if c.is_ascii() => None,
            // A letter deunicode does not know separates words, as its `[?]` did.
            c => Some(deunicode::deunicode_char(c).unwrap_or(" ")),
        };
        let mut one = [0u8; 4];
        let ascii = ascii.unwrap_or_else(|| c.encode_utf8(&mut one));
        for c in ascii.chars() {
            if c.is_ascii_alphanumeric() {
                letter(c.to_ascii_lowercase(), &mut folded, &mut pending_space);
            } else if c != '\'' && c != '`' {
                pending_space = true;
            }
        }
    }
    (folded.len() <= max).then_some(folded)
}

/// Every letter of `text` is of the Latin alphabet (accents and all): `Lviv`, `Łódź`,
/// not `Львів`. A name found through another script's transliteration is another
/// language's name of its place, and the answer names the place (issue 34).
pub fn written_in_latin(text: &str) -> bool {
    text.chars().filter(|c| c.is_alphabetic()).all(|c| {
        matches!(c,
            '\0'..='\u{24F}'
            | '\u{2B0}'..='\u{2FF}'
            | '\u{1E00}'..='\u{1EFF}'
            | '\u{2C60}'..='\u{2C7F}'
            | '\u{A720}'..='\u{A7FF}'
            | '\u{AB30}'..='\u{AB6F}'
            | '\u{FB00}'..='\u{FB06}')
    })
}

/// Written forms kept by `fold`: CJK ideographs (and `々`), hiragana, katakana with the
/// prolonged sound mark (not the middle dot `・`, punctuation).
fn is_written(c: char) -> bool {
    matches!(c,
        '\u{3005}' | '\u{3006}'
        | '\u{3041}'..='\u{309F}'
        | '\u{30A0}'..='\u{30FA}'
        | '\u{30FC}'..='\u{30FF}'
        | '\u{31F0}'..='\u{31FF}'
        | '\u{3400}'..='\u{4DBF}'
        | '\u{4E00}'..='\u{9FFF}'
        | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{3134F}')
}

#[cfg(test)]
mod tests {
    use super::{fold, fold_at_most, written_in_latin};

    #[test]
    fn a_fold_bounded_in_bytes_is_the_fold_or_nothing() {
        assert_eq!(fold_at_most("München", 7).as_deref(), Some("munchen"));
        assert_eq!(fold_at_most("München", 6), None);
        // 200 characters that transliterate to 1,400 bytes: stopped at the bound.
        let squared = "\u{33AF}".repeat(200);
        assert_eq!(fold(&squared).len(), 1_400);
        assert_eq!(fold_at_most(&squared, 600), None);
        assert_eq!(fold_at_most(&squared, 1_400).map(|f| f.len()), Some(1_400));
        assert_eq!(fold_at_most("", 0).as_deref(), Some(""));
    }

    #[test]
    fn accents_and_case_are_folded() {
        assert_eq!(fold("München"), "munchen");
        assert_eq!(fold("ZÜRICH"), "zurich");
        assert_eq!(fold("São Paulo"), "sao paulo");
    }

    #[test]
    fn letters_without_a_decomposition_are_transliterated() {
        assert_eq!(fold("Łódź"), "lodz");
        assert_eq!(fold("Straße"), "strasse");
        assert_eq!(fold("Ørsta"), "orsta");
        assert_eq!(fold("Þórshöfn"), "thorshofn");
    }

    #[test]
    fn punctuation_separates_words_and_apostrophes_vanish() {
        assert_eq!(fold("  St. Louis "), "st louis");
        assert_eq!(fold("Winston-Salem"), "winston salem");
        assert_eq!(fold("O'Fallon"), "ofallon");
        assert_eq!(fold("Coeur d’Alene"), "coeur dalene");
    }

    #[test]
    fn latin_letters_are_told_from_other_scripts() {
        assert!(written_in_latin("Łódź, Ærøskøbing-Ẩm 12"));
        // The ʻokina, Latin Extended-C/D/E and the Latin ligatures.
        assert!(written_in_latin("Hawaiʻi Ᵽ Ꝁ ꬰ ﬁ"));
        assert!(written_in_latin("1-2"));
        assert!(!written_in_latin("Львів"));
        assert!(!written_in_latin("Lviv Львів"));
        assert!(!written_in_latin("東京"));
    }

    #[test]
    fn chinese_characters_and_kana_stay_as_written() {
        // One Chinese reading made these two cities one name (issue 34).
        assert_eq!(fold("富山市"), "富山市");
        assert_eq!(fold("福山市"), "福山市");
        assert_eq!(fold("さいたま市"), "さいたま市");
        assert_eq!(fold("京都市　伏見区"), "京都市 伏見区");
        assert_eq!(fold("ケ・セラ"), "ケ セラ");
        // Other scripts are still transliterated, and mixed names fold both ways.
        assert_eq!(fold("Москва"), "moskva");
        assert_eq!(fold("서울"), "seoul");
        assert_eq!(fold("Tokyo 東京"), "tokyo 東京");
    }

    #[test]
    fn a_name_of_only_punctuation_folds_to_nothing() {
        assert_eq!(fold(" .-/ "), "");
    }
}
