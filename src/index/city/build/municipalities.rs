//! The municipalities as the cities of JP, MX, TR, CO and PH (issues 34, 52; docs/city.md,
//! "Japan's municipalities", "Mexico's municipios and ciudades", "City search v5"): which
//! municipality a record belongs to, the municipalities as places with their names, and
//! their population.

use super::super::HashMap;
use super::{Builder, Kind, PlaceBuild};
use crate::db::postal::PlaceRow;
use crate::domain::city_match::{admin_core, whole_province_city};
use crate::domain::text::fold;

/// The kanji names of Japan's municipalities, by the unit of the admin columns that holds
/// their codes: admin name1, name2, name3 (empty for a unit of name2), names (comma-
/// separated). Written by `bench/city/jp_names.py` from Japan Post's list (docs/city.md,
/// "Japan's municipalities").
const JP_MUNICIPALITIES: &str = include_str!("jp_municipalities.tsv");

/// The municipality of the post that holds a JP record, as (admin name2, admin name3) of
/// its unit (name3 empty for a unit of name2): a designated city's ward (`Kyoto Shi`,
/// `Fushimi Ku`), a town of a district (`Yubari Gun`, `Kuriyama Cho`), else the unit of
/// name2 (a city, one of Tokyo's wards). A district alone is no municipality.
pub(super) fn jp_unit<'a>(a2: &'a str, a3: &'a str) -> Option<(&'a str, &'a str)> {
    if a2.ends_with(" Shi") {
        Some((a2, if a3.ends_with(" Ku") { a3 } else { "" }))
    } else if a2.ends_with(" Gun") {
        (!a3.is_empty()).then_some((a2, a3))
    } else {
        (!a2.is_empty()).then_some((a2, ""))
    }
}

/// The city `/api/lookup` names for a JP office code of the unit (admin name2, name3): a
/// district's town (`Nanae Cho`), else the city (a designated city, not its ward:
/// `Sapporo Shi`) or Tokyo's ward (`Chiyoda Ku`); the district when its town is unknown.
fn office_city(a2: &str, a3: &str) -> String {
    if a2.ends_with(" Gun") && !a3.is_empty() {
        a3.to_string()
    } else {
        a2.to_string()
    }
}

/// `Builder::jp_offices` from the table.
pub(super) fn jp_offices() -> HashMap<(String, String), Vec<(String, String)>> {
    let mut offices: HashMap<(String, String), Vec<(String, String)>> = HashMap::default();
    for line in JP_MUNICIPALITIES.lines() {
        if let [a1, a2, a3, written] = line.split('\t').collect::<Vec<_>>()[..]
            && !a3.is_empty()
        {
            let names = offices.entry((a1.to_string(), a2.to_string())).or_default();
            names.extend(written.split(',').map(|k| (k.to_string(), a3.to_string())));
        }
    }
    for names in offices.values_mut() {
        names.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
    }
    offices
}

impl Builder {
    /// The post's municipalities a record belongs to (`add_municipalities`), in the
    /// countries whose cities they are: MX's municipio (admin name2) and ciudad (admin
    /// name3, across municipios: `Ciudad de México`); CO's municipio; PH's city; TR's
    /// district and metropolitan province; JP's unit (`add_to_jp_municipalities`).
    pub(super) fn add_to_municipalities(&mut self, row: &PlaceRow<'_>, region: u32, code: u32) {
        let column = |c: Option<&str>| c.unwrap_or("").trim().to_string();
        let columns = || {
            (
                column(row.admin_name1),
                column(row.admin_name2),
                column(row.admin_name3),
            )
        };
        match self.country.as_str() {
            "MX" => {
                let (a1, a2, a3) = columns();
                for unit in [(a2, String::new()), (String::new(), a3)] {
                    self.add_to_municipality(&a1, unit, region, code);
                }
            }
            "CO" => {
                // The municipio (admin name2), as MX's: Colombia's city level (issue 52).
                let (a1, a2, _) = columns();
                self.add_to_municipality(&a1, (a2, String::new()), region, code);
            }
            "PH" => {
                // The city or municipality where the data names one (admin name3: Metro
                // Manila's `Quezon City`, `City of Makati`); admin name2 is a province or a
                // district of Metro Manila, no city (issue 52).
                let (a1, _, a3) = columns();
                self.add_to_municipality(&a1, (String::new(), a3), region, code);
            }
            "TR" => {
                // Every district (ilçe), and a metropolitan province whole (issue 52).
                let (a1, a2, _) = columns();
                let core = fold(&admin_core("TR", &a1));
                if whole_province_city("TR", &core) {
                    self.add_to_municipality(&a1, (String::new(), a1.clone()), region, code);
                }
                self.add_to_municipality(&a1, (a2, String::new()), region, code);
            }
            "JP" => {
                let (a1, a2, a3) = columns();
                self.add_to_jp_municipalities(row, a1, a2, a3, region, code);
            }
            _ => {}
        }
    }

    /// JP's unit of a record (`jp_unit`): an ordinary code without its ward or town waits
    /// for `place_jp_by_name`, an office code is placed by its name or waits for
    /// `place_jp_offices`.
    fn add_to_jp_municipalities(
        &mut self,
        row: &PlaceRow<'_>,
        a1: String,
        a2: String,
        mut a3: String,
        region: u32,
        code: u32,
    ) {
        let office = !row.place_name.is_ascii();
        if !office && (a2.ends_with(" Shi") || a2.ends_with(" Gun")) {
            let name = fold(row.place_name);
            if a3.is_empty() {
                self.jp_unnamed.push((a1, a2, name, region, code));
                return;
            }
            let units = self
                .jp_names
                .entry((a1.clone(), a2.clone(), name))
                .or_default();
            if !units.contains(&a3) {
                units.push(a3.clone());
            }
        }
        if !office && !a3.is_empty() {
            let point = (row.latitude, row.longitude);
            if let (Some(lat), Some(lon)) = point {
                self.jp_points
                    .entry((a1.clone(), a2.clone()))
                    .or_default()
                    .push((lat as f32, lon as f32, a3.clone()));
            }
        }
        if office && a3.is_empty() {
            let name: String = row
                .place_name
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            if let Some((_, ward)) = self
                .jp_offices
                .get(&(a1.clone(), a2.clone()))
                .and_then(|names| names.iter().find(|(k, _)| name.starts_with(k.as_str())))
            {
                a3 = ward.clone();
                self.office_cities.push((code, office_city(&a2, &a3)));
            } else {
                // Placed by its point once every record is read (`place_jp_offices`).
                let point = row.latitude.zip(row.longitude);
                let point = point.map(|(lat, lon)| (lat as f32, lon as f32));
                self.jp_unplaced.push((a1, a2, point, region, code));
                return;
            }
        }
        self.add_to_jp_unit(&a1, &a2, &a3, region, code);
    }

    /// A JP code to its unit (`jp_unit`) and, for a ward, to its designated city.
    fn add_to_jp_unit(&mut self, a1: &str, a2: &str, a3: &str, region: u32, code: u32) {
        if let Some((u2, u3)) = jp_unit(a2, a3) {
            // A ward's codes are its designated city's too.
            if !u3.is_empty() && u2.ends_with(" Shi") {
                self.add_to_municipality(a1, (u2.to_string(), String::new()), region, code);
            }
            self.add_to_municipality(a1, (u2.to_string(), u3.to_string()), region, code);
        }
    }

    fn add_to_municipality(&mut self, a1: &str, unit: (String, String), region: u32, code: u32) {
        if unit.0.is_empty() && unit.1.is_empty() {
            return;
        }
        self.municipalities
            .entry((a1.to_string(), unit.0, unit.1))
            .or_insert((region, Vec::new()))
            .1
            .push(code);
    }

    /// JP: an ordinary code the data leaves without its ward or town (admin name3 empty
    /// under a designated city or a district: `001-8521 Kita10-Jonishi`, `Sapporo Shi`)
    /// lies in the ward or town whose records carry its place name, when only one of its
    /// city or district does; else in its city only, as before. Against Japan Post's
    /// list, 3,899 of the 4,035 codes so placed were right (issue 52).
    pub(super) fn place_jp_by_name(&mut self) {
        for (a1, a2, name, region, code) in std::mem::take(&mut self.jp_unnamed) {
            let key = (a1, a2, name);
            let a3 = match self.jp_names.get(&key) {
                Some(units) if units.len() == 1 => units[0].clone(),
                _ => String::new(),
            };
            let (a1, a2, _) = key;
            self.add_to_jp_unit(&a1, &a2, &a3, region, code);
        }
        self.jp_names = HashMap::default();
    }

    /// JP: an office code that neither its admin columns nor its name place in a ward or
    /// town (`札幌市` codes without a ward, `Kameda Gun` codes without a town: 204 of
    /// Sapporo Chuo Ku's 285 codes) lies in the ward or town of the ordinary records
    /// nearest its point in the same city or district, when they all lie in one (GeoNames
    /// writes an office code at the point of its town's codes: 041-1392 at Higashionuma's,
    /// Nanae Cho). Against Japan Post's list, that ward or town was right for 1,307 of the
    /// 1,332 codes it placed; taking the most frequent where they disagree would place 225
    /// more, 139 of them right, so those stay in their city or district only (docs/city.md,
    /// "Japan's municipalities"). Its name for `/api/lookup` is that municipality's
    /// (`office_cities`).
    pub(super) fn place_jp_offices(&mut self) {
        for (a1, a2, point, region, code) in std::mem::take(&mut self.jp_unplaced) {
            let nearest = point.and_then(|(lat, lon)| {
                let points = self.jp_points.get(&(a1.clone(), a2.clone()))?;
                let far = |p: &(f32, f32, String)| (p.0 - lat).powi(2) + (p.1 - lon).powi(2);
                let least = points.iter().map(far).min_by(f32::total_cmp)?;
                let mut there = points.iter().filter(|p| far(p) == least).map(|p| &p.2);
                let first = there.next()?;
                there.all(|a3| a3 == first).then(|| first.clone())
            });
            let a3 = nearest.unwrap_or_default();
            self.add_to_jp_unit(&a1, &a2, &a3, region, code);
            self.office_cities.push((code, office_city(&a2, &a3)));
        }
    }

    /// JP, MX, TR, CO and PH: the municipalities are the cities (issues 34, 52;
    /// docs/city.md, "Japan's municipalities", "Mexico's municipios and ciudades", "City
    /// search v5": TR's districts and metropolitan provinces, CO's municipios, PH's
    /// cities). Each becomes a place of its own (`Kind::Municipality`) with every code its
    /// admin columns give it, and the code of a place named like it in its prefecture that
    /// carries no admin columns (the ward's own general code: `Fushimi Ku` 612-0000), when
    /// no other unit shares that name there. It answers to its romaji (`Fushimi Ku`,
    /// `Fushimi-ku`), its romaji without the suffix (`Fushimi`), and, in JP, its kanji
    /// (`京都市伏見区`, `伏見区`).
    pub(super) fn add_municipalities(&mut self) {
        if self.municipalities.is_empty() {
            return;
        }
        let mut kanji: HashMap<(&str, &str, &str), &str> = HashMap::default();
        let table = if self.country.as_str() == "JP" {
            JP_MUNICIPALITIES
        } else {
            ""
        };
        for line in table.lines() {
            if let [a1, a2, a3, names] = line.split('\t').collect::<Vec<_>>()[..] {
                kanji.insert((a1, a2, a3), names);
            }
        }
        let mut units: Vec<_> = std::mem::take(&mut self.municipalities)
            .into_iter()
            .collect();
        units.sort_unstable();
        let name_of = |(_, a2, a3): &(String, String, String)| {
            if a3.is_empty() {
                a2.clone()
            } else {
                a3.clone()
            }
        };
        let mut same_name: HashMap<(String, String), usize> = HashMap::default();
        for (key, _) in &units {
            *same_name
                .entry((fold(&name_of(key)), key.0.clone()))
                .or_default() += 1;
        }
        let mut general: HashMap<(String, String), Vec<u32>> = HashMap::default();
        for p in &self.places {
            if p.alias_of.is_none() && p.parents.iter().all(String::is_empty) {
                let region = self.regions[p.region as usize].name.trim().to_string();
                general
                    .entry((p.folded.clone(), region))
                    .or_default()
                    .extend(&p.codes);
            }
        }
        for (key, (region, mut codes)) in units {
            let name = name_of(&key);
            let folded = fold(&name);
            if same_name.get(&(folded.clone(), key.0.clone())) == Some(&1)
                && let Some(own) = general.get(&(folded.clone(), key.0.clone()))
            {
                codes.extend(own);
            }
            codes.sort_unstable();
            codes.dedup();
            let at = self.places.len();
            self.places.push(PlaceBuild {
                folded: folded.clone(),
                name: name.clone(),
                region,
                codes,
                parents: Default::default(),
                kind: Kind::Municipality,
                population: 0,
                alias_of: None,
            });
            let mut names = vec![fold(&admin_core(self.country.as_str(), &name))];
            if let Some(written) = kanji.get(&(key.0.as_str(), key.1.as_str(), key.2.as_str())) {
                names.extend(written.split(',').map(fold));
            }
            names.sort_unstable();
            names.dedup();
            for other in names {
                if !other.is_empty() && other != folded {
                    self.push_alias(other, at, Kind::Municipality);
                }
            }
        }
    }

    /// A municipality counts the people of the municipalities it holds, when the gazetteer
    /// joined those and not it: MX's municipio Matamoros (95 codes) holds the ciudad Heroica
    /// Matamoros, the gazetteer's city of 510,739 people, and so ranks before Coahuila's
    /// Matamoros (52,233) for `Matamoros` without a state.
    pub(super) fn inherit_population(&mut self) {
        let municipal: Vec<usize> = (0..self.places.len())
            .filter(|i| {
                let p = &self.places[*i];
                p.kind == Kind::Municipality && p.alias_of.is_none()
            })
            .collect();
        let mut holders: HashMap<u32, Vec<usize>> = HashMap::default();
        for i in &municipal {
            for c in &self.places[*i].codes {
                holders.entry(*c).or_default().push(*i);
            }
        }
        for j in &municipal {
            let inner = &self.places[*j];
            let Some(first) = inner.codes.first().filter(|_| inner.population > 0) else {
                continue;
            };
            let (population, codes) = (inner.population, inner.codes.clone());
            for i in holders.get(first).into_iter().flatten() {
                let outer = &self.places[*i];
                // One prefecture may be two regions of the data (with and without its code).
                let region = |p: &PlaceBuild| self.regions[p.region as usize].name.as_ref();
                if outer.codes.len() > codes.len()
                    && region(outer) == region(&self.places[*j])
                    && codes.iter().all(|c| outer.codes.binary_search(c).is_ok())
                {
                    self.places[*i].population = outer.population.max(population);
                }
            }
        }
    }
}
