//! Reads of the postal data in the file: country data, city search, coverage. (Lookup and
//! validation answer from memory: `postal_index`.)
//!
//! Every function here is one short read on the caller's connection; the caller decides
//! on which thread it runs (see `api`).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, LazyLock, RwLock};

use anyhow::Result;
use regex::Regex;
use rusqlite::{Connection, OptionalExtension, params};

use crate::domain::CountryCode;
use crate::domain::postal_code::{anchored, canonical};
use crate::domain::text::fold;

/// What the service knows of a country with loaded data (a row of `countries`).
#[derive(Debug, Clone)]
pub struct CountryData {
    pub record_count: i64,
    pub key_shapes: String,
    pub postal_regex: Option<Arc<Regex>>,
    /// Rowid range of the country's names in `places` / `places_trigram`.
    pub places: Option<(i64, i64)>,
}

/// One stored record (a line of the GeoNames file).
#[derive(Debug, Clone, PartialEq)]
pub struct PlaceRecord {
    pub postal_code: String,
    pub place_name: String,
    pub admin_name1: Option<String>,
    pub admin_code1: Option<String>,
    pub admin_name2: Option<String>,
    pub admin_code2: Option<String>,
    pub admin_name3: Option<String>,
    pub admin_code3: Option<String>,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    pub accuracy: Option<i64>,
    pub timezone: Option<String>,
}

/// The country's data, or `None` when nothing is loaded for it (a valid ISO code without
/// data answers like an unknown postal code, decisions.md).
pub fn country(conn: &Connection, country: CountryCode) -> Result<Option<CountryData>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {COUNTRY_COLUMNS} FROM countries WHERE code = ?1 AND record_count > 0"
        ))?
        .query_row([country.as_str()], |r| country_data(r, 0))
        .optional()?)
}

/// The columns [`country_data`] reads, in its order.
pub(crate) const COUNTRY_COLUMNS: &str =
    "record_count, key_shapes, postal_regex, place_first, place_last";

/// A `CountryData` from the [`COUNTRY_COLUMNS`] of a row, starting at column `first`.
pub(crate) fn country_data(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<CountryData> {
    Ok(CountryData {
        record_count: r.get(first)?,
        key_shapes: r.get(first + 1)?,
        postal_regex: compiled(&r.get::<_, String>(first + 2)?),
        places: r
            .get::<_, Option<i64>>(first + 3)?
            .zip(r.get::<_, Option<i64>>(first + 4)?),
    })
}

/// The verdict on one record of `/api/validate-bulk`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Found; the canonical stored key (`normalized`).
    Valid(String),
    NotFound,
    InvalidFormat,
    UnknownCountry,
}

/// countryInfo.txt's regexes, compiled once per pattern. A pattern the `regex` crate
/// cannot compile counts as absent (only the stored shapes then decide).
fn compiled(pattern: &str) -> Option<Arc<Regex>> {
    static CACHE: LazyLock<RwLock<HashMap<String, Option<Arc<Regex>>>>> =
        LazyLock::new(Default::default);
    if pattern.is_empty() {
        return None;
    }
    if let Some(hit) = CACHE.read().ok()?.get(pattern) {
        return hit.clone();
    }
    let regex = Regex::new(&anchored(pattern)).ok().map(Arc::new);
    CACHE
        .write()
        .ok()?
        .insert(pattern.to_string(), regex.clone());
    regex
}

/// A `/api/city` question, its parts folded with `domain::text::fold`.
#[derive(Debug, Clone)]
pub struct CityQuery {
    pub country: CountryCode,
    pub city: String,
    /// Matches admin name1 (or, for the US, also admin code1).
    pub state: Option<String>,
    /// Matches admin code1.
    pub st: Option<String>,
}

/// The answer to a `/api/city` question.
#[derive(Debug, Clone, PartialEq)]
pub struct CityMatch {
    /// Canonical codes, unique and ascending.
    pub zipcodes: Vec<String>,
    /// Set when no name matched exactly and this close one answered instead.
    pub fuzzy: Option<MatchedPlace>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MatchedPlace {
    pub city: String,
    pub state: String,
    pub st: String,
}

/// How close a name must be to answer a fuzzy query: normalised Damerau-Levenshtein
/// similarity (1 - edits / longer length). 0.75 lets one edit through in names of four or
/// more letters, two in eight or more (`San Fransisco`, `Pittsburg`, `Mnchen`), and keeps
/// unrelated words out.
pub const FUZZY_MIN_SIMILARITY: f64 = 0.75;
/// How many trigram candidates (best bm25 first) are scored by edit distance.
const FUZZY_CANDIDATES: i64 = 200;
/// Longest folded query that is matched fuzzily (the longest place name of the data has
/// 192 characters); longer ones match exactly or not at all, so a huge `city` costs one
/// index lookup, not a trigram query of thousands of terms.
const FUZZY_MAX_CHARS: usize = 200;

/// Exact match on the folded name, else the closest name (see schema.sql, `places_trigram`).
pub fn find_city(conn: &Connection, query: &CityQuery) -> Result<Option<CityMatch>> {
    let exact = city_rows(conn, query, &query.city)?;
    if !exact.is_empty() {
        return Ok(Some(CityMatch {
            zipcodes: unique_sorted(query.country, &exact),
            fuzzy: None,
        }));
    }
    let Some(data) = country(conn, query.country)? else {
        return Ok(None);
    };
    if query.city.len() > FUZZY_MAX_CHARS {
        return Ok(None);
    }
    let (Some((first, last)), Some(fts)) = (data.places, trigram_query(&query.city)) else {
        return Ok(None);
    };
    let candidates: Vec<String> = conn
        .prepare_cached(
            "SELECT name_folded FROM places_trigram
             WHERE places_trigram MATCH ?1 AND rowid BETWEEN ?2 AND ?3
             ORDER BY rank LIMIT ?4",
        )?
        .query_map(params![fts, first, last, FUZZY_CANDIDATES], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut scored: Vec<(f64, usize, &String)> = candidates
        .iter()
        .enumerate()
        .map(|(i, name)| {
            (
                strsim::normalized_damerau_levenshtein(&query.city, name),
                i,
                name,
            )
        })
        .filter(|(score, _, _)| *score >= FUZZY_MIN_SIMILARITY)
        .collect();
    // Best score first; among equals, the better trigram rank.
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, _, name) in scored {
        let rows = city_rows(conn, query, name)?;
        if let Some(first_row) = rows.first() {
            return Ok(Some(CityMatch {
                zipcodes: unique_sorted(query.country, &rows),
                fuzzy: Some(MatchedPlace {
                    city: first_row.place_name.clone(),
                    state: first_row.admin_name1.clone().unwrap_or_default(),
                    st: first_row.admin_code1.clone().unwrap_or_default(),
                }),
            }));
        }
    }
    Ok(None)
}

struct CityRow {
    postal_code: String,
    place_name: String,
    admin_name1: Option<String>,
    admin_code1: Option<String>,
}

/// Rows of the folded place name `name` in the country that pass the state filters, in
/// source order.
fn city_rows(conn: &Connection, query: &CityQuery, name: &str) -> Result<Vec<CityRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT postal_code, place_name, admin_name1, admin_code1 FROM postal_codes
         WHERE country = ?1 AND place_folded = ?2 ORDER BY id",
    )?;
    let rows = stmt.query_map(params![query.country.as_str(), name], |r| {
        Ok(CityRow {
            postal_code: r.get(0)?,
            place_name: r.get(1)?,
            admin_name1: r.get(2)?,
            admin_code1: r.get(3)?,
        })
    })?;
    let mut kept = Vec::new();
    for row in rows {
        let row = row?;
        let name1 = row.admin_name1.as_deref().map(fold).unwrap_or_default();
        let code1 = row.admin_code1.as_deref().map(fold).unwrap_or_default();
        let us = query.country == CountryCode::US;
        let state_ok = query
            .state
            .as_ref()
            .is_none_or(|s| *s == name1 || (us && *s == code1));
        let st_ok = query.st.as_ref().is_none_or(|s| *s == code1);
        if state_ok && st_ok {
            kept.push(row);
        }
    }
    Ok(kept)
}

fn unique_sorted(country: CountryCode, rows: &[CityRow]) -> Vec<String> {
    rows.iter()
        .map(|r| canonical(country, &r.postal_code))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The folded name's distinct trigrams as an FTS5 OR query; `None` when shorter than three.
fn trigram_query(folded: &str) -> Option<String> {
    let chars: Vec<char> = folded.chars().collect();
    let trigrams: BTreeSet<String> = chars.windows(3).map(|w| w.iter().collect()).collect();
    if trigrams.is_empty() {
        return None;
    }
    // Folded names hold only [a-z0-9 ], so no quoting is needed inside the phrases.
    Some(
        trigrams
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(" OR "),
    )
}

/// What the loaded dataset covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coverage {
    pub records: i64,
    pub countries: i64,
}

pub fn coverage(conn: &rusqlite::Connection) -> Result<Coverage> {
    Ok(conn
        .prepare_cached(
            "SELECT coalesce(sum(record_count), 0), count(*) FROM countries WHERE record_count > 0",
        )?
        .query_row([], |r| {
            Ok(Coverage {
                records: r.get(0)?,
                countries: r.get(1)?,
            })
        })?)
}
