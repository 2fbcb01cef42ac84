//! Replacing the postal dataset (written by `postal-import`): one transaction, old data kept on failure.
//!
//! [`replace`] swaps every row of `postal_codes`, `places` and `places_trigram`, and the
//! per-country columns of `countries`, inside one IMMEDIATE transaction. In WAL mode a
//! reader keeps its snapshot until that commit, so a running server answers from the old
//! data, then from the new, never from an empty or half-filled table. The money tables are
//! not touched. The caller parses everything first, so the write lock is held only for
//! the inserts themselves.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result};
use rusqlite::{Connection, TransactionBehavior, params};

use crate::domain::postal_code::shape;

/// One line of `countryInfo.txt`, the columns the service keeps.
#[derive(Debug, Clone)]
pub struct CountryRow {
    pub code: String,
    pub name: String,
    pub postal_format: String,
    pub postal_regex: String,
}

/// One postal-code record, ready to store (see `postal_codes` in schema.sql).
#[derive(Debug, Clone, Default)]
pub struct PostalRecord {
    pub country: String,
    pub postal_code: String,
    pub compact_key: String,
    pub place_name: String,
    pub place_folded: String,
    /// admin name1, code1, name2, code2, name3, code3; `None` where the source is empty.
    pub admin: [Option<String>; 6],
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    pub accuracy: Option<i64>,
    pub timezone: Option<&'static str>,
}

/// Replaces the whole dataset with `records` (in source order) and the country table's
/// rows with `countries`. `progress` is called with the number of records written so far,
/// `phase` with the name of each step as it ends (for `POSTAL_IMPORT_TIMINGS`).
pub fn replace(
    conn: &mut Connection,
    countries: &[CountryRow],
    records: &[PostalRecord],
    mut progress: impl FnMut(u64),
    mut phase: impl FnMut(&str),
) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    phase("write lock taken");

    // Indexes are rebuilt after the rows are in: one sort instead of 1.6 M b-tree inserts.
    // Their DDL is read back from the file, so schema.sql stays the only place it is written.
    let indexes: Vec<(String, String)> = tx
        .prepare(
            "SELECT name, sql FROM sqlite_master
             WHERE type = 'index' AND tbl_name = 'postal_codes' AND sql IS NOT NULL",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (name, _) in &indexes {
        tx.execute_batch(&format!("DROP INDEX \"{name}\""))?;
    }
    tx.execute_batch(
        "DELETE FROM postal_codes;
         DELETE FROM places;
         INSERT INTO places_trigram(places_trigram) VALUES ('delete-all');
         DELETE FROM countries;",
    )
    .context("clearing the old dataset")?;
    phase("old rows and indexes dropped");

    let mut shapes: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let mut record_counts: BTreeMap<&str, i64> = BTreeMap::new();
    let mut places: BTreeSet<(&str, &str)> = BTreeSet::new();
    {
        let mut insert = tx.prepare(
            "INSERT INTO postal_codes (id, country, postal_code, compact_key, place_name, place_folded,
                 admin_name1, admin_code1, admin_name2, admin_code2, admin_name3, admin_code3,
                 latitude, longitude, accuracy, timezone)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        )?;
        for (i, r) in records.iter().enumerate() {
            let [n1, c1, n2, c2, n3, c3] = &r.admin;
            insert.execute(params![
                i as i64 + 1,
                r.country,
                r.postal_code,
                r.compact_key,
                r.place_name,
                r.place_folded,
                n1,
                c1,
                n2,
                c2,
                n3,
                c3,
                r.latitude,
                r.longitude,
                r.accuracy,
                r.timezone,
            ])?;
            *record_counts.entry(&r.country).or_default() += 1;
            shapes
                .entry(&r.country)
                .or_default()
                .insert(shape(&r.compact_key));
            if !r.place_folded.is_empty() {
                places.insert((&r.country, &r.place_folded));
            }
            if i % 16_384 == 0 {
                progress(i as u64);
            }
        }
        progress(records.len() as u64);
    }
    phase("postal_codes inserted");
    for (_, sql) in &indexes {
        tx.execute_batch(sql)
            .context("rebuilding an index of postal_codes")?;
    }
    phase("postal_codes indexes built");

    // Places grouped by country, so each country's ids are one contiguous range.
    let mut place_ranges: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    {
        let mut insert =
            tx.prepare("INSERT INTO places (id, country, name_folded) VALUES (?1, ?2, ?3)")?;
        for (i, (country, name)) in places.iter().enumerate() {
            let id = i as i64 + 1;
            insert.execute(params![id, country, name])?;
            place_ranges
                .entry(country)
                .and_modify(|r| r.1 = id)
                .or_insert((id, id));
        }
    }
    phase("places inserted");
    tx.execute_batch("INSERT INTO places_trigram(places_trigram) VALUES ('rebuild')")
        .context("building the place-name trigram index")?;
    phase("trigram index built");

    {
        let mut insert = tx.prepare(
            "INSERT INTO countries (code, name, postal_format, postal_regex, record_count, key_shapes,
                 place_first, place_last)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for c in countries {
            let code = c.code.as_str();
            let key_shapes = shapes
                .get(code)
                .map(|s| s.iter().map(String::as_str).collect::<Vec<_>>().join(" "))
                .unwrap_or_default();
            let range = place_ranges.get(code);
            insert.execute(params![
                code,
                c.name,
                c.postal_format,
                c.postal_regex,
                record_counts.get(code).copied().unwrap_or(0),
                key_shapes,
                range.map(|r| r.0),
                range.map(|r| r.1),
            ])?;
        }
    }
    phase("countries written");
    tx.commit().context("committing the new dataset")?;
    phase("committed");
    Ok(())
}

/// Rows per country as stored, ascending by country code.
pub fn record_counts(conn: &Connection) -> Result<Vec<(String, i64)>> {
    let mut stmt = conn
        .prepare("SELECT country, count(*) FROM postal_codes GROUP BY country ORDER BY country")?;
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}
