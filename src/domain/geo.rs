//! Geography rules, no I/O: coordinates, great-circle distance, the limits of the
//! geography endpoints (docs/geography.md), and the order of nearby results.
//!
//! Distances are great-circle distances on a sphere of the mean Earth radius (IUGG,
//! 6371.0088 km), by the haversine formula. The spatial index searches 3-D unit vectors:
//! the chord between two unit vectors is `2 sin(d / 2R)`, which grows with the
//! great-circle distance `d` everywhere, so a nearest or within-radius search on chords is
//! a search on great-circle distance, with no seam at the antimeridian and no squeeze at
//! the poles (a k-d tree on raw latitude/longitude has both).

use std::cmp::Ordering;

use super::CountryCode;

/// Mean Earth radius (IUGG), km.
pub const EARTH_RADIUS_KM: f64 = 6371.0088;
/// One international mile, km.
pub const KM_PER_MILE: f64 = 1.609344;
/// Results of one nearest search, at most (`limit`).
pub const MAX_LIMIT: usize = 100;
/// Results when `limit` is absent.
pub const DEFAULT_LIMIT: usize = 10;
/// Largest `radiusKm` of /api/radius.
pub const MAX_RADIUS_KM: f64 = 500.0;
/// Results of /api/radius, at most; more set `truncated`.
pub const MAX_RADIUS_RESULTS: usize = 1000;

/// A point on the Earth: latitude in [-90, 90], longitude in [-180, 180], degrees (WGS84).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Coordinates {
    latitude: f64,
    longitude: f64,
}

impl Coordinates {
    /// `None` unless both are finite and in range.
    pub fn parse(latitude: f64, longitude: f64) -> Option<Coordinates> {
        (valid_latitude(latitude) && valid_longitude(longitude)).then_some(Coordinates {
            latitude,
            longitude,
        })
    }

    pub fn latitude(&self) -> f64 {
        self.latitude
    }

    pub fn longitude(&self) -> f64 {
        self.longitude
    }

    /// The point as a unit vector (x towards 0°N 0°E, z towards the north pole).
    pub fn unit_vector(&self) -> [f64; 3] {
        unit_vector(self.latitude, self.longitude)
    }
}

pub fn valid_latitude(latitude: f64) -> bool {
    latitude.is_finite() && (-90.0..=90.0).contains(&latitude)
}

pub fn valid_longitude(longitude: f64) -> bool {
    longitude.is_finite() && (-180.0..=180.0).contains(&longitude)
}

/// `(latitude, longitude)` in degrees as a unit vector.
pub fn unit_vector(latitude: f64, longitude: f64) -> [f64; 3] {
    let (lat, lon) = (latitude.to_radians(), longitude.to_radians());
    [lat.cos() * lon.cos(), lat.cos() * lon.sin(), lat.sin()]
}

/// Great-circle distance in km between two points in degrees (haversine; the textbook
/// expression, so that anyone can recompute the same `f64`).
pub fn haversine_km(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (phi1, phi2) = (lat1.to_radians(), lat2.to_radians());
    let d_phi = (lat2 - lat1).to_radians();
    let d_lambda = (lon2 - lon1).to_radians();
    let a = (d_phi / 2.0).sin().powi(2) + phi1.cos() * phi2.cos() * (d_lambda / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS_KM * a.sqrt().min(1.0).asin()
}

/// The squared chord between unit vectors that are `km` apart on the great circle, made
/// slightly larger, so that a search on chords never misses a point the haversine
/// distance puts at `km` (the two are computed differently and may differ in the last
/// bits). Callers filter the candidates on the haversine distance.
pub fn search_chord_squared(km: f64) -> f64 {
    let angle = (km / EARTH_RADIUS_KM).min(std::f64::consts::PI);
    let chord = 2.0 * (angle / 2.0).sin();
    let widened = chord * (1.0 + 1e-9) + 1e-9;
    widened * widened
}

/// A chord (squared) widened the same way, from a squared chord the index measured.
pub fn widen_chord_squared(chord_squared: f64) -> f64 {
    let widened = chord_squared.sqrt() * (1.0 + 1e-9) + 1e-9;
    widened * widened
}

/// Kilometres as shown: rounded to the metre.
pub fn round_km(km: f64) -> f64 {
    (km * 1000.0).round() / 1000.0
}

pub fn km_to_miles(km: f64) -> f64 {
    km / KM_PER_MILE
}

/// `limit` of the geography endpoints: 1 to [`MAX_LIMIT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit(usize);

impl Limit {
    pub fn parse(limit: u64) -> Option<Limit> {
        usize::try_from(limit)
            .ok()
            .filter(|l| (1..=MAX_LIMIT).contains(l))
            .map(Limit)
    }

    pub fn get(&self) -> usize {
        self.0
    }
}

impl Default for Limit {
    fn default() -> Limit {
        Limit(DEFAULT_LIMIT)
    }
}

/// `radiusKm` of /api/radius: greater than 0, at most [`MAX_RADIUS_KM`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RadiusKm(f64);

impl RadiusKm {
    pub fn parse(km: f64) -> Option<RadiusKm> {
        (km.is_finite() && km > 0.0 && km <= MAX_RADIUS_KM).then_some(RadiusKm(km))
    }

    pub fn get(&self) -> f64 {
        self.0
    }
}

/// `maxKm` of /api/nearest: any finite distance greater than 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaxKm(f64);

impl MaxKm {
    pub fn parse(km: f64) -> Option<MaxKm> {
        (km.is_finite() && km > 0.0).then_some(MaxKm(km))
    }

    pub fn get(&self) -> f64 {
        self.0
    }
}

/// A code near a point: which code (its country and rank) and how far.
#[derive(Debug, Clone, PartialEq)]
pub struct Nearby {
    pub country: CountryCode,
    /// The code's rank among its country's compact keys (`postal_code::compact`) in
    /// byte order: comparing ranks compares keys. The postal index keeps each country's
    /// first records in that order, so the rank also finds the record
    /// (`PostalIndex::place_at`) without reading or hashing the key.
    pub rank: u32,
    pub km: f64,
}

/// The order of nearby results: distance, then country code, then compact key. Distances
/// are often equal (codes of one village share its coordinates); the rest makes the order
/// total, so the same question always gets the same answer.
pub fn nearest_first(a: &Nearby, b: &Nearby) -> Ordering {
    a.km.total_cmp(&b.km)
        .then_with(|| a.country.cmp(&b.country))
        .then_with(|| a.rank.cmp(&b.rank))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chord_squared(a: [f64; 3], b: [f64; 3]) -> f64 {
        (0..3).map(|i| (a[i] - b[i]).powi(2)).sum()
    }

    #[test]
    fn london_to_paris_is_343_km() {
        let km = haversine_km(51.5074, -0.1278, 48.8566, 2.3522);
        assert!((km - 343.56).abs() < 0.1, "{km}");
    }

    #[test]
    fn the_distance_across_the_antimeridian_is_short() {
        // Two points of Fiji's longitude, one each side of 180°.
        let km = haversine_km(-17.0, 179.9, -17.0, -179.9);
        assert!((km - 21.27).abs() < 0.01, "{km}");
    }

    #[test]
    fn every_meridian_meets_at_the_pole() {
        assert!(haversine_km(90.0, 0.0, 90.0, 137.0) < 1e-9);
        let a = unit_vector(90.0, 0.0);
        let b = unit_vector(90.0, -120.0);
        assert!(chord_squared(a, b) < 1e-20);
    }

    #[test]
    fn half_the_earth_away_is_half_the_circumference() {
        let km = haversine_km(0.0, 0.0, 0.0, 180.0);
        assert!((km - std::f64::consts::PI * EARTH_RADIUS_KM).abs() < 1e-6);
    }

    #[test]
    fn the_search_chord_covers_the_haversine_distance() {
        for (a, b) in [
            ((51.5, -0.12), (51.6, -0.2)),
            ((78.2, 15.6), (78.9, 11.9)),
            ((-43.9, -176.5), (-44.0, 179.9)),
            ((0.0, 0.0), (0.0, 0.000001)),
            ((10.0, 10.0), (-10.0, -170.0)),
        ] {
            let km = haversine_km(a.0, a.1, b.0, b.1);
            let chord = chord_squared(unit_vector(a.0, a.1), unit_vector(b.0, b.1));
            assert!(chord <= search_chord_squared(km), "{a:?} {b:?}");
            assert!(chord <= widen_chord_squared(chord));
        }
    }

    #[test]
    fn coordinates_out_of_range_are_rejected() {
        assert!(Coordinates::parse(90.0, 180.0).is_some());
        assert!(Coordinates::parse(-90.0, -180.0).is_some());
        assert!(Coordinates::parse(90.01, 0.0).is_none());
        assert!(Coordinates::parse(0.0, -180.5).is_none());
        assert!(Coordinates::parse(f64::NAN, 0.0).is_none());
    }

    #[test]
    fn limits_and_radii_have_their_ranges() {
        assert_eq!(Limit::parse(0), None);
        assert_eq!(Limit::parse(100).map(|l| l.get()), Some(100));
        assert_eq!(Limit::parse(101), None);
        assert_eq!(Limit::default().get(), 10);
        assert!(RadiusKm::parse(500.0).is_some());
        assert!(RadiusKm::parse(500.001).is_none());
        assert!(RadiusKm::parse(0.0).is_none());
        assert!(MaxKm::parse(0.0).is_none());
        assert!(MaxKm::parse(0.5).is_some());
    }

    #[test]
    fn ties_in_distance_are_ordered_by_country_then_code() {
        let us = CountryCode::US;
        let de = CountryCode::parse("DE").unwrap();
        let mut hits = [
            Nearby {
                country: us,
                rank: 10002,
                km: 1.0,
            },
            Nearby {
                country: us,
                rank: 10001,
                km: 1.0,
            },
            Nearby {
                country: de,
                rank: 99999,
                km: 1.0,
            },
            Nearby {
                country: de,
                rank: 0,
                km: 0.5,
            },
        ];
        hits.sort_by(nearest_first);
        let ranks: Vec<_> = hits.iter().map(|h| h.rank).collect();
        assert_eq!(ranks, [0, 99999, 10001, 10002]);
    }
}
