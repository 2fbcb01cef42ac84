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
//! every billing commit, see `index::postal`), and its boxes are latitude/longitude ranges,
//! which wrap at the antimeridian.
//!
//! Searches are exact in great-circle distance: the tree proposes candidates by chord
//! (which orders points as great-circle distance does), within a chord widened by 1e-9 so
//! that rounding can never leave a point out, and the haversine distance of each candidate
//! decides (`domain::geo`). Ties: country, then compact code (`geo::nearest_first`).

use std::collections::HashMap;
use std::num::NonZero;

use anyhow::{Context, Result};
use kiddo::results::query_result_item::QueryResultItem;
use kiddo::{ImmutableKdTree, SquaredEuclidean};

use crate::db::postal::CountryRow;
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
    /// `text[ends[i-1]..ends[i]]` is the i-th key (the code of rank i, `Nearby::rank`).
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
    /// Builds the index from every code's first record; `loaded` gives the countries'
    /// names and formats, `levels` the admin levels (1, 2, 3) some record of each country
    /// carries.
    pub fn build<'a>(
        loaded: &[CountryRow],
        sources: impl Iterator<Item = GeoSource<'a>>,
        levels: &HashMap<CountryCode, [bool; 3]>,
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
        let infos = country_infos(loaded, &countries, &codes, levels)?;
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
    ) -> Vec<Nearby> {
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
        let mut hits = self.nearby(center, searchable, &candidates);
        hits.retain(|h| h.km <= max_km);
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
    ) -> (Vec<Nearby>, bool) {
        let Some(searchable) = self.searchable(country) else {
            return (Vec::new(), false);
        };
        let candidates = searchable
            .tree
            .query(&center.unit_vector())
            .within::<SquaredEuclidean<f64>>(search_chord_squared(radius.get()))
            .unsorted()
            .execute();
        let mut hits = self.nearby(center, searchable, &candidates);
        hits.retain(|h| h.km <= radius.get());
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

    /// An order in which to search `centers` so that consecutive searches walk the same
    /// part of the tree (its pages stay in the CPU caches): the Morton (Z-order) code of
    /// each centre's unit vector on a 1024-cell grid per axis.
    pub fn visiting_order(&self, centers: &[Coordinates]) -> Vec<usize> {
        let cell = |x: f64| ((x + 1.0) * 511.5).clamp(0.0, 1023.0) as u64;
        let spread = |mut v: u64| {
            // The ten bits of `v` two bits apart: b9..b0 -> b9 0 0 b8 0 0 ... b0.
            v &= 0x3ff;
            v = (v | v << 16) & 0x0300_00ff;
            v = (v | v << 8) & 0x0300_f00f;
            v = (v | v << 4) & 0x030c_30c3;
            (v | v << 2) & 0x0924_9249
        };
        let mut order: Vec<(u64, usize)> = centers
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let [x, y, z] = c.unit_vector();
                (
                    spread(cell(x)) | spread(cell(y)) << 1 | spread(cell(z)) << 2,
                    i,
                )
            })
            .collect();
        order.sort_unstable();
        order.into_iter().map(|(_, i)| i).collect()
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

    /// The candidates a tree search found, with their haversine distance from `center`.
    /// Codes often share coordinates (a town's codes, a country's placeholder point) and
    /// then lie side by side in the tree: the distance of the previous candidate's point
    /// is reused when the point is the same (the same inputs give the same `f64`).
    fn nearby(
        &self,
        center: &Coordinates,
        searchable: &Searchable,
        candidates: &[QueryResultItem<(), u32, f64>],
    ) -> Vec<Nearby> {
        let mut last = (f64::NAN, f64::NAN, 0.0);
        candidates
            .iter()
            .map(|c| {
                let p = &self.points[searchable.first + c.item as usize];
                if (p.latitude, p.longitude) != (last.0, last.1) {
                    let km = haversine_km(
                        center.latitude(),
                        center.longitude(),
                        p.latitude,
                        p.longitude,
                    );
                    last = (p.latitude, p.longitude, km);
                }
                Nearby {
                    country: self.countries[p.slot as usize],
                    rank: p.code,
                    km: last.2,
                }
            })
            .collect()
    }
}

/// Sorts `hits` nearest first and keeps the first `n`.
fn keep_nearest(hits: &mut Vec<Nearby>, n: usize) {
    if hits.len() > n {
        hits.select_nth_unstable_by(n, nearest_first);
        hits.truncate(n);
    }
    hits.sort_unstable_by(nearest_first);
}

fn country_infos(
    loaded: &[CountryRow],
    countries: &[CountryCode],
    codes: &[SortedCodes],
    levels: &HashMap<CountryCode, [bool; 3]>,
) -> Result<Vec<CountryInfo>> {
    let rows: HashMap<&str, &CountryRow> = loaded.iter().map(|r| (r.code.as_str(), r)).collect();
    countries
        .iter()
        .zip(codes)
        .map(|(country, codes)| {
            let row = rows
                .get(country.as_str())
                .with_context(|| format!("reading the country {country}"))?;
            Ok(CountryInfo {
                code: *country,
                name: row.name.clone(),
                records: row.data.record_count,
                codes: codes.len(),
                format: row.postal_format.clone(),
                regex: row.postal_regex.clone(),
                example_key: (codes.len() > 0).then(|| codes.key(0).to_string()),
                admin_levels: levels.get(country).map_or_else(Vec::new, |carried| {
                    (1..=3u8).filter(|l| carried[*l as usize - 1]).collect()
                }),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(codes: &[(&str, &str, f64, f64)]) -> GeoIndex {
        let mut loaded: Vec<CountryRow> = Vec::new();
        for (country, ..) in codes {
            if !loaded.iter().any(|r| r.code == *country) {
                loaded.push(CountryRow {
                    code: country.to_string(),
                    name: country.to_string(),
                    postal_format: String::new(),
                    postal_regex: String::new(),
                    data: crate::db::postal::CountryData {
                        record_count: 1,
                        key_shapes: String::new(),
                        postal_regex: None,
                    },
                });
            }
        }
        let sources = codes.iter().map(|(country, key, lat, lon)| GeoSource {
            country: CountryCode::parse(country).unwrap(),
            key,
            latitude: Some(*lat),
            longitude: Some(*lon),
        });
        GeoIndex::build(&loaded, sources, &HashMap::new()).unwrap()
    }

    /// The compact key of a code the index found.
    fn key<'a>(geo: &'a GeoIndex, hit: &Nearby) -> &'a str {
        geo.slots
            .get(&hit.country)
            .map_or("", |s| geo.codes[*s as usize].key(hit.rank as usize))
    }

    fn keys<'a>(geo: &'a GeoIndex, hits: &[Nearby]) -> Vec<&'a str> {
        hits.iter().map(|h| key(geo, h)).collect()
    }

    #[test]
    fn the_visiting_order_visits_every_point_once_and_neighbours_together() {
        let geo = index(&[("FR", "75001", 48.86, 2.34)]);
        let at = |lat, lon| Coordinates::parse(lat, lon).unwrap();
        let centers = [
            at(48.85, 2.35),
            at(-33.87, 151.21),
            at(48.86, 2.34),
            at(-33.86, 151.20),
            at(48.85, 2.35),
        ];
        let order = geo.visiting_order(&centers);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 1, 2, 3, 4]);
        // Paris is 0, 2, 4 and Sydney 1, 3: each city's points one after the other.
        let mut groups: Vec<usize> = order.iter().map(|i| i % 2).collect();
        groups.dedup();
        assert_eq!(groups.len(), 2, "{order:?}");
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
        assert_eq!(keys(&geo, &hits), ["EAST", "WEST", "FAR"]);
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
        assert_eq!(keys(&geo, &hits), ["9", "1"]);
        let only_us = geo.nearest(&center, CountryCode::parse("US"), Limit::default(), None);
        assert_eq!(keys(&geo, &only_us), ["1", "2"]);
    }

    #[test]
    fn max_km_and_the_radius_bound_the_results() {
        let geo = index(&[("NO", "A", 78.0, 15.0), ("NO", "B", 79.0, 15.0)]);
        let center = Coordinates::parse(78.0, 15.0).unwrap();
        let near = geo.nearest(&center, None, Limit::default(), MaxKm::parse(100.0));
        assert_eq!(keys(&geo, &near), ["A"]);
        let (hits, truncated) = geo.within(&center, RadiusKm::parse(112.0).unwrap(), None, 1);
        assert_eq!((keys(&geo, &hits), truncated), (vec!["A"], true));
        let (hits, truncated) = geo.within(&center, RadiusKm::parse(112.0).unwrap(), None, 2);
        assert_eq!((keys(&geo, &hits), truncated), (vec!["A", "B"], false));
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
