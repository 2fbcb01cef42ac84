//! The `gazetteer` table: GeoNames' populated places with population and alternate names
//! (written by `postal-import` through `dataset::replace`, read when the dataset loads).

use anyhow::Result;
use rusqlite::Connection;

/// One place of the gazetteer, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct GazetteerRow {
    /// GeoNames' geonameid.
    pub id: i64,
    pub country: String,
    pub name: String,
    /// Comma-separated, as the file writes them.
    pub alternate_names: String,
    pub latitude: f64,
    pub longitude: f64,
    /// GeoNames' admin1 code (not always the postal file's admin code1).
    pub admin1: Option<String>,
    pub population: i64,
    pub timezone: Option<String>,
}

/// One stored place, borrowed from the row being read (what city search uses).
#[derive(Debug, Clone, Copy)]
pub struct GazetteerPlace<'a> {
    pub name: &'a str,
    pub alternate_names: &'a str,
    pub latitude: f64,
    pub longitude: f64,
    pub population: i64,
}

/// Calls `each` with every place of `country`, most populous first.
pub fn for_each_place(
    conn: &Connection,
    country: &str,
    mut each: impl FnMut(&GazetteerPlace<'_>),
) -> Result<()> {
    let mut stmt = conn.prepare_cached(
        "SELECT name, alternate_names, latitude, longitude, population
         FROM gazetteer WHERE country = ?1 ORDER BY population DESC, id",
    )?;
    let mut rows = stmt.query([country])?;
    while let Some(r) = rows.next()? {
        each(&GazetteerPlace {
            name: r.get_ref(0)?.as_str()?,
            alternate_names: r.get_ref(1)?.as_str()?,
            latitude: r.get(2)?,
            longitude: r.get(3)?,
            population: r.get(4)?,
        });
    }
    Ok(())
}
