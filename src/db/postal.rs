//! Reads of the postal data in the file: the rows the in-memory indexes are built from
//! (`crate::index`), country data, coverage. Lookup, validation and city search answer
//! from memory, never from here.
//!
//! Every function here reads on the caller's connection, inside the caller's transaction
//! when it has one; the caller decides on which thread it runs.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, RwLock};

use anyhow::Result;
use regex::Regex;
use rusqlite::Connection;

use crate::domain::postal_code::anchored;

/// What the service knows of a country with loaded data (a row of `countries`).
#[derive(Debug, Clone)]
pub struct CountryData {
    pub record_count: i64,
    pub key_shapes: String,
    pub postal_regex: Option<Arc<Regex>>,
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

/// The columns [`country_data`] reads, in its order.
pub(crate) const COUNTRY_COLUMNS: &str = "record_count, key_shapes, postal_regex";

/// A `CountryData` from the [`COUNTRY_COLUMNS`] of a row, starting at column `first`.
pub(crate) fn country_data(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<CountryData> {
    Ok(CountryData {
        record_count: r.get(first)?,
        key_shapes: r.get(first + 1)?,
        postal_regex: compiled(&r.get::<_, String>(first + 2)?),
    })
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

/// A country with loaded data, as `countries` holds it.
pub type CountryRow = crate::db::dataset::CountryRow<CountryData>;

/// Every country with records, in code order.
pub fn loaded_countries(conn: &Connection) -> Result<Vec<CountryRow>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT code, name, postal_format, postal_regex, {COUNTRY_COLUMNS}
         FROM countries WHERE record_count > 0 ORDER BY code"
    ))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(CountryRow {
                code: r.get(0)?,
                name: r.get(1)?,
                postal_format: r.get(2)?,
                postal_regex: r.get(3)?,
                data: country_data(r, 4)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

/// One stored record, borrowed from the row being read.
#[derive(Debug, Clone, Copy)]
pub struct RecordRow<'a> {
    pub country: &'a str,
    /// `postal_code::compact` of the code.
    pub compact_key: &'a str,
    pub postal_code: &'a str,
    pub place_name: &'a str,
    pub admin_name1: Option<&'a str>,
    pub admin_code1: Option<&'a str>,
    pub admin_name2: Option<&'a str>,
    pub admin_code2: Option<&'a str>,
    pub admin_name3: Option<&'a str>,
    pub admin_code3: Option<&'a str>,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    pub accuracy: Option<i64>,
    pub timezone: Option<&'a str>,
}

impl RecordRow<'_> {
    pub fn to_record(&self) -> PlaceRecord {
        let owned = |s: Option<&str>| s.map(str::to_owned);
        PlaceRecord {
            postal_code: self.postal_code.to_owned(),
            place_name: self.place_name.to_owned(),
            admin_name1: owned(self.admin_name1),
            admin_code1: owned(self.admin_code1),
            admin_name2: owned(self.admin_name2),
            admin_code2: owned(self.admin_code2),
            admin_name3: owned(self.admin_name3),
            admin_code3: owned(self.admin_code3),
            latitude: self.latitude,
            longitude: self.longitude,
            accuracy: self.accuracy,
            timezone: owned(self.timezone),
        }
    }
}

/// Calls `each` with every record of the file, in source order (row id).
pub fn for_each_record(
    conn: &Connection,
    mut each: impl FnMut(&RecordRow<'_>) -> Result<()>,
) -> Result<()> {
    let mut stmt = conn.prepare(
        "SELECT country, compact_key, postal_code, place_name, admin_name1, admin_code1,
                admin_name2, admin_code2, admin_name3, admin_code3,
                latitude, longitude, accuracy, timezone
         FROM postal_codes ORDER BY id",
    )?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        each(&RecordRow {
            country: r.get_ref(0)?.as_str()?,
            compact_key: r.get_ref(1)?.as_str()?,
            postal_code: r.get_ref(2)?.as_str()?,
            place_name: r.get_ref(3)?.as_str()?,
            admin_name1: r.get_ref(4)?.as_str_or_null()?,
            admin_code1: r.get_ref(5)?.as_str_or_null()?,
            admin_name2: r.get_ref(6)?.as_str_or_null()?,
            admin_code2: r.get_ref(7)?.as_str_or_null()?,
            admin_name3: r.get_ref(8)?.as_str_or_null()?,
            admin_code3: r.get_ref(9)?.as_str_or_null()?,
            latitude: r.get(10)?,
            longitude: r.get(11)?,
            accuracy: r.get(12)?,
            timezone: r.get_ref(13)?.as_str_or_null()?,
        })?;
    }
    Ok(())
}

/// One record's place, region and code, for city search.
#[derive(Debug, Clone, Copy)]
pub struct PlaceRow<'a> {
    pub postal_code: &'a str,
    pub place_name: &'a str,
    pub place_folded: &'a str,
    pub admin_name1: Option<&'a str>,
    pub admin_code1: Option<&'a str>,
    pub admin_name2: Option<&'a str>,
    pub admin_name3: Option<&'a str>,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
}

/// Calls `each` with every record of `country` by folded place name, through the
/// `postal_codes_by_place` index (rows of one name arrive together, in source order).
pub fn for_each_place(
    conn: &Connection,
    country: &str,
    mut each: impl FnMut(&PlaceRow<'_>),
) -> Result<()> {
    let mut stmt = conn.prepare_cached(
        "SELECT postal_code, place_name, place_folded, admin_name1, admin_code1,
                admin_name2, admin_name3, latitude, longitude
         FROM postal_codes WHERE country = ?1 ORDER BY place_folded, id",
    )?;
    let mut rows = stmt.query([country])?;
    while let Some(r) = rows.next()? {
        each(&PlaceRow {
            postal_code: r.get_ref(0)?.as_str()?,
            place_name: r.get_ref(1)?.as_str()?,
            place_folded: r.get_ref(2)?.as_str()?,
            admin_name1: r.get_ref(3)?.as_str_or_null()?,
            admin_code1: r.get_ref(4)?.as_str_or_null()?,
            admin_name2: r.get_ref(5)?.as_str_or_null()?,
            admin_name3: r.get_ref(6)?.as_str_or_null()?,
            latitude: r.get(7)?,
            longitude: r.get(8)?,
        });
    }
    Ok(())
}
