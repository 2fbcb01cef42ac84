//! What an import changes: the codes it adds, removes and moves against the live data, the
//! retired codes after it, and the guard against an import that loses a country's codes
//! (docs/dataset.md).

use std::collections::{BTreeMap, HashMap, HashSet};

use anyhow::Result;
use rusqlite::Connection;

use crate::db::dataset::PostalRecord;
use crate::db::history::{self, Change, ChangeRow, CountryRow, RetiredRow};
use crate::domain::geo::haversine_km;

/// A code whose first record is farther than this from where it was has moved.
pub const MOVED_KM: f64 = 1.0;
/// A country that keeps less than this share of its codes is a shrink (`--allow-shrink`).
pub const SHRINK_KEPT: f64 = 0.9;

/// An import's changes against the live data.
#[derive(Debug, Default)]
pub struct Diff {
    /// Per country of the new data or the old: records and codes now, and the changes.
    pub countries: Vec<CountryRow>,
    /// Codes per country in the live data (0 for a country it did not hold).
    pub old_codes: BTreeMap<String, i64>,
    /// The codes added (countries that had codes before only), removed and moved.
    pub changes: Vec<ChangeRow>,
    /// The retired codes after the import: the old ones the new data does not hold again,
    /// and the codes it removes (`since` 0: dated by the swap).
    pub retired: Vec<RetiredRow>,
    /// Distinct codes of the new data.
    pub codes: i64,
}

/// A code's first record, as the diff compares it.
struct First<'a> {
    postal_code: &'a str,
    place_name: &'a str,
    place_folded: &'a str,
    latitude: Option<f64>,
    longitude: Option<f64>,
}

impl<'a> First<'a> {
    fn of(r: &'a PostalRecord) -> First<'a> {
        First {
            postal_code: &r.postal_code,
            place_name: &r.place_name,
            place_folded: &r.place_folded,
            latitude: r.latitude,
            longitude: r.longitude,
        }
    }

    /// Another first place, or the same one more than [`MOVED_KM`] away.
    fn moved_from(&self, before: &First<'_>) -> bool {
        if self.place_folded != before.place_folded {
            return true;
        }
        match (
            self.latitude,
            self.longitude,
            before.latitude,
            before.longitude,
        ) {
            (Some(lat), Some(lon), Some(lat0), Some(lon0)) => {
                haversine_km(lat0, lon0, lat, lon) > MOVED_KM
            }
            _ => false,
        }
    }
}

/// Compares `records` (the new data, in source order) with the live data of `conn` and
/// its retired codes.
pub fn diff(conn: &Connection, records: &[PostalRecord]) -> Result<Diff> {
    // Each new code's first record, and the counts per country.
    let mut new_first: HashMap<(&str, &str), usize> = HashMap::with_capacity(records.len());
    let mut counts: BTreeMap<String, CountryRow> = BTreeMap::new();
    for (i, r) in records.iter().enumerate() {
        let row = counts
            .entry(r.country.clone())
            .or_insert_with(|| uncounted(&r.country));
        row.records += 1;
        if let std::collections::hash_map::Entry::Vacant(slot) =
            new_first.entry((&r.country, &r.compact_key))
        {
            slot.insert(i);
            row.codes += 1;
        }
    }
    let mut matched = vec![false; records.len()];
    let mut seen: HashMap<String, HashSet<Box<str>>> = HashMap::new();
    let mut old_codes: BTreeMap<String, i64> = BTreeMap::new();
    let mut changes = Vec::new();
    let mut retired = Vec::new();
    history::for_each_live_record(conn, |old| {
        let of_country = match seen.get_mut(old.country) {
            Some(set) => set,
            None => seen.entry(old.country.to_string()).or_default(),
        };
        if of_country.contains(old.compact_key) {
            return Ok(()); // not the code's first record
        }
        of_country.insert(Box::from(old.compact_key));
        *old_codes.entry(old.country.to_string()).or_default() += 1;
        let before = First {
            postal_code: old.postal_code,
            place_name: old.place_name,
            place_folded: old.place_folded,
            latitude: old.latitude,
            longitude: old.longitude,
        };
        match new_first.get(&(old.country, old.compact_key)) {
            Some(&i) => {
                matched[i] = true;
                let now = First::of(&records[i]);
                if now.moved_from(&before) {
                    changes.push(change(old.country, &now, Change::Moved, Some(&before)));
                }
            }
            None => {
                changes.push(change(old.country, &before, Change::Removed, None));
                retired.push(RetiredRow {
                    country: old.country.to_string(),
                    compact_key: old.compact_key.to_string(),
                    postal_code: old.postal_code.to_string(),
                    city: old.place_name.to_string(),
                    since: 0,
                });
            }
        }
        Ok(())
    })?;
    drop(seen);
    // New codes: listed one by one only in a country that had codes before.
    let mut firsts: Vec<usize> = new_first.values().copied().collect();
    firsts.sort_unstable();
    for i in firsts {
        let r = &records[i];
        if matched[i] {
            continue;
        }
        counts.get_mut(&r.country).expect("counted").added += 1;
        if old_codes.get(&r.country).copied().unwrap_or(0) > 0 {
            changes.push(change(&r.country, &First::of(r), Change::Added, None));
        }
    }
    for c in &changes {
        let row = counts
            .entry(c.country.clone())
            .or_insert_with(|| uncounted(&c.country));
        match c.change {
            Change::Added => {}
            Change::Removed => row.removed += 1,
            Change::Moved => row.moved += 1,
        }
    }
    // The retired codes the new data does not hold again.
    for old in history::retired(conn)? {
        if !new_first.contains_key(&(old.country.as_str(), old.compact_key.as_str())) {
            retired.push(old);
        }
    }
    retired.sort_by(|a, b| (&a.country, &a.compact_key).cmp(&(&b.country, &b.compact_key)));
    changes.sort_by(|a, b| {
        (&a.country, &a.postal_code, a.change.as_str()).cmp(&(
            &b.country,
            &b.postal_code,
            b.change.as_str(),
        ))
    });
    Ok(Diff {
        codes: new_first.len() as i64,
        countries: counts.into_values().collect(),
        old_codes,
        changes,
        retired,
    })
}

fn change(country: &str, now: &First<'_>, change: Change, before: Option<&First<'_>>) -> ChangeRow {
    ChangeRow {
        country: country.to_string(),
        postal_code: now.postal_code.to_string(),
        change,
        city: now.place_name.to_string(),
        latitude: now.latitude,
        longitude: now.longitude,
        previous_city: before.map(|b| b.place_name.to_string()),
        previous_latitude: before.and_then(|b| b.latitude),
        previous_longitude: before.and_then(|b| b.longitude),
    }
}

/// A country the import would shrink: its codes before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shrink {
    pub country: String,
    pub before: i64,
    pub after: i64,
}

impl std::fmt::Display for Shrink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.after == 0 {
            let codes = if self.before == 1 { "code" } else { "codes" };
            write!(f, "{} would vanish ({} {codes})", self.country, self.before)
        } else {
            let lost = 100.0 * (self.before - self.after) as f64 / self.before as f64;
            write!(
                f,
                "{} would lose {lost:.1}% of its codes ({} -> {})",
                self.country, self.before, self.after
            )
        }
    }
}

impl Diff {
    /// The countries that would keep less than [`SHRINK_KEPT`] of their codes, or none.
    /// Kept: the old codes the new data still holds (`after` in [`Shrink`]), so a country
    /// whose codes are replaced by as many others (a broken file changing their format)
    /// is a shrink too.
    pub fn shrinks(&self) -> Vec<Shrink> {
        let kept: HashMap<&str, &CountryRow> = self
            .countries
            .iter()
            .map(|c| (c.country.as_str(), c))
            .collect();
        self.old_codes
            .iter()
            .filter(|(_, before)| **before > 0)
            .filter_map(|(country, &before)| {
                let after = kept
                    .get(country.as_str())
                    .map_or(0, |c| c.codes.min(before - c.removed));
                ((after as f64) < before as f64 * SHRINK_KEPT).then(|| Shrink {
                    country: country.clone(),
                    before,
                    after,
                })
            })
            .collect()
    }
}

/// A country's row before any of its records or changes is counted.
fn uncounted(country: &str) -> CountryRow {
    CountryRow {
        country: country.to_string(),
        records: 0,
        codes: 0,
        added: 0,
        removed: 0,
        moved: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shrink_of(before: &[(&str, i64)], after: &[(&str, i64)]) -> Vec<String> {
        let diff = Diff {
            old_codes: before.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
            countries: after
                .iter()
                .map(|(c, n)| CountryRow {
                    country: c.to_string(),
                    records: *n,
                    codes: *n,
                    added: 0,
                    removed: 0,
                    moved: 0,
                })
                .collect(),
            ..Diff::default()
        };
        diff.shrinks().iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_country_losing_more_than_a_tenth_of_its_codes_or_vanishing_is_a_shrink() {
        assert_eq!(
            shrink_of(&[("DE", 1000), ("FR", 50)], &[("DE", 899)]),
            [
                "DE would lose 10.1% of its codes (1000 -> 899)",
                "FR would vanish (50 codes)"
            ]
        );
        // Exactly 90% kept, a new country, growth: none.
        assert!(shrink_of(&[("DE", 1000)], &[("DE", 900), ("PL", 10)]).is_empty());
        assert!(shrink_of(&[], &[("DE", 1)]).is_empty());
        assert_eq!(shrink_of(&[("AI", 1)], &[]), ["AI would vanish (1 code)"]);
        // As many codes as before, 60% of them new: 40% of the old ones kept.
        let replaced = Diff {
            old_codes: [("DE".to_string(), 1000)].into(),
            countries: vec![CountryRow {
                country: "DE".into(),
                records: 1000,
                codes: 1000,
                added: 600,
                removed: 600,
                moved: 0,
            }],
            ..Diff::default()
        };
        assert_eq!(
            replaced
                .shrinks()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["DE would lose 60.0% of its codes (1000 -> 400)"]
        );
    }

    #[test]
    fn a_first_place_elsewhere_or_farther_than_a_kilometre_is_a_move() {
        let at = |place: &'static str, lat: f64, lon: f64| First {
            postal_code: "1",
            place_name: place,
            place_folded: place,
            latitude: Some(lat),
            longitude: Some(lon),
        };
        let before = at("berlin", 52.52, 13.40);
        assert!(!at("berlin", 52.525, 13.40).moved_from(&before)); // 0.56 km
        assert!(at("berlin", 52.53, 13.40).moved_from(&before)); // 1.1 km
        assert!(at("potsdam", 52.52, 13.40).moved_from(&before));
        let nowhere = First {
            latitude: None,
            longitude: None,
            ..at("berlin", 0.0, 0.0)
        };
        assert!(!nowhere.moved_from(&before));
    }
}
