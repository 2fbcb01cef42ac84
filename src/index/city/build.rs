//! Building one country's places: the place names of the postal data, its districts,
//! the cities its admin columns name, and the gazetteer's cities joined to them with their
//! population and alternate names (docs/city.md).

use std::hash::BuildHasher;
use std::sync::Arc;

use regex::Regex;

mod cover;
mod districts;
mod gazetteer;
mod municipalities;

use super::codes::{CODE_EDGE_WORDS, CodeShape, MAX_CODE_WORDS, code_text};
use super::{CountryCities, HashMap, HashSet, Kind, Place, Region, Span, encode};
use crate::db::postal::PlaceRow;
use crate::domain::CountryCode;
use crate::domain::city_match::{
    ABBREVIATIONS, DOMINANT, Language, admin_core, city_levels, numbered, skeleton, trigrams,
};
use crate::domain::geo::haversine_km;
use crate::domain::postal_code::canonical;
use crate::domain::regions;
use crate::domain::text::fold;
pub(super) use gazetteer::GazetteerCity;

/// Fewest distinct district numbers that make `<name> <n>` places a city's districts.
const MIN_DISTRICTS: usize = 3;
/// A gazetteer place joins a unit of the postal data whose codes' median point lies this
/// close to it, and which has more codes this close to it than farther away (IN writes a
/// district's codes at its centroid: Bengaluru's 28 km from the city's point)...
const JOIN_REACH_KM: f64 = 35.0;
/// ... preferring the unit with the most codes within `JOIN_NEAR_KM` less those beyond
/// `JOIN_FAR_KM` (a city before the prefecture named like it: Kyoto Shi, not Kyoto Fu).
const JOIN_NEAR_KM: f64 = 10.0;
const JOIN_FAR_KM: f64 = 25.0;
/// The shortest city name that may begin the names of a city's post offices
/// (`Karachi Gpo`, `Karachi Nazimabad`).
const MIN_PREFIX_CHARS: usize = 4;
/// A city of this many people is what the admin unit of its name holds, suburbs and all,
/// even when the gazetteer lists those as towns of their own (`join`; a district named
/// after a smaller town is not that town).
const METROPOLIS: u64 = 1_000_000;
/// The shortest other name of a city that a typo may be taken for (`typo_alias`).
const TYPO_ALIAS_CHARS: usize = 5;
/// A gazetteer city that joins no unit of the postal data (the data writes its villages or
/// neighbourhoods, never its name: ID's `Jakarta`, `Surabaya`, `Bekasi`; HU's `Buda` inside
/// `Budapest`; DO's `Santo Domingo Este`) answers with the codes around its point, when it
/// counts at least this many people (GeoNames' own threshold of a city, cities15000) ...
const AREA_MIN_POPULATION: u64 = 15_000;
/// ... within the radius of a disc holding its population at this density (an urban
/// area's order of magnitude: Jakarta 8.5 M people, 23 km; Surabaya 3 M, 14 km; a town of
/// 20,000, 1.1 km), kept between `AREA_MIN_KM` and `JOIN_FAR_KM`.
const AREA_PEOPLE_PER_KM2: f64 = 5_000.0;
const AREA_MIN_KM: f64 = 2.0;

/// A place while the country loads.
struct PlaceBuild {
    folded: String,
    name: String,
    region: u32,
    codes: Vec<u32>,
    /// Folded admin name2 / name3 of the first record: a district's city (`Paris 01` lies
    /// in admin name2 `Paris`).
    parents: [String; 2],
    kind: Kind,
    population: u64,
    /// An alias answers with the codes of this place (an index in `places`).
    alias_of: Option<usize>,
}

/// An admin unit that may name a city: one (core name, region, level).
struct AdminUnit {
    name: String,
    region: u32,
    codes: Vec<u32>,
}

pub(super) struct Builder {
    country: CountryCode,
    /// The country's name in the dataset (`Paris, France`), and all its names, folded,
    /// longest first (`Roma, Italia`).
    country_name: String,
    country_names: Vec<String>,
    /// What the country's postal codes look like (countryInfo's regex): a code the data
    /// lacks is still taken out of a query (`00-950 Warszawa`, `London SW1A 1AA`).
    code_regex: Option<Arc<Regex>>,
    /// The admin levels whose units may be joined to a gazetteer city: the country's city
    /// levels, or all three where it has none (`admins_as_fallback`).
    levels: &'static [u8],
    /// The country has no city levels: an admin unit is joined to a gazetteer city only
    /// when no place of the city's names covers it (`Tallinn`, whose codes carry district
    /// names; `Colombo`; `Quito`, admin name2 `Cantón Quito`), never above a place
    /// (`Los Angeles` stays the place, not the county's codes near it).
    admins_as_fallback: bool,
    regions: Vec<Region>,
    region_ids: HashMap<(String, String), u32>,
    places: Vec<PlaceBuild>,
    /// (folded, region) -> index in `places`, for the current folded name only (rows of
    /// one name arrive together).
    current: HashMap<u32, usize>,
    current_name: String,
    code_ids: HashMap<String, u32>,
    /// Each code's point (its first record with coordinates), by code id.
    points: Vec<Option<(f32, f32)>>,
    admins: Vec<AdminUnit>,
    admin_ids: HashMap<(String, u32, u8), usize>,
    long_words: HashSet<&'static str>,
    letters: HashSet<char>,
    /// JP: the post's municipalities, (admin name1, name2, name3) -> the region of their
    /// first record and their codes (`jp_unit`).
    municipalities: HashMap<(String, String, String), (u32, Vec<u32>)>,
    /// JP: (admin name1, name2) -> the kanji names of its wards or towns and their admin
    /// name3, longest first: an office code the data leaves without name3 is its ward's or
    /// town's when its name begins with one (`札幌市白石区役所`, `七飯町役場`).
    jp_offices: HashMap<(String, String), Vec<(String, String)>>,
    /// JP: (admin name1, name2) -> the point and admin name3 of its ordinary records
    /// (`place_jp_offices`).
    jp_points: HashMap<(String, String), Vec<JpPoint>>,
    /// JP: office codes placed in no ward or town yet: admin name1, name2, point, region,
    /// code.
    jp_unplaced: Vec<JpOffice>,
    /// JP: each office code's municipality, as `/api/lookup` names it (by code id).
    office_cities: Vec<(u32, String)>,
    /// JP: (admin name1, name2, folded place name) -> the admin name3 (ward or town) of the
    /// ordinary records of a city or district so named (`place_jp_by_name`).
    jp_names: HashMap<(String, String, String), Vec<String>>,
    /// JP: ordinary codes of a city or district without their ward or town, placed by
    /// their name once every record is read: admin name1, name2, folded place name,
    /// region, code.
    jp_unnamed: Vec<(String, String, String, u32, u32)>,
}

/// Where an ordinary JP record lies, and its admin name3 (its ward or town).
type JpPoint = (f32, f32, String);

/// A JP office code waiting for its ward or town: admin name1, name2, point, region, code.
type JpOffice = (String, String, Option<(f32, f32)>, u32, u32);

impl Builder {
    pub fn new(
        country: CountryCode,
        country_name: &str,
        code_regex: Option<Arc<Regex>>,
    ) -> Builder {
        Builder {
            country,
            country_name: country_name.to_string(),
            country_names: country_names(country, country_name),
            code_regex,
            levels: match city_levels(country.as_str()) {
                [] => &[1, 2, 3],
                levels => levels,
            },
            admins_as_fallback: city_levels(country.as_str()).is_empty(),
            regions: Vec::new(),
            region_ids: HashMap::default(),
            places: Vec::new(),
            current: HashMap::default(),
            current_name: String::new(),
            code_ids: HashMap::default(),
            points: Vec::new(),
            admins: Vec::new(),
            admin_ids: HashMap::default(),
            long_words: HashSet::default(),
            letters: HashSet::default(),
            municipalities: HashMap::default(),
            jp_offices: if country.as_str() == "JP" {
                municipalities::jp_offices()
            } else {
                HashMap::default()
            },
            jp_points: HashMap::default(),
            jp_unplaced: Vec::new(),
            office_cities: Vec::new(),
            jp_names: HashMap::default(),
            jp_unnamed: Vec::new(),
        }
    }

    pub fn add(&mut self, row: &PlaceRow<'_>) {
        let key = (
            row.admin_name1.unwrap_or("").to_string(),
            row.admin_code1.unwrap_or("").to_string(),
        );
        let region = match self.region_ids.get(&key) {
            Some(id) => *id,
            None => {
                let id = self.regions.len() as u32;
                self.regions.push(Region {
                    key: regions::data_name(self.country.as_str(), &fold(&key.0)).into(),
                    name_folded: fold(&key.0).into(),
                    code_folded: fold(&key.1).into(),
                    name: key.0.clone().into(),
                    code: key.1.clone().into(),
                });
                self.region_ids.insert(key, id);
                id
            }
        };
        let code = canonical(self.country, row.postal_code);
        let next = self.code_ids.len() as u32;
        let code = *self.code_ids.entry(code).or_insert(next);
        if code as usize == self.points.len() {
            self.points.push(None);
        }
        if self.points[code as usize].is_none()
            && let (Some(lat), Some(lon)) = (row.latitude, row.longitude)
        {
            self.points[code as usize] = Some((lat as f32, lon as f32));
        }
        let folded = row.place_folded;
        if folded != self.current_name {
            self.current.clear();
            self.current_name = folded.to_string();
            for word in folded.split(' ') {
                if let Some((long, _)) = ABBREVIATIONS.iter().find(|(long, _)| *long == word) {
                    self.long_words.insert(*long);
                }
            }
            for c in row.place_name.chars().filter(|c| !c.is_ascii()) {
                self.letters.insert(c);
            }
        }
        let places = &mut self.places;
        let at = *self.current.entry(region).or_insert_with(|| {
            places.push(PlaceBuild {
                folded: folded.to_string(),
                name: row.place_name.to_string(),
                region,
                codes: Vec::new(),
                parents: [
                    fold(row.admin_name2.unwrap_or("")),
                    fold(row.admin_name3.unwrap_or("")),
                ],
                kind: Kind::Place,
                population: 0,
                alias_of: None,
            });
            places.len() - 1
        });
        self.places[at].codes.push(code);
        self.add_to_municipalities(row, region, code);
        let names = [row.admin_name1, row.admin_name2, row.admin_name3];
        for level in self.levels {
            let Some(name) = names[*level as usize - 1].filter(|n| !n.trim().is_empty()) else {
                continue;
            };
            let core = fold(&admin_core(self.country.as_str(), name));
            if core.is_empty() {
                continue;
            }
            let next = self.admins.len();
            let at = *self.admin_ids.entry((core, region, *level)).or_insert(next);
            if at == next {
                self.admins.push(AdminUnit {
                    name: name.trim().to_string(),
                    region,
                    codes: Vec::new(),
                });
            }
            self.admins[at].codes.push(code);
        }
    }

    /// Joins each gazetteer city to the unit of the postal data that is that city, when
    /// there is one: a place, an admin unit of a city level, or the places whose names
    /// begin with the city's (its post offices), named like the city and covering it best
    /// (`cover`). The unit takes the city's population and its names (aliases).
    fn join(&mut self, cities: &[GazetteerCity]) {
        let mut by_name: HashMap<String, Vec<Unit>> = HashMap::default();
        for (i, p) in self.places.iter().enumerate() {
            if p.alias_of.is_some() {
                continue;
            }
            for key in keys(&p.folded, &p.name) {
                by_name.entry(key).or_default().push(Unit::Place(i));
            }
            // A municipality is joined by its name without the suffix too (`Kyoto`).
            if p.kind == Kind::Municipality {
                let core = numbered(&fold(&admin_core(self.country.as_str(), &p.name)));
                if core != p.folded {
                    by_name.entry(core).or_default().push(Unit::Place(i));
                }
            }
        }
        for (i, a) in self.admins.iter().enumerate() {
            let core = admin_core(self.country.as_str(), &a.name);
            for key in keys(&fold(&core), &core) {
                by_name.entry(key).or_default().push(Unit::Admin(i));
            }
        }
        // Distinct codes of the largest place of each name: in a country whose admin units
        // are cities only as a fallback, a unit named like a place stands in for it only
        // with `DOMINANT` times its codes (`Toronto`: admin name2 Toronto's 41 FSAs, not
        // the one place named Toronto; `München`, `Hagen` stay their places, not the
        // `Kreisfreie Stadt`), and never when it holds other towns (`holding_other_towns`:
        // `Leuven` is the town, not its arrondissement).
        let distinct = |codes: &[u32]| codes.iter().collect::<HashSet<_>>().len();
        let mut place_codes: HashMap<&str, usize> = HashMap::default();
        for p in &self.places {
            let n = place_codes.entry(p.folded.as_str()).or_default();
            *n = (*n).max(distinct(&p.codes));
        }
        let towns = self.holding_other_towns(cities);
        // (unit named like a place, and with too few codes; a district of other towns)
        let (shadowed, districts): (Vec<bool>, Vec<bool>) = self
            .admins
            .iter()
            .zip(towns)
            .map(|(a, towns)| {
                let core = fold(&admin_core(self.country.as_str(), &a.name));
                let place = place_codes
                    .get(core.as_str())
                    .filter(|_| self.admins_as_fallback);
                (
                    place.is_some_and(|n| distinct(&a.codes) < DOMINANT as usize * n),
                    place.is_some() && towns,
                )
            })
            .unzip();
        drop(place_codes);
        let mut sorted: Vec<usize> = (0..self.places.len())
            .filter(|i| self.places[*i].alias_of.is_none())
            .collect();
        sorted.sort_unstable_by(|a, b| self.places[*a].folded.cmp(&self.places[*b].folded));
        // What the names in `sorted` begin with, up to a space (`karachi` of `karachi
        // gpo`), hashed: most of a city's names begin none, and skip the search for its
        // post offices below (that search was 5% of a server's start; perf, issue 53).
        let hasher = foldhash::fast::RandomState::default();
        let heads: HashSet<u64> = sorted
            .iter()
            .flat_map(|i| {
                let folded = &self.places[*i].folded;
                folded
                    .match_indices(' ')
                    .map(|(at, _)| hasher.hash_one(&folded[..at]))
            })
            .collect();
        // Each code's region: that of its first place.
        let mut code_regions = vec![u32::MAX; self.points.len()];
        for p in &self.places {
            for c in &p.codes {
                if code_regions[*c as usize] == u32::MAX {
                    code_regions[*c as usize] = p.region;
                }
            }
        }

        // Each unit's entry, once made (admin units and post-office groups get one).
        let mut entries: HashMap<Unit, usize> = HashMap::default();
        let mut new_places: Vec<PlaceBuild> = Vec::new();
        let mut aliases: HashMap<(String, usize), bool> = HashMap::default();
        for (c, city) in cities.iter().enumerate() {
            let mut candidates: Vec<Unit> = city
                .names
                .iter()
                .filter_map(|n| by_name.get(&numbered(n)))
                .flatten()
                .copied()
                .collect();
            candidates.sort_unstable();
            candidates.dedup();
            let mut best: Option<((bool, i64), Unit, Vec<u32>)> = None;
            // The municipality of the post that covers the city best: the city is it, not a
            // prefecture or its part near the city, nor a district, of the city's name
            // (`Yamagata`: Yamagata Shi, not Yamagata Ken's 704 codes around it).
            let mut municipality: Option<((bool, i64), Unit, Vec<u32>)> = None;
            // Where admin units are cities only as a fallback, one beats the best place
            // only when it covers `DOMINANT` times as much near the city (`Toronto`: 41
            // FSAs of admin name2 Toronto, not the one place named Toronto; `Hagen` and
            // `München` stay their places, not the `Kreisfreie Stadt`).
            let beats =
                |score: (bool, i64), best: &Option<((bool, i64), Unit, Vec<u32>)>| match best {
                    None => true,
                    Some((b, Unit::Place(_), _)) if self.admins_as_fallback => {
                        score.0 >= b.0 && score.1 >= DOMINANT as i64 * b.1.max(1)
                    }
                    Some((b, ..)) => score > *b,
                };
            for unit in candidates {
                let (codes, clipped) = match unit {
                    Unit::Place(i) => (&self.places[i].codes, None),
                    Unit::Admin(i) if shadowed[i] => continue,
                    // A district named after a town of fewer than a million people is not
                    // that town (`Leuven`); a larger city's unit holds its suburbs, which
                    // the gazetteer lists as towns (`Brisbane`, `Lima`, `Bruxelles (19
                    // communes)`).
                    Unit::Admin(i) if districts[i] && city.population < METROPOLIS => continue,
                    Unit::Admin(i) => {
                        let codes = &self.admins[i].codes;
                        (codes, Some(Unit::Clipped(i)))
                    }
                    Unit::Group(..) | Unit::Clipped(_) | Unit::Area(..) => continue,
                };
                match self.cover(codes, city) {
                    Some(score) => {
                        if let Unit::Place(i) = unit
                            && self.places[i].kind == Kind::Municipality
                            && municipality.as_ref().is_none_or(|b| score > b.0)
                        {
                            municipality = Some((score, unit, Vec::new()));
                        }
                        let better = match unit {
                            Unit::Place(_) => best.as_ref().is_none_or(|b| score > b.0),
                            _ => beats(score, &best),
                        };
                        if better {
                            best = Some((score, unit, Vec::new()));
                        }
                    }
                    None => {
                        // An admin unit too large for the city: its part near the city.
                        let Some(clipped) = clipped else { continue };
                        let part = self.clip(codes, city);
                        if part.len() >= 2
                            && let Some(score) = self.cover(&part, city)
                            && beats(score, &best)
                        {
                            best = Some((score, clipped, part));
                        }
                    }
                }
            }
            // The city's post offices or districts: places named `<city> ...` near it.
            for (n, name) in city.names.iter().enumerate() {
                if name.len() < MIN_PREFIX_CHARS || !heads.contains(&hasher.hash_one(name.as_str()))
                {
                    continue;
                }
                let prefix = format!("{name} ");
                let folded = |i: &usize| self.places[*i].folded.as_str();
                let lo = sorted.partition_point(|i| folded(i) < prefix.as_str());
                let members: Vec<usize> = sorted[lo..]
                    .iter()
                    .take_while(|i| folded(i).starts_with(&prefix))
                    .copied()
                    .filter(|i| {
                        self.places[*i].codes.iter().all(|c| {
                            self.point(*c).is_some_and(|(lat, lon)| {
                                haversine_km(lat, lon, city.latitude, city.longitude) <= JOIN_FAR_KM
                            })
                        })
                    })
                    .collect();
                // Two are streets as often as a city (SG's `Temasek Avenue` and `Temasek
                // Boulevard` would answer `Singapore`, whose alternate name is Temasek).
                if members.len() < MIN_DISTRICTS {
                    continue;
                }
                let mut codes: Vec<u32> = members
                    .iter()
                    .flat_map(|i| self.places[*i].codes.iter().copied())
                    .collect();
                codes.sort_unstable();
                codes.dedup();
                if let Some(score) = self.cover(&codes, city)
                    && best.as_ref().is_none_or(|b| score > b.0)
                {
                    best = Some((score, Unit::Group(members[0], n), codes));
                }
            }
            let best = municipality.or(best).or_else(|| {
                let (codes, region) = self.area(city, &code_regions)?;
                Some(((false, 0), Unit::Area(c, region), codes))
            });
            let Some((_, unit, part_codes)) = best else {
                continue;
            };
            let entry = match unit {
                Unit::Place(i) => i,
                _ => *entries.entry(unit).or_insert_with(|| {
                    let (name, folded, region, codes) = match unit {
                        Unit::Admin(i) | Unit::Clipped(i) => {
                            let a = &self.admins[i];
                            let core = admin_core(self.country.as_str(), &a.name);
                            let codes = match unit {
                                Unit::Admin(_) => a.codes.clone(),
                                _ => part_codes,
                            };
                            (a.name.clone(), fold(&core), a.region, codes)
                        }
                        Unit::Group(first, n) => {
                            let p = &self.places[first];
                            let name = if n == 0 {
                                city.name.clone()
                            } else {
                                title(&city.names[n])
                            };
                            (name, city.names[n].clone(), p.region, part_codes)
                        }
                        Unit::Area(_, region) => {
                            (city.name.clone(), city.names[0].clone(), region, part_codes)
                        }
                        Unit::Place(_) => unreachable!(),
                    };
                    new_places.push(PlaceBuild {
                        folded,
                        name,
                        region,
                        codes,
                        parents: Default::default(),
                        kind: Kind::Admin,
                        population: 0,
                        alias_of: None,
                    });
                    self.places.len() + new_places.len() - 1
                }),
            };
            let place = match entry.checked_sub(self.places.len()) {
                Some(n) => &mut new_places[n],
                None => &mut self.places[entry],
            };
            place.population = place.population.max(city.population);
            for (name, latin) in city.names.iter().zip(&city.latin) {
                if *name != place.folded {
                    *aliases.entry((name.clone(), entry)).or_default() |= latin;
                }
            }
        }
        self.places.extend(new_places);
        let mut aliases: Vec<((String, usize), bool)> = aliases.into_iter().collect();
        aliases.sort_unstable();
        for ((folded, of), latin) in aliases {
            let kind = if latin { Kind::Alias } else { Kind::Foreign };
            self.push_alias(folded, of, kind);
        }
    }

    /// Both halves of a bilingual name (`Elx/Elche`, `Biel/Bienne`) find the place.
    fn split_bilingual(&mut self) {
        for i in 0..self.places.len() {
            let p = &self.places[i];
            if p.alias_of.is_some() || !p.name.contains('/') {
                continue;
            }
            let halves: Vec<String> = p
                .name
                .split('/')
                .map(fold)
                .filter(|h| h.len() >= 2 && *h != p.folded)
                .collect();
            for half in halves {
                self.push_alias(half, i, Kind::Alias);
            }
        }
    }

    fn push_alias(&mut self, folded: String, of: usize, kind: Kind) {
        let target = &self.places[of];
        self.places.push(PlaceBuild {
            folded,
            name: target.name.clone(),
            region: target.region,
            codes: Vec::new(),
            parents: Default::default(),
            kind,
            population: target.population,
            alias_of: Some(of),
        });
    }

    pub fn finish(mut self, cities: &[GazetteerCity]) -> CountryCities {
        self.merge_districts();
        self.place_jp_by_name();
        self.place_jp_offices();
        self.add_municipalities();
        self.join(cities);
        self.inherit_population();
        self.split_bilingual();
        // An alias carries the population its place ended with.
        for i in 0..self.places.len() {
            if let Some(of) = self.places[i].alias_of {
                self.places[i].population = self.places[of].population;
            }
        }
        let language = Language::from_data(
            |w| self.long_words.contains(w),
            |c| self.letters.contains(&c),
        );
        // Codes ascending: renumber so that ids sort as the codes do.
        let mut codes: Vec<(String, u32)> = self.code_ids.into_iter().collect();
        codes.sort();
        let mut renumber = vec![0u32; codes.len()];
        let mut codes_text = String::new();
        let mut code_starts = Vec::with_capacity(codes.len());
        for (new, (code, old)) in codes.into_iter().enumerate() {
            renumber[old as usize] = new as u32;
            code_starts.push(codes_text.len() as u32);
            codes_text.push_str(&code);
        }
        let mut code_points = vec![(f32::NAN, f32::NAN); renumber.len()];
        for (old, point) in self.points.iter().enumerate() {
            if let Some(point) = point {
                code_points[renumber[old] as usize] = *point;
            }
        }
        let mut office_cities: Vec<(u32, Box<str>)> = std::mem::take(&mut self.office_cities)
            .into_iter()
            .map(|(code, city)| (renumber[code as usize], city.into()))
            .collect();
        office_cities.sort_unstable();
        office_cities.dedup_by_key(|(code, _)| *code);
        let mut order: Vec<usize> = (0..self.places.len()).collect();
        order.sort_by(|a, b| {
            let (a, b) = (&self.places[*a], &self.places[*b]);
            a.folded
                .cmp(&b.folded)
                .then(a.region.cmp(&b.region))
                .then(a.kind.cmp(&b.kind))
        });
        // Codes of every place that is not an alias, by its index before sorting.
        let mut spans = vec![Span::default(); self.places.len()];
        let mut place_codes = Vec::new();
        for i in &order {
            let p = &self.places[*i];
            if p.alias_of.is_some() {
                continue;
            }
            let mut ids: Vec<u32> = p.codes.iter().map(|c| renumber[*c as usize]).collect();
            ids.sort_unstable();
            ids.dedup();
            spans[*i] = Span {
                start: place_codes.len() as u32,
                len: ids.len() as u32,
            };
            place_codes.extend(ids);
        }
        let mut text = String::new();
        let push = |text: &mut String, s: &str| {
            let span = Span {
                start: text.len() as u32,
                len: s.len() as u32,
            };
            text.push_str(s);
            span
        };
        let mut places = Vec::with_capacity(self.places.len());
        let mut last_folded: Option<(&str, Span, Span)> = None;
        let mut names: HashMap<&str, Span> = HashMap::default();
        for i in &order {
            let p = &self.places[*i];
            let (folded, norm) = match &last_folded {
                Some((f, folded, norm)) if *f == p.folded => (*folded, *norm),
                _ => {
                    let folded = push(&mut text, &p.folded);
                    let norm_text = language.norm(&p.folded);
                    let norm = if norm_text == p.folded {
                        folded
                    } else {
                        push(&mut text, &norm_text)
                    };
                    last_folded = Some((&p.folded, folded, norm));
                    (folded, norm)
                }
            };
            let name = *names
                .entry(p.name.as_str())
                .or_insert_with(|| push(&mut text, &p.name));
            places.push(Place {
                folded,
                norm,
                name,
                region: p.region,
                codes: spans[p.alias_of.unwrap_or(*i)],
                population: u32::try_from(p.population).unwrap_or(u32::MAX),
                kind: p.kind,
            });
        }
        drop(names);
        drop(self.places);
        let mut region_words: HashMap<Box<str>, Vec<u32>> = HashMap::default();
        for (i, r) in self.regions.iter().enumerate() {
            // Its names in the data, and the region table's (`München Bavaria` is in
            // Bayern, `Kraków Małopolskie` in the data's Lesser Poland).
            let table = regions::other_names(self.country.as_str(), &r.key).map(Box::from);
            let words = [&r.name_folded, &r.code_folded, &r.key]
                .into_iter()
                .cloned()
                .chain(table);
            for word in words {
                if !word.is_empty() {
                    let ids = region_words.entry(word).or_default();
                    if !ids.contains(&(i as u32)) {
                        ids.push(i as u32);
                    }
                }
            }
        }
        let norm_of = |id: &u32| places[*id as usize].norm.of(&text);
        let mut by_norm: Vec<u32> = (0..places.len() as u32).collect();
        by_norm.sort_by(|a, b| norm_of(a).cmp(norm_of(b)));
        let mut by_skeleton = by_norm.clone();
        by_skeleton.sort_by_cached_key(|id| skeleton(norm_of(id)));
        let mut lists: HashMap<u32, (u32, Vec<u8>)> = HashMap::default();
        let mut grams = Vec::new();
        let mut longest_typo_name = 0;
        for (id, place) in places.iter().enumerate() {
            // Typos are matched on the data's own names and the other Latin names of cities
            // of [`CITY_POPULATION`] people (`Colone`: Köln's `Cologne`; among names equally
            // close the data's own first, `fuzzy`), of [`TYPO_ALIAS_CHARS`] letters or more
            // (not `FRA`, Frankfurt's airport code, which `Fr a.M.` was one edit from).
            let typo_alias = place.kind == Kind::Alias
                && u64::from(place.population) >= super::CITY_POPULATION
                && place.folded.len as usize >= TYPO_ALIAS_CHARS;
            if matches!(place.kind, Kind::Alias | Kind::Foreign) && !typo_alias {
                continue;
            }
            let id = id as u32;
            let norm = place.norm.of(&text);
            longest_typo_name = longest_typo_name.max(norm.bytes().filter(|b| *b != b' ').count());
            let plain = skeleton(norm);
            grams.clear();
            grams.extend(trigrams(&plain));
            grams.sort_unstable();
            grams.dedup();
            for gram in &grams {
                let (last, list) = lists.entry(*gram).or_insert((0, Vec::new()));
                encode(list, id - *last);
                *last = id;
            }
        }
        let postings = lists
            .into_iter()
            .map(|(gram, (_, list))| (gram, list.into_boxed_slice()))
            .collect();
        text.shrink_to_fit();
        codes_text.shrink_to_fit();
        place_codes.shrink_to_fit();
        let code_shape =
            CodeShape::of((0..code_starts.len()).map(|i| code_text(&codes_text, &code_starts, i)));
        let longest_name = places.iter().map(|p| p.folded.len as usize).max();
        let longest_matchable = longest_name.unwrap_or(0).max(super::FUZZY_MAX_CHARS)
            + 2 * CODE_EDGE_WORDS * (code_shape.longest + MAX_CODE_WORDS)
            + self.country_names.first().map_or(0, String::len)
            + 1;
        CountryCities {
            country: self.country,
            language,
            country_name: fold(&self.country_name).into(),
            country_names: self.country_names.into_iter().map(Into::into).collect(),
            code_regex: self.code_regex,
            office_cities,
            text,
            regions: self.regions,
            longest_region_words: region_words
                .keys()
                .map(|w| w.split(' ').count())
                .max()
                .unwrap_or(0),
            region_words,
            places,
            by_norm,
            by_skeleton,
            longest_typo_name,
            longest_matchable,
            code_shape,
            codes_text,
            code_starts,
            code_points,
            place_codes,
            postings,
        }
    }
}

/// Each country's names in its own languages and in English (ISO 3166's, as the
/// iso-codes project translates them, and a few short forms): written by
/// `bench/city/country_names.py`.
const COUNTRY_NAMES: &str = include_str!("country_names.tsv");

/// The folded names of `country` a query may end with, longest first: the dataset's
/// (`country_name`) and the table's.
fn country_names(country: CountryCode, country_name: &str) -> Vec<String> {
    let listed = COUNTRY_NAMES
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .find(|(code, _)| *code == country.as_str())
        .map_or("", |(_, names)| names);
    let mut names: Vec<String> = std::iter::once(country_name)
        .chain(listed.split(','))
        .map(fold)
        .filter(|n| !n.is_empty())
        .collect();
    names.sort_unstable_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    names.dedup();
    names
}

/// A unit of the postal data a gazetteer city may join.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Unit {
    Place(usize),
    Admin(usize),
    /// The places whose names begin with one of the city's (by the first of them, and the
    /// name's place in `GazetteerCity::names`).
    Group(usize, usize),
    /// An admin unit's codes near the city.
    Clipped(usize),
    /// The codes around a city that joins no other unit (by its index among the
    /// gazetteer's cities, and the region most of them lie in).
    Area(usize, u32),
}

/// The folded names a unit answers to when a gazetteer city is joined: its name, and each
/// half of a bilingual one (`Donostia / San Sebastián`), their numbers written one way
/// (`numbered`: the gazetteer's `Paris 15e` is the data's `Paris 15`).
fn keys(folded: &str, name: &str) -> Vec<String> {
    let mut keys = vec![numbered(folded)];
    if name.contains('/') {
        keys.extend(
            name.split('/')
                .map(|h| numbered(&fold(h)))
                .filter(|h| !h.is_empty()),
        );
    }
    keys
}

/// `praha` -> `Praha`: a city named by the places that begin with its name.
fn title(folded: &str) -> String {
    folded
        .split(' ')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}
