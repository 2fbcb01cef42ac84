//! How well a unit of the postal data covers a gazetteer city (`Builder::join`): the
//! points of its codes against the city's, and the codes around a city no unit holds.

use super::super::HashMap;
use super::{
    AREA_MIN_KM, AREA_MIN_POPULATION, AREA_PEOPLE_PER_KM2, Builder, GazetteerCity, JOIN_FAR_KM,
    JOIN_NEAR_KM, JOIN_REACH_KM,
};
use crate::domain::geo::haversine_km;

impl Builder {
    /// How well `codes` cover a gazetteer place: `None` when their median point is farther
    /// than [`JOIN_REACH_KM`] or fewer than half of them lie that close; else the codes
    /// within [`JOIN_NEAR_KM`] less those beyond [`JOIN_FAR_KM`] (higher is better); where
    /// none lies that near (IN's centroids), the codes within reach less twice those beyond.
    pub(super) fn cover(&self, codes: &[u32], city: &GazetteerCity) -> Option<(bool, i64)> {
        let mut lats = Vec::with_capacity(codes.len());
        let mut lons = Vec::with_capacity(codes.len());
        let (mut near, mut far, mut within, mut beyond) = (0i64, 0i64, 0i64, 0i64);
        for code in codes {
            let Some((lat, lon)) = self.point(*code) else {
                continue;
            };
            lats.push(lat);
            lons.push(lon);
            let km = haversine_km(lat, lon, city.latitude, city.longitude);
            near += i64::from(km <= JOIN_NEAR_KM);
            far += i64::from(km > JOIN_FAR_KM);
            if km <= JOIN_REACH_KM {
                within += 1;
            } else {
                beyond += 1;
            }
        }
        if within <= beyond {
            return None;
        }
        let median = |v: &mut Vec<f64>| {
            let mid = v.len() / 2;
            *v.select_nth_unstable_by(mid, f64::total_cmp).1
        };
        let (lat, lon) = (median(&mut lats), median(&mut lons));
        let score = if near > 0 {
            (true, near - far)
        } else {
            (false, within - 2 * beyond)
        };
        (haversine_km(lat, lon, city.latitude, city.longitude) <= JOIN_REACH_KM).then_some(score)
    }

    pub(super) fn point(&self, code: u32) -> Option<(f64, f64)> {
        let (lat, lon) = self.points.get(code as usize).copied().flatten()?;
        Some((f64::from(lat), f64::from(lon)))
    }

    /// The codes of `codes` within [`JOIN_FAR_KM`] of `city`: the city's part of a
    /// province named like it (`Ankara`, `Buenos Aires`).
    pub(super) fn clip(&self, codes: &[u32], city: &GazetteerCity) -> Vec<u32> {
        codes
            .iter()
            .copied()
            .filter(|c| {
                self.point(*c).is_some_and(|(lat, lon)| {
                    haversine_km(lat, lon, city.latitude, city.longitude) <= JOIN_FAR_KM
                })
            })
            .collect()
    }

    /// The codes around a gazetteer city that joins no unit (`AREA_MIN_POPULATION`), and
    /// the region most of them lie in; `None` when it is smaller or no code lies that near.
    pub(super) fn area(
        &self,
        city: &GazetteerCity,
        code_regions: &[u32],
    ) -> Option<(Vec<u32>, u32)> {
        if city.population < AREA_MIN_POPULATION {
            return None;
        }
        let radius = (city.population as f64 / (std::f64::consts::PI * AREA_PEOPLE_PER_KM2))
            .sqrt()
            .clamp(AREA_MIN_KM, JOIN_FAR_KM);
        // A box around the disc first: one degree of latitude is 111 km.
        let dlat = radius / 111.0;
        let dlon = radius / (111.0 * city.latitude.to_radians().cos().max(0.01));
        let codes: Vec<u32> = (0..self.points.len() as u32)
            .filter(|c| {
                self.point(*c).is_some_and(|(lat, lon)| {
                    (lat - city.latitude).abs() <= dlat
                        && (lon - city.longitude).abs() <= dlon
                        && haversine_km(lat, lon, city.latitude, city.longitude) <= radius
                })
            })
            .collect();
        let mut counts: HashMap<u32, usize> = HashMap::default();
        for c in &codes {
            *counts.entry(code_regions[*c as usize]).or_default() += 1;
        }
        let region = counts
            .into_iter()
            .max_by_key(|(region, n)| (*n, std::cmp::Reverse(*region)))?
            .0;
        Some((codes, region))
    }
}
