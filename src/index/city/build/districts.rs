//! Cities written as numbered districts (`Paris 01` .. `Paris 20`; docs/city.md,
//! "Districts").

use super::super::{HashMap, HashSet, TOWN_POPULATION};
use super::{Builder, GazetteerCity, JOIN_NEAR_KM, Kind, MIN_DISTRICTS, PlaceBuild};
use crate::domain::city_match::admin_core;
use crate::domain::geo::haversine_km;
use crate::domain::text::fold;

impl Builder {
    /// Districts: places named `<city> <n>` (n of one or two digits) with at least
    /// [`MIN_DISTRICTS`] numbers in one region, where `<city>` is a place of that region or
    /// the districts' admin name2/3, add their codes to `<city>` (made when missing).
    pub(super) fn merge_districts(&mut self) {
        let mut groups: HashMap<(String, u32), Vec<usize>> = HashMap::default();
        for (i, p) in self.places.iter().enumerate() {
            if let Some((base, number)) = p.folded.rsplit_once(' ')
                && !base.is_empty()
                && (1..=2).contains(&number.len())
                && number.bytes().all(|b| b.is_ascii_digit())
            {
                groups
                    .entry((base.to_string(), p.region))
                    .or_default()
                    .push(i);
            }
        }
        let existing: HashMap<(&str, u32), usize> = self
            .places
            .iter()
            .enumerate()
            .map(|(i, p)| ((p.folded.as_str(), p.region), i))
            .collect();
        let mut merges: Vec<(String, u32, Option<usize>, Vec<usize>)> = Vec::new();
        for ((base, region), members) in groups {
            let numbers: HashSet<&str> = members
                .iter()
                .filter_map(|i| self.places[*i].folded.rsplit_once(' ').map(|(_, n)| n))
                .map(|n| n.trim_start_matches('0'))
                .collect();
            if numbers.len() < MIN_DISTRICTS {
                continue;
            }
            let city = existing.get(&(base.as_str(), region)).copied();
            let named_by_admin = members
                .iter()
                .any(|i| self.places[*i].parents.contains(&base));
            if city.is_some() || named_by_admin {
                merges.push((base, region, city, members));
            }
        }
        for (base, region, city, members) in merges {
            let codes: Vec<u32> = members
                .iter()
                .flat_map(|i| self.places[*i].codes.iter().copied())
                .collect();
            let at = match city {
                Some(at) => at,
                None => {
                    let first = &self.places[members[0]];
                    let name = first
                        .name
                        .trim_end_matches(|c: char| c.is_ascii_digit())
                        .trim_end_matches([' ', ','])
                        .to_string();
                    self.places.push(PlaceBuild {
                        folded: base.clone(),
                        name,
                        region,
                        codes: Vec::new(),
                        parents: Default::default(),
                        kind: Kind::Place,
                        population: 0,
                        alias_of: None,
                    });
                    self.places.len() - 1
                }
            };
            self.places[at].codes.extend(codes);
        }
    }
}

impl Builder {
    /// Per admin unit: a district named after its chief town, which holds other towns
    /// (`Politischer Bezirk Mödling` holds Perchtoldsdorf, BE's arrondissement `Leuven`
    /// Tienen and Aarschot, DE's `Gießen` (the Landkreis) Linden, `Biel/Bienne District`
    /// Nidau): a place of its codes, named otherwise than the unit, that the gazetteer
    /// counts as a town of at least [`TOWN_POPULATION`] people within [`JOIN_NEAR_KM`] of
    /// that place's point. Where admin units are cities only as a fallback, such a unit is
    /// never a city: its town is (issue 34, "a city is never answered with the larger unit
    /// that shares its name"), unless that town is a city of a million people (`join`:
    /// `Brisbane`'s unit holds its suburbs). `Toronto` (admin name2, 41 FSAs) holds no
    /// other town.
    pub(super) fn holding_other_towns(&self, cities: &[GazetteerCity]) -> Vec<bool> {
        let mut held = vec![false; self.admins.len()];
        if !self.admins_as_fallback {
            return held;
        }
        let mut towns: HashMap<&str, Vec<&GazetteerCity>> = HashMap::default();
        for city in cities.iter().filter(|c| c.population >= TOWN_POPULATION) {
            towns.entry(city.names[0].as_str()).or_default().push(city);
        }
        // Each code's places that the gazetteer knows as towns (near their points), each
        // place decided once.
        let is_town = |p: &PlaceBuild| {
            towns.get(p.folded.as_str()).is_some_and(|near| {
                near.iter().any(|t| {
                    p.codes
                        .iter()
                        .filter_map(|c| self.point(*c))
                        .any(|(lat, lon)| {
                            haversine_km(lat, lon, t.latitude, t.longitude) <= JOIN_NEAR_KM
                        })
                })
            })
        };
        let mut town_places: HashMap<u32, Vec<usize>> = HashMap::default();
        for (i, p) in self.places.iter().enumerate() {
            if p.alias_of.is_none() && is_town(p) {
                for code in &p.codes {
                    town_places.entry(*code).or_default().push(i);
                }
            }
        }
        for (a, unit) in self.admins.iter().enumerate() {
            let core = fold(&admin_core(self.country.as_str(), &unit.name));
            held[a] = unit
                .codes
                .iter()
                .filter_map(|c| town_places.get(c))
                .flatten()
                .any(|i| self.places[*i].folded != core);
        }
        held
    }
}
