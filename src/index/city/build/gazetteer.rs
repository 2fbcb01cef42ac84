//! The gazetteer's cities of a country as `Builder::join` reads them: each one's names
//! folded, which of them are written in the Latin alphabet, its point and population.

use crate::domain::text::fold;

/// Alternate names longer than this are descriptions, not names people type.
const MAX_NAME_CHARS: usize = 60;
/// Words the gazetteer appends to a name that the postal data leaves out.
const GAZETTEER_SUFFIXES: [&str; 2] = [" Village", " Parish"];

/// A gazetteer place of the country: its names folded (its main name first), where it is
/// and how many live there.
pub(in crate::index::city) struct GazetteerCity {
    /// As the gazetteer writes it (`Karachi`).
    pub name: String,
    pub names: Vec<String>,
    /// Per name: written in the Latin alphabet, as a name (`is_latin`); the others are
    /// found as typed, but not completed by /api/suggest.
    pub latin: Vec<bool>,
    pub latitude: f64,
    pub longitude: f64,
    pub population: u64,
}

impl GazetteerCity {
    /// The place's names folded, each once: the main name, then the alternate names that
    /// fold to something a person types.
    pub fn new(
        name: &str,
        alternates: &str,
        latitude: f64,
        longitude: f64,
        population: i64,
    ) -> Self {
        let mut names = vec![fold(name)];
        let mut latin = vec![true];
        // The gazetteer's `Dededo Village` (GU) and `Vale Parish` (GG) are the data's
        // `Dededo` and `Vale`.
        if let Some(core) = GAZETTEER_SUFFIXES
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .filter(|core| !core.trim().is_empty())
        {
            names.push(fold(core));
            latin.push(true);
        }
        for alternate in alternates.split(',') {
            let folded = fold(alternate);
            if folded.len() < 2
                || folded.len() > MAX_NAME_CHARS
                || !folded
                    .chars()
                    .any(|c| c.is_ascii_alphabetic() || !c.is_ascii())
            {
                continue;
            }
            match names.iter().position(|n| *n == folded) {
                Some(at) => latin[at] |= is_latin(alternate),
                None => {
                    names.push(folded);
                    latin.push(is_latin(alternate));
                }
            }
        }
        GazetteerCity {
            name: name.to_string(),
            names,
            latin,
            latitude,
            longitude,
            population: population.max(0) as u64,
        }
    }
}

/// Written in the Latin alphabet (accents and all) as a name is, with a capital: not
/// another script, nor one of the gazetteer's machine transliterations of one, which it
/// writes in lower case (`san frnandw kalyfrnya`, `sheng fei er nan duo`).
fn is_latin(name: &str) -> bool {
    name.chars().any(char::is_uppercase)
        && name
            .chars()
            .all(|c| (c as u32) < 0x250 || ('\u{1E00}'..='\u{1EFF}').contains(&c))
}
