//! The geography of the postal data in memory: a k-d tree over every code's first record
//! (nearest, radius), each country's codes in code order (autocomplete), and the countries
//! with data (/api/countries). Built by `PostalIndex::load` beside the postal index, from
//! the same first records, and swapped with it when an import commits.
//!
//! Why a k-d tree (kiddo's `ImmutableKdTree`) on 3-D unit vectors: measured on the 902,244
//! first records with coordinates of allCountries.zip (release, this machine; the figures
//! are in docs/geography.md), kiddo built in 81-96 ms and took 13-19 MB, rstar's R*-tree
//! 283-290 ms and 37 MB; nearest 10 answered in 2.6-3.0 µs median (rstar 5.8-7.2 µs) and
//! 25 km around London in 1.3 µs (rstar 3.3 µs). SQLite's R*Tree module was not tried: a
//! read of the file costs more than any of these (a connection drops its page cache after
//! every billing commit, see `postal_index`), and its boxes are latitude/longitude ranges,
//! which wrap at the antimeridian.
//!
//! Searches are exact in great-circle distance: the tree proposes candidates by chord
//! (which orders points as great-circle distance does), within a chord widened by 1e-9 so
//! that rounding can never leave a point out, and the haversine distance of each candidate
//! decides (`domain::geo`). Ties: country, then compact code (`geo::nearest_first`).

use std::collections::HashMap;
use std::num::NonZero;

use anyhow::{Context, Result};
use kiddo::{ImmutableKdTree, SquaredEuclidean};
use rusqlite::Connection;

use crate::domain::CountryCode;
use crate::domain::geo::{
    Coordinates, Limit, MaxKm, Nearby, RadiusKm, haversine_km, nearest_first, search_chord_squared,
    unit_vector, widen_chord_squared,
};

type Tree = ImmutableKdTree<f64, 3>;

/// A code of the data as the geography index receives it: its first record's place.
pub struct GeoSource<'a> {
    pub country: CountryCode,
    /// The compact key (`postal_code::compact`).
    pub key: &'a str,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
}

/// A country with data, for /api/countries.
#[derive(Debug, Clone, PartialEq)]
pub struct CountryInfo {
    pub code: CountryCode,
    pub name: String,
    /// Records (lines of the source), as `countries.record_count`.
    pub records: i64,
    /// Distinct postal codes (compact keys).
    pub codes: usize,
    /// countryInfo.txt's `Postal Code Format` ('' when none).
    pub format: String,
    /// countryInfo.txt's `Postal Code Regex` ('' when none).
    pub regex: String,
    /// The compact key of the country's first code in code order.
    pub example_key: Option<String>,
    /// The admin levels (1, 2, 3) some record of the country carries, name or code.
    pub admin_levels: Vec<u8>,
}

/// One country's codes, sorted: their keys in one string (one allocation, not 0.9 M).
struct SortedCodes {
    text: String,
    /// `text[ends[i-1]..ends[i]]` is the i-th key.
    ends: Vec<u32>,
}

impl SortedCodes {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn key(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }
}

/// A code with coordinates.
struct Point {
    latitude: f64,
    longitude: f64,
    /// Index in `GeoIndex::countries`.
    slot: u16,
    /// Index in the country's `SortedCodes`.
    code: u32,
}

/// A tree over `points[first..first + size]`; its items are offsets from `first`.
struct Searchable {
    tree: Tree,
    first: usize,
}

pub struct GeoIndex {
    /// Countries with data, by code.
    countries: Vec<CountryCode>,
    slots: HashMap<CountryCode, u16>,
    codes: Vec<SortedCodes>,
    /// Points with coordinates, by country slot then code order.
    points: Vec<Point>,
    everywhere: Option<Searchable>,
    /// Per country slot (`None`: no code of the country has coordinates).
    by_country: Vec<Option<Searchable>>,
    infos: Vec<CountryInfo>,
}

impl GeoIndex {
    /// Builds the index from every code's first record; `conn` (in the caller's read
    /// transaction) gives the countries' names, formats and admin levels.
    pub fn build<'a>(
        conn: &Connection,
        sources: impl Iterator<Item = GeoSource<'a>>,
    ) -> Result<GeoIndex> {
        let mut by_country: HashMap<CountryCode, Vec<GeoSource<'a>>> = HashMap::new();
        for source in sources {
            by_country.entry(source.country).or_default().push(source);
        }
        let mut countries: Vec<CountryCode> = by_country.keys().copied().collect();
        countries.sort();
        let slots = countries
            .iter()
            .enumerate()
            .map(|(i, c)| (*c, i as u16))
            .collect();
        let mut codes = Vec::with_capacity(countries.len());
        let mut points = Vec::new();
        let mut ranges = Vec::with_capacity(countries.len());
        for (slot, country) in countries.iter().enumerate() {
            let mut sources = by_country.remove(country).unwrap_or_default();
            sources.sort_unstable_by(|a, b| a.key.cmp(b.key));
            let mut sorted = SortedCodes {
                text: String::with_capacity(sources.iter().map(|s| s.key.len()).sum()),
                ends: Vec::with_capacity(sources.len()),
            };
            let first = points.len();
            for (i, source) in sources.iter().enumerate() {
                sorted.text.push_str(source.key);
                sorted.ends.push(sorted.text.len() as u32);
                if let (Some(latitude), Some(longitude)) = (source.latitude, source.longitude)
                    && Coordinates::parse(latitude, longitude).is_some()
                {
                    points.push(Point {
                        latitude,
                        longitude,
                        slot: slot as u16,
                        code: i as u32,
                    });
                }
            }
            ranges.push(first..points.len());
            codes.push(sorted);
        }
        let vectors: Vec<[f64; 3]> = points
            .iter()
            .map(|p| unit_vector(p.latitude, p.longitude))
            .collect();
        let searchable = |range: std::ops::Range<usize>| -> Result<Option<Searchable>> {
            if range.is_empty() {
                return Ok(None);
            }
            let tree = Tree::new_from_slice(&vectors[range.clone()])
                .map_err(|e| anyhow::anyhow!("building the k-d tree: {e}"))?;
            Ok(Some(Searchable {
                tree,
                first: range.start,
            }))
        };
        let everywhere = searchable(0..points.len())?;
        let by_country = ranges
            .into_iter()
            .map(searchable)
            .collect::<Result<Vec<_>>>()?;
        let infos = country_infos(conn, &countries, &codes)?;
        Ok(GeoIndex {
            countries,
            slots,
            codes,
            points,
            everywhere,
            by_country,
            infos,
        })
    }

    /// The `limit` codes nearest to `center` (of `country` only, when given), no farther
    /// than `max_km` when given; nearest first.
    pub fn nearest(
        &self,
        center: &Coordinates,
        country: Option<CountryCode>,
        limit: Limit,
        max_km: Option<MaxKm>,
    ) -> Vec<Nearby<'_>> {
        let Some(searchable) = self.searchable(country) else {
            return Vec::new();
        };
        let q = center.unit_vector();
        let n = NonZero::new(limit.get()).unwrap_or(NonZero::<usize>::MIN);
        let bound = max_km.map(|m| search_chord_squared(m.get()));
        let found = match bound {
            Some(bound) => searchable
                .tree
                .query(&q)
                .nearest_n::<SquaredEuclidean<f64>>(n)
                .within(bound)
                .execute(),
            None => searchable
                .tree
                .query(&q)
                .nearest_n::<SquaredEuclidean<f64>>(n)
                .execute(),
        };
        let Some(farthest) = found.iter().map(|f| f.distance).reduce(f64::max) else {
            return Vec::new();
        };
        // Codes as far as the n-th (ties included) may outrank it once haversine decides.
        let reach = widen_chord_squared(farthest);
        let reach = bound.map_or(reach, |b| reach.min(b));
        let candidates = searchable
            .tree
            .query(&q)
            .within::<SquaredEuclidean<f64>>(reach)
            .unsorted()
            .execute();
        let max_km = max_km.map_or(f64::INFINITY, |m| m.get());
        let mut hits: Vec<Nearby<'_>> = candidates
            .iter()
            .map(|c| self.nearby(center, searchable.first + c.item as usize))
            .filter(|h| h.km <= max_km)
            .collect();
        keep_nearest(&mut hits, limit.get());
        hits
    }

    /// Every code within `radius` of `center` (of `country` only, when given), nearest
    /// first, at most `max`; the flag says whether more were within the radius.
    pub fn within(
        &self,
        center: &Coordinates,
        radius: RadiusKm,
        country: Option<CountryCode>,
        max: usize,
    ) -> (Vec<Nearby<'_>>, bool) {
        let Some(searchable) = self.searchable(country) else {
            return (Vec::new(), false);
        };
        let candidates = searchable
            .tree
            .query(&center.unit_vector())
            .within::<SquaredEuclidean<f64>>(search_chord_squared(radius.get()))
            .unsorted()
            .execute();
        let mut hits: Vec<Nearby<'_>> = candidates
            .iter()
            .map(|c| self.nearby(center, searchable.first + c.item as usize))
            .filter(|h| h.km <= radius.get())
            .collect();
        let truncated = hits.len() > max;
        keep_nearest(&mut hits, max);
        (hits, truncated)
    }

    /// The compact keys of `country` that start with `prefix` (a compact form), in code
    /// order, at most `limit`.
    pub fn autocomplete(&self, country: CountryCode, prefix: &str, limit: Limit) -> Vec<&str> {
        let Some(codes) = self.slots.get(&country).map(|s| &self.codes[*s as usize]) else {
            return Vec::new();
        };
        let (mut low, mut high) = (0, codes.len());
        while low < high {
            let mid = (low + high) / 2;
            if codes.key(mid) < prefix {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        (low..codes.len())
            .map(|i| codes.key(i))
            .take_while(|k| k.starts_with(prefix))
            .take(limit.get())
            .collect()
    }

    /// Every country with data, by code.
    pub fn countries(&self) -> &[CountryInfo] {
        &self.infos
    }

    fn searchable(&self, country: Option<CountryCode>) -> Option<&Searchable> {
        match country {
            None => self.everywhere.as_ref(),
            Some(c) => self
                .slots
                .get(&c)
                .and_then(|s| self.by_country[*s as usize].as_ref()),
        }
    }

    fn nearby(&self, center: &Coordinates, point: usize) -> Nearby<'_> {
        let p = &self.points[point];
        Nearby {
            country: self.countries[p.slot as usize],
            key: self.codes[p.slot as usize].key(p.code as usize),
            km: haversine_km(
                center.latitude(),
                center.longitude(),
                p.latitude,
                p.longitude,
            ),
        }
    }
}

/// Sorts `hits` nearest first and keeps the first `n`.
fn keep_nearest(hits: &mut Vec<Nearby<'_>>, n: usize) {
    if hits.len() > n {
        hits.select_nth_unstable_by(n, nearest_first);
        hits.truncate(n);
    }
    hits.sort_unstable_by(nearest_first);
}

fn country_infos(
    conn: &Connection,
    countries: &[CountryCode],
    codes: &[SortedCodes],
) -> Result<Vec<CountryInfo>> {
    let mut levels: HashMap<String, Vec<u8>> = HashMap::new();
    {
        let mut stmt = conn.prepare(
            "SELECT country,
                    max(admin_name1 IS NOT NULL OR admin_code1 IS NOT NULL),
                    max(admin_name2 IS NOT NULL OR admin_code2 IS NOT NULL),
                    max(admin_name3 IS NOT NULL OR admin_code3 IS NOT NULL)
             FROM postal_codes GROUP BY country",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let carried = (1..=3u8)
                .filter(|l| r.get::<_, bool>(*l as usize).unwrap_or(false))
                .collect();
            levels.insert(r.get(0)?, carried);
        }
    }
    let mut stmt = conn.prepare(
        "SELECT name, record_count, postal_format, postal_regex FROM countries WHERE code = ?1",
    )?;
    countries
        .iter()
        .zip(codes)
        .map(|(country, codes)| {
            let (name, records, format, regex) = stmt
                .query_row([country.as_str()], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .with_context(|| format!("reading the country {country}"))?;
            Ok(CountryInfo {
                code: *country,
                name,
                records,
                codes: codes.len(),
                format,
                regex,
                example_key: (codes.len() > 0).then(|| codes.key(0).to_string()),
                admin_levels: levels.remove(country.as_str()).unwrap_or_default(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(codes: &[(&str, &str, f64, f64)]) -> GeoIndex {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(crate::db::SCHEMA).unwrap();
        for (country, ..) in codes {
            conn.execute(
                "INSERT OR IGNORE INTO countries (code, name, postal_format, postal_regex, record_count)
                 VALUES (?1, ?1, '', '', 1)",
                [country],
            )
            .unwrap();
        }
        let sources = codes.iter().map(|(country, key, lat, lon)| GeoSource {
            country: CountryCode::parse(country).unwrap(),
            key,
            latitude: Some(*lat),
            longitude: Some(*lon),
        });
        GeoIndex::build(&conn, sources).unwrap()
    }

    fn keys<'a>(hits: &[Nearby<'a>]) -> Vec<&'a str> {
        hits.iter().map(|h| h.key).collect()
    }

    #[test]
    fn the_nearest_code_across_the_antimeridian_is_found() {
        let geo = index(&[
            ("FJ", "WEST", -17.0, 179.95),
            ("FJ", "EAST", -17.0, -179.95),
            ("FJ", "FAR", -17.0, 178.0),
        ]);
        let center = Coordinates::parse(-17.0, -179.99).unwrap();
        let hits = geo.nearest(&center, None, Limit::parse(3).unwrap(), None);
        assert_eq!(keys(&hits), ["EAST", "WEST", "FAR"]);
    }

    #[test]
    fn codes_at_the_same_place_are_ordered_by_country_then_code() {
        let geo = index(&[
            ("US", "2", 10.0, 10.0),
            ("US", "1", 10.0, 10.0),
            ("DE", "9", 10.0, 10.0),
            ("DE", "0", 11.0, 10.0),
        ]);
        let center = Coordinates::parse(10.0, 10.0).unwrap();
        let hits = geo.nearest(&center, None, Limit::parse(2).unwrap(), None);
        assert_eq!(keys(&hits), ["9", "1"]);
        let only_us = geo.nearest(&center, CountryCode::parse("US"), Limit::default(), None);
        assert_eq!(keys(&only_us), ["1", "2"]);
    }

    #[test]
    fn max_km_and_the_radius_bound_the_results() {
        let geo = index(&[("NO", "A", 78.0, 15.0), ("NO", "B", 79.0, 15.0)]);
        let center = Coordinates::parse(78.0, 15.0).unwrap();
        let near = geo.nearest(&center, None, Limit::default(), MaxKm::parse(100.0));
        assert_eq!(keys(&near), ["A"]);
        let (hits, truncated) = geo.within(&center, RadiusKm::parse(112.0).unwrap(), None, 1);
        assert_eq!((keys(&hits), truncated), (vec!["A"], true));
        let (hits, truncated) = geo.within(&center, RadiusKm::parse(112.0).unwrap(), None, 2);
        assert_eq!((keys(&hits), truncated), (vec!["A", "B"], false));
    }

    #[test]
    fn autocomplete_answers_codes_starting_with_the_prefix_in_code_order() {
        let geo = index(&[
            ("GB", "SW1A", 51.5, -0.14),
            ("GB", "SW10", 51.48, -0.18),
            ("GB", "SW1", 51.49, -0.14),
            ("GB", "SE1", 51.5, -0.09),
        ]);
        let gb = CountryCode::parse("GB").unwrap();
        assert_eq!(
            geo.autocomplete(gb, "SW1", Limit::default()),
            ["SW1", "SW10", "SW1A"]
        );
        assert_eq!(
            geo.autocomplete(gb, "SW", Limit::parse(1).unwrap()),
            ["SW1"]
        );
        assert!(geo.autocomplete(gb, "X", Limit::default()).is_empty());
        assert!(
            geo.autocomplete(CountryCode::US, "1", Limit::default())
                .is_empty()
        );
    }
}
