//! Cities written as numbered districts (`Paris 01` .. `Paris 20`; docs/city.md,
//! "Districts").

use std::collections::{HashMap, HashSet};

use super::{Builder, Kind, MIN_DISTRICTS, PlaceBuild};

impl Builder {
    /// Districts: places named `<city> <n>` (n of one or two digits) with at least
    /// [`MIN_DISTRICTS`] numbers in one region, where `<city>` is a place of that region or
    /// the districts' admin name2/3, add their codes to `<city>` (made when missing).
    pub(super) fn merge_districts(&mut self) {
        let mut groups: HashMap<(String, u32), Vec<usize>> = HashMap::new();
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
