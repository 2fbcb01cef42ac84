//! The operator's corrections (`postal-import --overrides FILE`): lines of the postal
//! format after a first column `add` or `remove`, applied to the upstream records by every
//! import until replaced (docs/dataset.md).
//!
//! - `remove`: every record of the code (country, postal code) whose place name folds to
//!   the line's; an empty place name removes every record of the code.
//! - `add`: the line's record replaces the first record of the code with the same folded
//!   place name (keeping its place in source order, so a corrected first record stays
//!   first), else is added after every other record.
//!
//! A file with one bad line is refused whole: the import stops before writing anything.

use std::collections::{HashMap, HashSet};
use std::io::Read;

use anyhow::{Context, Result, bail};

use super::geonames::{COLUMNS, parse_fields};
use crate::db::dataset::PostalRecord;
use crate::db::history::OverrideRow;
use crate::domain::text::fold;

/// One override, parsed.
#[derive(Debug, Clone)]
pub struct Override {
    pub line: i64,
    pub remove: bool,
    pub record: PostalRecord,
    /// The 12 columns as written.
    pub fields: String,
}

impl Override {
    pub fn row(&self) -> OverrideRow {
        OverrideRow {
            line: self.line,
            action: if self.remove { "remove" } else { "add" }.to_string(),
            fields: self.fields.clone(),
        }
    }
}

/// Reads an overrides file: blank lines and lines starting with `#` are skipped.
pub fn read(name: &str, input: &mut dyn Read, known: &HashSet<String>) -> Result<Vec<Override>> {
    let mut text = String::new();
    input
        .read_to_string(&mut text)
        .with_context(|| format!("reading {name} (UTF-8 text)"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let number = i as i64 + 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let (action, fields) = line.split_once('\t').unwrap_or((line, ""));
        let row = OverrideRow {
            line: number,
            action: action.trim().to_string(),
            fields: fields.to_string(),
        };
        out.push(parse(&row, known).with_context(|| format!("{name}:{number}"))?);
    }
    Ok(out)
}

/// An override from its stored row.
pub fn parse(row: &OverrideRow, known: &HashSet<String>) -> Result<Override> {
    let remove = match row.action.as_str() {
        "add" => false,
        "remove" => true,
        other => bail!("the first column must be add or remove, not {other:?}"),
    };
    let columns: Vec<&str> = row.fields.split('\t').collect();
    let Ok(fields) = <[&str; COLUMNS]>::try_from(columns.as_slice()) else {
        bail!(
            "expected add or remove and {COLUMNS} tab-separated columns, found {} after it",
            columns.len()
        );
    };
    let record = if remove && fields[2].trim().is_empty() {
        // A place name is optional for a removal: parse with a stand-in, keep it empty.
        let mut named = fields;
        named[2] = "-";
        let mut record = parse_fields(named, known).map_err(anyhow::Error::msg)?;
        record.place_name.clear();
        record.place_folded.clear();
        record
    } else {
        parse_fields(fields, known).map_err(anyhow::Error::msg)?
    };
    Ok(Override {
        line: row.line,
        remove,
        record,
        fields: row.fields.clone(),
    })
}

/// What applying the overrides did: per line, the records it removed or replaced (0 for an
/// `add` that added a record).
#[derive(Debug, Default)]
pub struct Applied {
    pub matched: Vec<(i64, usize)>,
}

/// Applies `overrides` in line order to `records`.
pub fn apply(records: &mut Vec<PostalRecord>, overrides: &[Override]) -> Applied {
    let mut applied = Applied::default();
    if overrides.is_empty() {
        return applied;
    }
    let keys: HashSet<(&str, String)> = overrides
        .iter()
        .map(|o| (o.record.country.as_str(), o.record.compact_key.clone()))
        .collect();
    // The records of the codes the overrides name, by code, in source order: indexes
    // into `records`, then past its end into `added`.
    let mut of_code: HashMap<(String, String), Vec<usize>> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        if keys.contains(&(r.country.as_str(), r.compact_key.clone())) {
            of_code
                .entry((r.country.clone(), r.compact_key.clone()))
                .or_default()
                .push(i);
        }
    }
    let base = records.len();
    let mut removed = vec![false; base];
    let mut added: Vec<Option<PostalRecord>> = Vec::new();
    for o in overrides {
        let key = (o.record.country.clone(), o.record.compact_key.clone());
        let place = fold(&o.record.place_name);
        let same_place = |i: usize| {
            let r = if i < base {
                Some(&records[i])
            } else {
                added[i - base].as_ref()
            };
            r.is_some_and(|r| o.record.place_name.is_empty() || r.place_folded == place)
        };
        let indexes = of_code.entry(key).or_default();
        if o.remove {
            let hits: Vec<usize> = indexes.iter().copied().filter(|&i| same_place(i)).collect();
            for &i in &hits {
                if i < base {
                    removed[i] = true;
                } else {
                    added[i - base] = None;
                }
            }
            indexes.retain(|i| !hits.contains(i));
            applied.matched.push((o.line, hits.len()));
            continue;
        }
        match indexes.iter().copied().find(|&i| same_place(i)) {
            Some(i) if i < base => records[i] = o.record.clone(),
            Some(i) => added[i - base] = Some(o.record.clone()),
            None => {
                indexes.push(base + added.len());
                added.push(Some(o.record.clone()));
                applied.matched.push((o.line, 0));
                continue;
            }
        }
        applied.matched.push((o.line, 1));
    }
    let mut i = 0;
    records.retain(|_| {
        i += 1;
        !removed[i - 1]
    });
    records.extend(added.into_iter().flatten());
    applied
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> HashSet<String> {
        ["DE"].into_iter().map(String::from).collect()
    }

    fn record(code: &str, place: &str, lat: &str) -> PostalRecord {
        let line = format!("DE\t{code}\t{place}\tBayern\tBY\t\t\t\t\t{lat}\t11.5\t");
        let fields: Vec<&str> = line.split('\t').collect();
        parse_fields(
            <[&str; COLUMNS]>::try_from(fields.as_slice()).unwrap(),
            &known(),
        )
        .unwrap()
    }

    fn overrides(text: &str) -> Vec<Override> {
        read("o.txt", &mut text.as_bytes(), &known()).unwrap()
    }

    fn places(records: &[PostalRecord]) -> Vec<String> {
        records
            .iter()
            .map(|r| format!("{} {} {}", r.postal_code, r.place_name, r.latitude.unwrap()))
            .collect()
    }

    #[test]
    fn add_replaces_the_same_place_in_its_position_or_appends_and_remove_drops_by_place() {
        let mut records = vec![
            record("80331", "München", "48.1"),
            record("80331", "Altstadt", "48.2"),
            record("80333", "München", "48.3"),
        ];
        let o = overrides(
            "# corrections\n\
             add\tDE\t80331\tMÜNCHEN\tBayern\tBY\t\t\t\t\t48.9\t11.5\t\n\
             \n\
             add\tDE\t99999\tNeustadt\tBayern\tBY\t\t\t\t\t49.0\t11.5\t\n\
             remove\tDE\t80331\tAltstadt\t\t\t\t\t\t\t\t\t\n\
             remove\tDE\t80333\t\t\t\t\t\t\t\t\t\t\n\
             remove\tDE\t12345\tNirgendwo\t\t\t\t\t\t\t\t\t\n",
        );
        let applied = apply(&mut records, &o);
        assert_eq!(
            places(&records),
            ["80331 MÜNCHEN 48.9", "99999 Neustadt 49"]
        );
        assert_eq!(applied.matched, [(2, 1), (4, 0), (5, 1), (6, 1), (7, 0)]);
    }

    #[test]
    fn a_bad_line_refuses_the_file_naming_it() {
        let bad = |text: &str| {
            read("o.txt", &mut text.as_bytes(), &known())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            bad("add\tDE\t1\tX\t\t\t\t\t\t\t\t\t\nchange\tDE\t1\tX\t\t\t\t\t\t\t\t\t\n"),
            "o.txt:2"
        );
        let e = read("o.txt", &mut "add\tDE\t1\n".as_bytes(), &known()).unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "o.txt:1: expected add or remove and 12 tab-separated columns, found 2 after it"
        );
        let e = read(
            "o.txt",
            &mut "add\tXX\t1\tX\t\t\t\t\t\t\t\t\t\n".as_bytes(),
            &known(),
        )
        .unwrap_err();
        assert_eq!(format!("{e:#}"), "o.txt:1: unknown country code \"XX\"");
    }
}
