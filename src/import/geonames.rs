//! GeoNames postal-code files: UTF-8, tab-separated, no header, 12 columns a line.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::io::Read;
use std::sync::LazyLock;

use anyhow::{Context, Result};
use tzf_rs::DefaultFinder;

use crate::db::dataset::{CountryRow, PostalRecord};
use crate::domain::postal_code::compact;
use crate::domain::text::fold;

/// The columns of a line (`../shared/geonames/README.md`).
pub const COLUMNS: usize = 12;

/// Timezone polygons (tzf-rs, bundled data): built once, about 70 ms.
static TIMEZONES: LazyLock<DefaultFinder> = LazyLock::new(DefaultFinder::new);

/// A line that was skipped, and why.
#[derive(Debug, Clone)]
pub struct BadLine {
    pub file: String,
    pub line: u64,
    pub reason: String,
}

impl fmt::Display for BadLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.reason)
    }
}

/// What a whole import read.
pub struct Parsed {
    pub records: Vec<PostalRecord>,
    /// Distinct countries among `records`.
    pub countries: usize,
    /// The first bad lines (at most `MAX_REPORTED`), and how many there were in all.
    pub bad: Vec<BadLine>,
    pub bad_count: usize,
}

/// Reads postal-code files one after another into one dataset, in source order.
pub struct Reader {
    known: HashSet<String>,
    records: Vec<PostalRecord>,
    countries: BTreeSet<String>,
    bad: Vec<BadLine>,
    bad_count: usize,
}

impl Reader {
    /// `countries`: the rows of countryInfo.txt; a record of another country is a bad line.
    pub fn new(countries: &[CountryRow]) -> Reader {
        Reader {
            known: countries.iter().map(|c| c.code.clone()).collect(),
            records: Vec::with_capacity(1 << 21),
            countries: BTreeSet::new(),
            bad: Vec::new(),
            bad_count: 0,
        }
    }

    /// Reads one file; `name` is how bad lines are reported.
    pub fn read(&mut self, name: &str, input: &mut dyn Read) -> Result<()> {
        // Line numbers for bad-line reports: a record's own `position()` is where the reader
        // stood before skipping blank lines (and the `\n` of a CRLF), so it points at an
        // earlier line. Instead every line ends with `\n` (a `\r` before it is trimmed with
        // the last field) and one more `\n` is added at the end (an empty line, skipped),
        // so after each record the reader's line counter is exactly one past the record's.
        let mut reader = csv::ReaderBuilder::new()
            .delimiter(b'\t')
            .terminator(csv::Terminator::Any(b'\n'))
            .has_headers(false)
            .flexible(true)
            .quoting(false)
            .from_reader(input.chain(&b"\n"[..]));
        let mut line = csv::ByteRecord::new();
        while reader
            .read_byte_record(&mut line)
            .with_context(|| format!("reading {name}"))?
        {
            let number = reader.position().line() - 1;
            if line.len() == 1 && &line[0] == b"\r" {
                continue; // a blank CRLF line, skipped like a blank LF line
            }
            match parse_line(&line, &self.known) {
                Ok(record) => {
                    if !self.countries.contains(&record.country) {
                        self.countries.insert(record.country.clone());
                    }
                    self.records.push(record);
                }
                Err(reason) => {
                    self.bad_count += 1;
                    if self.bad.len() < super::MAX_REPORTED {
                        self.bad.push(BadLine {
                            file: name.to_string(),
                            line: number,
                            reason,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    pub fn finish(self) -> Parsed {
        Parsed {
            records: self.records,
            countries: self.countries.len(),
            bad: self.bad,
            bad_count: self.bad_count,
        }
    }
}

fn parse_line(line: &csv::ByteRecord, known: &HashSet<String>) -> Result<PostalRecord, String> {
    if line.len() != COLUMNS {
        return Err(format!(
            "expected {COLUMNS} tab-separated columns, found {}",
            line.len()
        ));
    }
    let mut fields = [""; COLUMNS];
    for (i, raw) in line.iter().enumerate() {
        fields[i] =
            std::str::from_utf8(raw).map_err(|_| format!("column {} is not UTF-8", i + 1))?;
    }
    parse_fields(fields, known)
}

/// A record from the 12 columns of a line (trimmed here); `known`: the country codes of
/// countryInfo.txt.
pub fn parse_fields(
    fields: [&str; COLUMNS],
    known: &HashSet<String>,
) -> Result<PostalRecord, String> {
    let fields = fields.map(str::trim);
    // `admin`: admin name and code 1, 2 and 3, as `PostalRecord::admin` keeps them.
    let [
        country,
        postal_code,
        place_name,
        admin @ ..,
        lat,
        lng,
        accuracy,
    ] = fields;
    if !known.contains(country) {
        return Err(format!("unknown country code {country:?}"));
    }
    if compact(postal_code).is_empty() {
        return Err("empty postal code".to_string());
    }
    let (latitude, longitude) = coordinates(lat, lng)?;
    let optional = |s: &str| (!s.is_empty()).then(|| s.to_string());
    let timezone = match (latitude, longitude) {
        (Some(lat), Some(lng)) => Some(TIMEZONES.get_tz_name(lng, lat)).filter(|tz| !tz.is_empty()),
        _ => None,
    };
    Ok(PostalRecord {
        country: country.to_string(),
        postal_code: postal_code.to_string(),
        compact_key: compact(postal_code),
        place_name: place_name.to_string(),
        place_folded: fold(place_name),
        admin: admin.map(optional),
        latitude,
        longitude,
        accuracy: accuracy.parse().ok(),
        timezone,
    })
}

/// Both coordinates, or neither; anything else is a bad line.
fn coordinates(lat: &str, lng: &str) -> Result<(Option<f64>, Option<f64>), String> {
    if lat.is_empty() && lng.is_empty() {
        return Ok((None, None));
    }
    let parse = |s: &str, limit: f64| {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && v.abs() <= limit)
    };
    match (parse(lat, 90.0), parse(lng, 180.0)) {
        (Some(lat), Some(lng)) => Ok((Some(lat), Some(lng))),
        _ => Err(format!("unparsable coordinates {lat:?}, {lng:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> HashSet<String> {
        ["US", "JP"].into_iter().map(String::from).collect()
    }

    fn line(text: &str) -> csv::ByteRecord {
        csv::ByteRecord::from(text.split('\t').collect::<Vec<_>>())
    }

    #[test]
    fn a_us_line_becomes_a_record_with_its_timezone() {
        let r = parse_line(
            &line("US\t90210\tBeverly Hills\tCalifornia\tCA\tLos Angeles\t037\t\t\t34.0901\t-118.4065\t"),
            &known(),
        )
        .unwrap();
        assert_eq!(r.compact_key, "90210");
        assert_eq!(r.place_folded, "beverly hills");
        assert_eq!(r.admin[0].as_deref(), Some("California"));
        assert_eq!(r.admin[4], None);
        assert_eq!(r.timezone, Some("America/Los_Angeles"));
        assert_eq!(r.accuracy, None);
    }

    #[test]
    fn wrong_column_counts_and_bad_coordinates_are_rejected_with_a_reason() {
        let k = known();
        assert!(
            parse_line(&line("US\t90210\tX"), &k)
                .unwrap_err()
                .contains("found 3")
        );
        let bad = line("US\t90210\tX\t\t\t\t\t\t\tnorth\t-118\t");
        assert!(parse_line(&bad, &k).unwrap_err().contains("coordinates"));
        let out_of_range = line("US\t90210\tX\t\t\t\t\t\t\t95\t-118\t");
        assert!(parse_line(&out_of_range, &k).is_err());
        let unknown = line("XX\t90210\tX\t\t\t\t\t\t\t34\t-118\t");
        assert!(
            parse_line(&unknown, &k)
                .unwrap_err()
                .contains("unknown country")
        );
    }

    #[test]
    fn bad_lines_are_numbered_as_an_editor_counts_them_across_blank_lines_and_crlf() {
        let good = "US\t90210\tX\t\t\t\t\t\t\t34\t-118\t";
        let text = format!("{good}\r\n\r\n\nUS\t1\r\n{good}\nUS\t2");
        let countries = [CountryRow {
            code: "US".into(),
            name: "United States".into(),
            postal_format: String::new(),
            postal_regex: String::new(),
            data: (),
        }];
        let mut reader = Reader::new(&countries);
        reader.read("f.txt", &mut text.as_bytes()).unwrap();
        let parsed = reader.finish();
        assert_eq!(parsed.records.len(), 2);
        let lines: Vec<u64> = parsed.bad.iter().map(|b| b.line).collect();
        assert_eq!(lines, [4, 6], "{:?}", parsed.bad);
    }

    #[test]
    fn a_line_without_coordinates_is_kept_without_a_timezone() {
        let r = parse_line(&line("JP\t100-0001\tChiyoda\t\t\t\t\t\t\t\t\t"), &known()).unwrap();
        assert_eq!(r.compact_key, "1000001");
        assert_eq!((r.latitude, r.timezone), (None, None));
    }
}
