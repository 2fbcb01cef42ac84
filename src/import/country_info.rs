//! GeoNames `countryInfo.txt`: tab-separated, `#` comment lines, 19 columns.

use std::io::Read;

use anyhow::{Context, Result, bail};

use crate::db::dataset::CountryRow;

/// Reads the columns the service keeps: ISO (0), Country (4), Postal Code Format (13),
/// Postal Code Regex (14).
pub fn read(input: &mut dyn Read) -> Result<Vec<CountryRow>> {
    let mut text = String::new();
    input
        .read_to_string(&mut text)
        .context("countryInfo.txt is not UTF-8")?;
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(b'\t')
        .has_headers(false)
        .flexible(true)
        .quoting(false)
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.context("reading countryInfo.txt")?;
        let field = |i: usize| record.get(i).unwrap_or("").trim().to_string();
        let code = field(0);
        if code.is_empty() {
            continue;
        }
        if record.len() < 15 || code.len() != 2 {
            bail!(
                "countryInfo.txt line {}: not a country row",
                record.position().map_or(0, |p| p.line())
            );
        }
        rows.push(CountryRow {
            code,
            name: field(4),
            postal_format: field(13),
            postal_regex: field(14),
            data: (),
        });
    }
    if rows.is_empty() {
        bail!("countryInfo.txt holds no countries");
    }
    Ok(rows)
}
