//! The GeoNames gazetteer (`cities500.zip`, `../shared/geonames/README.md`): populated
//! places with their population and alternate names, UTF-8, tab-separated, no header, 19
//! columns a line. City search joins them to postal codes by country, name and distance
//! (`index::city`); nothing else reads them.
//!
//! Columns this reader keeps: 1 geonameid, 2 name, 4 alternatenames, 5-6 latitude and
//! longitude, 9 country code, 11 admin1 code, 15 population, 18 timezone. The copy in
//! `../shared` leaves columns 3, 8, 10, 12-14, 16, 17 and 19 empty; upstream fills them:
//! both read the same.

use std::collections::HashSet;
use std::io::Read;

use anyhow::Result;

use super::geonames::BadLine;
use super::{MAX_BAD_SHARE, MAX_REPORTED};
use crate::db::gazetteer::GazetteerRow;

/// Columns of a line.
const COLUMNS: usize = 19;

/// What one gazetteer file held.
#[derive(Debug, Default)]
pub struct Gazetteer {
    /// Places of the countries the postal data covers, in file order.
    pub places: Vec<GazetteerRow>,
    /// Lines read (places of every country, bad lines included).
    pub lines: usize,
    /// The first bad lines (at most `MAX_REPORTED`), and how many there were in all.
    pub bad: Vec<BadLine>,
    pub bad_count: usize,
}

impl Gazetteer {
    /// More than [`MAX_BAD_SHARE`] of the lines are bad, or none is good: not the
    /// gazetteer format.
    pub fn unusable(&self) -> Option<String> {
        if self.lines == 0 || self.bad_count == self.lines {
            return Some(format!(
                "no line of it is a gazetteer place ({} lines)",
                self.lines
            ));
        }
        (self.bad_count as f64 > self.lines as f64 * MAX_BAD_SHARE).then(|| {
            format!(
                "{} of {} lines are bad (more than {}%)",
                self.bad_count,
                self.lines,
                MAX_BAD_SHARE * 100.0
            )
        })
    }
}

/// Reads one gazetteer file; `name` is how bad lines are reported. Places of countries
/// outside `countries` (no postal data to join them to) are read and dropped.
pub fn read(name: &str, input: &mut dyn Read, countries: &HashSet<String>) -> Result<Gazetteer> {
    let mut text = Vec::new();
    input.read_to_end(&mut text)?;
    let mut out = Gazetteer::default();
    for (i, line) in text.split(|b| *b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        out.lines += 1;
        match parse(line) {
            Ok(row) => {
                if countries.contains(&row.country) {
                    out.places.push(row);
                }
            }
            Err(reason) => {
                out.bad_count += 1;
                if out.bad.len() < MAX_REPORTED {
                    out.bad.push(BadLine {
                        file: name.to_string(),
                        line: i as u64 + 1,
                        reason,
                    });
                }
            }
        }
    }
    Ok(out)
}

fn parse(line: &[u8]) -> Result<GazetteerRow, String> {
    let line = std::str::from_utf8(line).map_err(|_| "not UTF-8".to_string())?;
    let fields: Vec<&str> = line.split('\t').collect();
    if fields.len() != COLUMNS {
        return Err(format!("{} columns, expected {COLUMNS}", fields.len()));
    }
    let id: i64 = fields[0]
        .parse()
        .map_err(|_| format!("geonameid {:?} is not a number", fields[0]))?;
    let name = fields[1].trim();
    if name.is_empty() {
        return Err("empty name".into());
    }
    let coordinate = |text: &str, max: f64, what: &str| -> Result<f64, String> {
        text.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && v.abs() <= max)
            .ok_or_else(|| format!("{what} {text:?} is not a coordinate"))
    };
    let latitude = coordinate(fields[4], 90.0, "latitude")?;
    let longitude = coordinate(fields[5], 180.0, "longitude")?;
    let country = fields[8];
    if country.len() != 2 || !country.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(format!(
            "country code {country:?} is not ISO 3166-1 alpha-2"
        ));
    }
    let population = match fields[14] {
        "" => 0,
        text => text
            .parse::<i64>()
            .ok()
            .filter(|p| *p >= 0)
            .ok_or_else(|| format!("population {text:?} is not a number"))?,
    };
    let optional = |text: &str| (!text.is_empty()).then(|| text.to_string());
    Ok(GazetteerRow {
        id,
        country: country.to_string(),
        name: name.to_string(),
        alternate_names: fields[3].to_string(),
        latitude,
        longitude,
        admin1: optional(fields[10]),
        population,
        timezone: optional(fields[17]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MUNICH: &str = "2867714\tMunich\t\tMonaco di Baviera,München,Мюнхен\t48.13743\t11.57549\tP\t\tDE\t\t02\t\t\t\t1260391\t\t\tEurope/Berlin\t";
    const UPSTREAM: &str = "2867714\tMunich\tMunich\tMonaco di Baviera,München\t48.13743\t11.57549\tP\tPPLA\tDE\t\t02\t091\t09162\t09162000\t1260391\t\t524\tEurope/Berlin\t2023-10-12";

    fn countries(codes: &[&str]) -> HashSet<String> {
        codes.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn the_shared_copy_and_the_upstream_format_read_the_same() {
        for line in [MUNICH, UPSTREAM] {
            let read = read("t", &mut line.as_bytes(), &countries(&["DE"])).unwrap();
            assert_eq!(read.bad_count, 0, "{:?}", read.bad);
            let row = &read.places[0];
            assert_eq!(row.id, 2867714);
            assert_eq!(row.name, "Munich");
            assert_eq!(row.country, "DE");
            assert_eq!(row.population, 1260391);
            assert_eq!(row.admin1.as_deref(), Some("02"));
            assert!(row.alternate_names.starts_with("Monaco di Baviera,München"));
            assert_eq!((row.latitude, row.longitude), (48.13743, 11.57549));
        }
    }

    #[test]
    fn places_of_countries_without_postal_data_are_dropped() {
        let read = read("t", &mut MUNICH.as_bytes(), &countries(&["FR"])).unwrap();
        assert_eq!((read.lines, read.places.len(), read.bad_count), (1, 0, 0));
    }

    #[test]
    fn a_postal_code_file_is_not_a_gazetteer() {
        let postal = "US\t90210\tBeverly Hills\tCalifornia\tCA\tLos Angeles\t037\t\t\t34.0901\t-118.4065\t1\n";
        let read = read("t", &mut postal.as_bytes(), &countries(&["US"])).unwrap();
        assert_eq!(read.bad_count, 1);
        assert_eq!(read.bad[0].reason, "12 columns, expected 19");
        assert!(read.unusable().is_some());
    }

    #[test]
    fn bad_coordinates_and_populations_are_bad_lines() {
        let lines = [
            MUNICH.replace("48.13743", "north"),
            MUNICH.replace("1260391", "many"),
            MUNICH.replace("\tDE\t", "\tGermany\t"),
        ];
        for line in lines {
            let read = read("t", &mut line.as_bytes(), &countries(&["DE"])).unwrap();
            assert_eq!(read.bad_count, 1, "{line}");
        }
    }
}
