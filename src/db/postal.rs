//! Reads of the postal data in the file: country data, coverage. (Lookup, validation and
//! city search answer from memory: `postal_index`, `city_index`.)
//!
//! Every function here is one short read on the caller's connection; the caller decides
//! on which thread it runs (see `api`).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, RwLock};

use anyhow::Result;
use regex::Regex;
use rusqlite::{Connection, OptionalExtension};

use crate::domain::CountryCode;
use crate::domain::postal_code::anchored;

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
