//! Place names in memory for `/api/city` and `/api/suggest`: every (name, region) of every
//! country with its postal codes, sorted for exact, prefix and skeleton lookups, and padded
//! trigram postings for typos.
//!
//! Why in memory: the FTS5 trigram query with bm25 over thousands of candidates for common
//! trigrams (`san`, `new`) took 5 ms median and up to 56 ms (issue 8), and every query
//! re-read pages after the billing writer's commits (see `index::postal`). The FTS5 table
//! stays the persistent index in the file; this one is built from `postal_codes` when the
//! dataset loads and swapped with it (it lives inside `PostalIndex`).
//!
//! Lean by construction (about 1.06 M places on the full set): one text arena per
//! country, places as fixed-size rows of offsets, postal codes once per country in an
//! arena, and trigram postings delta-encoded as varints.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use anyhow::Result;
use rusqlite::Connection;

use crate::db;
use crate::domain::CountryCode;
use crate::domain::city_match::{
    Language, Rank, edits_within, inner_trigrams, max_edits, skeleton, skeleton_cmp,
    strip_trailing, trigrams,
};
use crate::domain::postal_code::canonical;
use crate::domain::text::fold;

/// Longest folded query that is matched fuzzily (the longest place name of the data has
/// 192 characters); longer ones match exactly or not at all.
const FUZZY_MAX_CHARS: usize = 200;
/// Most candidates (best shared-trigram count first) checked by edit distance per query.
const FUZZY_CANDIDATES: usize = 400;
/// Fewest distinct district numbers that make `<name> <n>` places a city's districts.
const MIN_DISTRICTS: usize = 3;

/// A `/api/city` question, its parts folded with `domain::text::fold`.
#[derive(Debug, Clone)]
pub struct CityQuery {
    pub country: CountryCode,
    pub city: String,
    /// Matches admin name1 (or, for the US, also admin code1).
    pub state: Option<String>,
    /// Matches admin code1.
    pub st: Option<String>,
}

/// The answer to a `/api/city` question.
#[derive(Debug, Clone, PartialEq)]
pub struct CityMatch {
    /// Canonical codes, unique and ascending.
    pub zipcodes: Vec<String>,
    /// Set when no name matched exactly and this close one answered instead.
    pub fuzzy: Option<MatchedPlace>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MatchedPlace {
    pub city: String,
    pub state: String,
    pub st: String,
}

/// One `/api/suggest` result.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    pub city: String,
    pub state: String,
    pub st: String,
    /// How many postal codes the place has.
    pub codes: usize,
}

/// Every country's places.
#[derive(Default)]
pub struct CityIndex {
    countries: HashMap<CountryCode, CountryCities>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Span {
    start: u32,
    len: u32,
}

impl Span {
    fn of<'a>(&self, text: &'a str) -> &'a str {
        &text[self.start as usize..(self.start + self.len) as usize]
    }
}

struct Region {
    name: Box<str>,
    code: Box<str>,
    name_folded: Box<str>,
    code_folded: Box<str>,
}

/// A place: one folded name in one region (admin name1/code1).
struct Place {
    folded: Span,
    /// The folded name with the country's aliases applied (`st louis`).
    norm: Span,
    /// As the data writes it (the first record's place name).
    name: Span,
    region: u32,
    /// Into `place_codes`.
    codes: Span,
}

struct CountryCities {
    language: Language,
    text: String,
    regions: Vec<Region>,
    /// Folded region name or code -> regions (trailing words of a query).
    region_words: HashMap<Box<str>, Vec<u32>>,
    /// Sorted by folded name, then region.
    places: Vec<Place>,
    /// Place ids sorted by norm (word prefixes).
    by_norm: Vec<u32>,
    /// Place ids sorted by skeleton (norm without spaces).
    by_skeleton: Vec<u32>,
    /// The country's canonical postal codes, ascending, in one arena.
    codes_text: String,
    code_starts: Vec<u32>,
    /// Code ids of each place (ascending within a place).
    place_codes: Vec<u32>,
    /// Padded trigram of a skeleton -> place ids, delta-encoded varints.
    postings: HashMap<u32, Box<[u8]>>,
}

/// Which regions a query admits.
#[derive(Clone, Copy)]
struct Filter<'q> {
    state: Option<&'q str>,
    st: Option<&'q str>,
    /// US: `state` may also be the code.
    us: bool,
    /// A region named by trailing words of the query: its folded name or code.
    named: Option<&'q str>,
}

impl Filter<'_> {
    fn admits(&self, r: &Region) -> bool {
        let state_ok = self
            .state
            .is_none_or(|s| *s == *r.name_folded || (self.us && *s == *r.code_folded));
        let st_ok = self.st.is_none_or(|s| *s == *r.code_folded);
        let named_ok = self
            .named
            .is_none_or(|s| *s == *r.name_folded || *s == *r.code_folded);
        state_ok && st_ok && named_ok
    }
}

impl CityIndex {
    /// Reads every record's place, region and code, country by country (rows of one name
    /// arrive together, in source order).
    pub fn load(conn: &Connection) -> Result<CityIndex> {
        let mut countries = HashMap::new();
        for row in db::postal::loaded_countries(conn)? {
            let Some(country) = CountryCode::parse(&row.code) else {
                continue;
            };
            let mut builder = Builder::new(country);
            db::postal::for_each_place(conn, country.as_str(), |r| {
                builder.add(
                    r.postal_code,
                    r.place_name,
                    r.place_folded,
                    r.admin_name1,
                    r.admin_code1,
                    r.admin_name2,
                    r.admin_name3,
                )
            })?;
            countries.insert(country, builder.finish());
        }
        Ok(CityIndex { countries })
    }

    /// Exact match on the folded name (every place of that name the filters admit, no
    /// `fuzzy`); else the closest place (docs/city.md, the order of steps).
    pub fn find(&self, query: &CityQuery) -> Option<CityMatch> {
        let cities = self.countries.get(&query.country)?;
        let filter = Filter {
            state: query.state.as_deref(),
            st: query.st.as_deref(),
            us: query.country == CountryCode::US,
            named: None,
        };
        if query.city.is_empty() {
            return None;
        }
        let exact: Vec<u32> = cities
            .folded_range(&query.city)
            .filter(|id| filter.admits(cities.region(*id)))
            .collect();
        if !exact.is_empty() {
            return Some(CityMatch {
                zipcodes: cities.codes_of(&exact),
                fuzzy: None,
            });
        }
        if query.city.len() > FUZZY_MAX_CHARS {
            return None;
        }
        let id = cities.closest(&query.city, &filter)?;
        let place = &cities.places[id as usize];
        let region = &cities.regions[place.region as usize];
        Some(CityMatch {
            zipcodes: cities.codes_of(&[id]),
            fuzzy: Some(MatchedPlace {
                city: place.name.of(&cities.text).to_string(),
                state: region.name.to_string(),
                st: region.code.to_string(),
            }),
        })
    }

    /// Places whose folded name starts with `prefix` (folded), then those containing it,
    /// each group most postal codes first; at most `limit`.
    pub fn suggest(
        &self,
        country: CountryCode,
        prefix: &str,
        state: Option<&str>,
        st: Option<&str>,
        limit: usize,
    ) -> Vec<Suggestion> {
        let Some(cities) = self.countries.get(&country) else {
            return Vec::new();
        };
        let filter = Filter {
            state,
            st,
            us: country == CountryCode::US,
            named: None,
        };
        let admitted = |id: &u32| filter.admits(cities.region(*id));
        let mut starting: Vec<u32> = cities.prefix_range(prefix).filter(admitted).collect();
        let mut chosen = cities.most_codes(&mut starting, limit);
        if chosen.len() < limit && prefix.len() >= 3 {
            let seen: HashSet<u32> = chosen.iter().copied().collect();
            let mut containing: Vec<u32> = cities
                .containing(prefix)
                .into_iter()
                .filter(|id| !seen.contains(id) && admitted(id))
                .collect();
            let more = cities.most_codes(&mut containing, limit - chosen.len());
            chosen.extend(more);
        }
        chosen
            .into_iter()
            .map(|id| {
                let place = &cities.places[id as usize];
                let region = &cities.regions[place.region as usize];
                Suggestion {
                    city: place.name.of(&cities.text).to_string(),
                    state: region.name.to_string(),
                    st: region.code.to_string(),
                    codes: place.codes.len as usize,
                }
            })
            .collect()
    }
}

/// Per-thread scratch of the fuzzy search, kept between queries: a common trigram of a
/// large country (`mac` in JP) touches 100,000 places, and freeing buffers of that size
/// after each query let the allocator give their pages back (madvise) and fault them in
/// again on the next one, inside the request: 0.5 to 10 ms for `Sbkaemachi` in JP
/// (bench/city, strace).
#[derive(Default)]
struct Scratch {
    /// Shared trigrams per place (one byte per place of the largest country seen).
    counts: Vec<u8>,
    /// Places with a count above zero.
    touched: Vec<u32>,
    /// Those places by count.
    by_count: Vec<Vec<u32>>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl CountryCities {
    fn region(&self, id: u32) -> &Region {
        &self.regions[self.places[id as usize].region as usize]
    }

    fn folded(&self, id: u32) -> &str {
        self.places[id as usize].folded.of(&self.text)
    }

    fn norm(&self, id: u32) -> &str {
        self.places[id as usize].norm.of(&self.text)
    }

    fn code_count(&self, id: u32) -> usize {
        self.places[id as usize].codes.len as usize
    }

    /// Places whose folded name is `folded`.
    fn folded_range(&self, folded: &str) -> impl Iterator<Item = u32> + '_ {
        let lo = self
            .places
            .partition_point(|p| p.folded.of(&self.text) < folded);
        let hi = self
            .places
            .partition_point(|p| p.folded.of(&self.text) <= folded);
        (lo as u32)..(hi as u32)
    }

    /// Places whose folded name starts with `prefix`.
    fn prefix_range(&self, prefix: &str) -> impl Iterator<Item = u32> + '_ {
        let lo = self
            .places
            .partition_point(|p| p.folded.of(&self.text) < prefix);
        let hi =
            lo + self.places[lo..].partition_point(|p| p.folded.of(&self.text).starts_with(prefix));
        (lo as u32)..(hi as u32)
    }

    /// The closest place to a folded query that has no exact match: the first step that
    /// finds anything wins (docs/city.md).
    fn closest(&self, folded: &str, filter: &Filter<'_>) -> Option<u32> {
        let words: Vec<&str> = folded.split(' ').collect();
        let stripped = strip_trailing(&words, |suffix| {
            self.region_words.get(suffix).is_some_and(|ids| {
                ids.iter()
                    .any(|r| filter.admits(&self.regions[*r as usize]))
            })
        });
        let full = self.forms(folded);
        let short = stripped
            .as_ref()
            .map(|(kept, _)| self.forms(&kept.join(" ")))
            .unwrap_or_default();
        let named_filter = stripped.as_ref().map(|(_, region)| Filter {
            named: region.as_deref(),
            ..*filter
        });
        let short_filter = named_filter.as_ref().unwrap_or(filter);
        let attempts: [(&[Form], &Filter<'_>); 2] =
            [(&full[..], filter), (&short[..], short_filter)];
        // 1. the same name but for spacing, aliases, transliteration (or trailing words).
        for (forms, filter) in attempts {
            for form in forms {
                if let Some(id) = self.best(self.skeleton_range(&form.skeleton), filter) {
                    return Some(id);
                }
            }
        }
        // 2. the query's words begin a longer name (`frankfurt` -> `frankfurt am main`).
        for (forms, filter) in attempts {
            for form in forms {
                if let Some(id) = self.best(self.word_prefix_range(&form.norm), filter) {
                    return Some(id);
                }
            }
        }
        // 3. typos: fewest edits, then most postal codes.
        attempts
            .iter()
            .flat_map(|(forms, filter)| forms.iter().map(move |f| (f, *filter)))
            .filter_map(|(form, filter)| self.fuzzy(&form.skeleton, filter))
            .min()
            .map(|rank| rank.order)
    }

    /// The readings of a folded query: as typed (aliases applied), and with typed
    /// transliterations undone when the country's letters call for it.
    fn forms(&self, folded: &str) -> Vec<Form> {
        let norm = self.language.norm(folded);
        let mut forms = vec![Form {
            skeleton: skeleton(&norm),
            norm: norm.clone(),
        }];
        if let Some(plain) = self.language.untransliterated(&norm) {
            forms.push(Form {
                skeleton: skeleton(&plain),
                norm: plain,
            });
        }
        forms
    }

    /// The admitted place with the most postal codes among `ids`.
    fn best(&self, ids: impl Iterator<Item = u32>, filter: &Filter<'_>) -> Option<u32> {
        ids.filter(|id| filter.admits(self.region(*id)))
            .min_by_key(|id| Rank {
                edits: 0,
                codes: self.code_count(*id),
                name_len: self.places[*id as usize].folded.len as usize,
                order: *id,
            })
    }

    fn skeleton_range(&self, skeleton: &str) -> impl Iterator<Item = u32> + '_ {
        let cmp = |id: &u32| skeleton_cmp(self.norm(*id), skeleton);
        let lo = self.by_skeleton.partition_point(|id| cmp(id).is_lt());
        let hi = self.by_skeleton.partition_point(|id| cmp(id).is_le());
        self.by_skeleton[lo..hi].iter().copied()
    }

    /// Places whose norm starts with the words of `norm` followed by more words.
    fn word_prefix_range(&self, norm: &str) -> impl Iterator<Item = u32> + '_ {
        let prefix = format!("{norm} ");
        let valid = norm.len() >= 3;
        let lo = self
            .by_norm
            .partition_point(|id| self.norm(*id) < prefix.as_str());
        let hi = lo + self.by_norm[lo..].partition_point(|id| self.norm(*id).starts_with(&prefix));
        self.by_norm[lo..if valid { hi } else { lo }]
            .iter()
            .copied()
    }

    /// The closest admitted place by edit distance on skeletons, among the places sharing
    /// the most padded trigrams with the query.
    fn fuzzy(&self, query: &str, filter: &Filter<'_>) -> Option<Rank> {
        if query.len() < 3 {
            return None;
        }
        let mut grams: Vec<u32> = trigrams(query).collect();
        grams.sort_unstable();
        grams.dedup();
        SCRATCH.with(|scratch| {
            let scratch = &mut *scratch.borrow_mut();
            let Scratch {
                counts,
                touched,
                by_count,
            } = scratch;
            if counts.len() < self.places.len() {
                counts.resize(self.places.len(), 0);
            }
            touched.clear();
            for gram in &grams {
                if let Some(list) = self.postings.get(gram) {
                    for id in decode(list) {
                        let c = &mut counts[id as usize];
                        if *c == 0 {
                            touched.push(id);
                        }
                        *c = c.saturating_add(1);
                    }
                }
            }
            // Candidates by shared count, highest first (a counting sort).
            let top = grams.len().min(255);
            by_count.iter_mut().for_each(Vec::clear);
            if by_count.len() < top + 1 {
                by_count.resize_with(top + 1, Vec::new);
            }
            for id in touched.iter() {
                let c = usize::from(counts[*id as usize]).min(top);
                by_count[c].push(*id);
                counts[*id as usize] = 0;
            }
            // Each edit changes at most three windows, so a name `d` edits away shares at
            // least `distinct - 3d` of the query's distinct trigrams.
            let n = grams.len();
            let mut best: Option<Rank> = None;
            let mut checked = 0;
            let mut buffer = Vec::with_capacity(64);
            for (shared, ids) in by_count[..=top].iter().enumerate().rev() {
                // Each edit removes at most three trigrams: fewer shared ones mean more
                // edits than the best so far, so nothing further can win.
                let least_edits = (n.saturating_sub(shared)).div_ceil(3);
                if best.is_some_and(|b| least_edits > b.edits) || checked >= FUZZY_CANDIDATES {
                    break;
                }
                for id in ids {
                    let place = &self.places[*id as usize];
                    if !filter.admits(&self.regions[place.region as usize]) {
                        continue;
                    }
                    buffer.clear();
                    buffer.extend(place.norm.of(&self.text).bytes().filter(|b| *b != b' '));
                    let limit = max_edits(query.len(), buffer.len());
                    let limit = best.map_or(limit, |b| limit.min(b.edits));
                    checked += 1;
                    if let Some(edits) = edits_within(query.as_bytes(), &buffer, limit) {
                        let rank = Rank {
                            edits,
                            codes: place.codes.len as usize,
                            name_len: buffer.len(),
                            order: *id,
                        };
                        if best.is_none_or(|b| rank < b) {
                            best = Some(rank);
                        }
                    }
                }
            }
            best
        })
    }

    /// Places whose folded name contains `text` (3 characters or more).
    fn containing(&self, text: &str) -> Vec<u32> {
        let plain = skeleton(text);
        let mut lists: Vec<&[u8]> = inner_trigrams(&plain)
            .map(|g| self.postings.get(&g).map_or(&[][..], |l| &l[..]))
            .collect();
        lists.sort_by_key(|l| l.len());
        let Some(rarest) = lists.first() else {
            return Vec::new();
        };
        decode(rarest)
            .filter(|id| self.folded(*id).contains(text))
            .collect()
    }

    /// The `limit` places of `ids` with the most postal codes, most first (then by name).
    fn most_codes(&self, ids: &mut [u32], limit: usize) -> Vec<u32> {
        let key = |id: &u32| (std::cmp::Reverse(self.code_count(*id)), *id);
        if ids.len() > limit && limit > 0 {
            ids.select_nth_unstable_by_key(limit - 1, key);
        }
        let mut top = ids[..ids.len().min(limit)].to_vec();
        top.sort_by_key(key);
        top
    }

    /// The canonical codes of places, unique and ascending.
    fn codes_of(&self, ids: &[u32]) -> Vec<String> {
        let mut code_ids: Vec<u32> = ids
            .iter()
            .flat_map(|id| {
                let span = self.places[*id as usize].codes;
                self.place_codes[span.start as usize..(span.start + span.len) as usize]
                    .iter()
                    .copied()
            })
            .collect();
        code_ids.sort_unstable();
        code_ids.dedup();
        code_ids
            .into_iter()
            .map(|c| {
                let start = self.code_starts[c as usize] as usize;
                let end = self
                    .code_starts
                    .get(c as usize + 1)
                    .map_or(self.codes_text.len(), |e| *e as usize);
                self.codes_text[start..end].to_string()
            })
            .collect()
    }
}

struct Form {
    norm: String,
    skeleton: String,
}

fn decode(list: &[u8]) -> impl Iterator<Item = u32> + '_ {
    let mut at = 0;
    let mut last = 0u32;
    std::iter::from_fn(move || {
        if at >= list.len() {
            return None;
        }
        let mut value = 0u32;
        let mut shift = 0;
        loop {
            let byte = list[at];
            at += 1;
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        last += value;
        Some(last)
    })
}

fn encode(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A place while the country loads.
struct PlaceBuild {
    folded: String,
    name: String,
    region: u32,
    codes: Vec<u32>,
    /// Folded admin name2 / name3 of the first record: a district's city (`Paris 01` lies
    /// in admin name2 `Paris`).
    parents: [String; 2],
}

struct Builder {
    country: CountryCode,
    regions: Vec<Region>,
    region_ids: HashMap<(String, String), u32>,
    places: Vec<PlaceBuild>,
    /// (folded, region) -> index in `places`, for the current folded name only (rows of
    /// one name arrive together).
    current: HashMap<u32, usize>,
    current_name: String,
    code_ids: HashMap<String, u32>,
    long_words: HashSet<&'static str>,
    letters: HashSet<char>,
}

impl Builder {
    fn new(country: CountryCode) -> Builder {
        Builder {
            country,
            regions: Vec::new(),
            region_ids: HashMap::new(),
            places: Vec::new(),
            current: HashMap::new(),
            current_name: String::new(),
            code_ids: HashMap::new(),
            long_words: HashSet::new(),
            letters: HashSet::new(),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        postal_code: &str,
        place_name: &str,
        folded: &str,
        name1: Option<&str>,
        code1: Option<&str>,
        name2: Option<&str>,
        name3: Option<&str>,
    ) {
        let key = (
            name1.unwrap_or("").to_string(),
            code1.unwrap_or("").to_string(),
        );
        let region = match self.region_ids.get(&key) {
            Some(id) => *id,
            None => {
                let id = self.regions.len() as u32;
                self.regions.push(Region {
                    name_folded: fold(&key.0).into(),
                    code_folded: fold(&key.1).into(),
                    name: key.0.clone().into(),
                    code: key.1.clone().into(),
                });
                self.region_ids.insert(key, id);
                id
            }
        };
        let code = canonical(self.country, postal_code);
        let next = self.code_ids.len() as u32;
        let code = *self.code_ids.entry(code).or_insert(next);
        if folded != self.current_name {
            self.current.clear();
            self.current_name = folded.to_string();
            for word in folded.split(' ') {
                if let Some((long, _)) = crate::domain::city_match::ABBREVIATIONS
                    .iter()
                    .find(|(long, _)| *long == word)
                {
                    self.long_words.insert(*long);
                }
            }
            for c in place_name.chars().filter(|c| !c.is_ascii()) {
                self.letters.insert(c);
            }
        }
        let places = &mut self.places;
        let at = *self.current.entry(region).or_insert_with(|| {
            places.push(PlaceBuild {
                folded: folded.to_string(),
                name: place_name.to_string(),
                region,
                codes: Vec::new(),
                parents: [fold(name2.unwrap_or("")), fold(name3.unwrap_or(""))],
            });
            places.len() - 1
        });
        self.places[at].codes.push(code);
    }

    /// Districts: places named `<city> <n>` (n of one or two digits) with at least
    /// [`MIN_DISTRICTS`] numbers in one region, where `<city>` is a place of that region or
    /// the districts' admin name2/3, add their codes to `<city>` (made when missing).
    fn merge_districts(&mut self) {
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
                    });
                    self.places.len() - 1
                }
            };
            self.places[at].codes.extend(codes);
        }
    }

    fn finish(mut self) -> CountryCities {
        self.merge_districts();
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
        self.places
            .sort_by(|a, b| a.folded.cmp(&b.folded).then(a.region.cmp(&b.region)));
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
        let mut place_codes = Vec::new();
        let mut last_folded: Option<(String, Span, Span)> = None;
        for p in &self.places {
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
                    last_folded = Some((p.folded.clone(), folded, norm));
                    (folded, norm)
                }
            };
            let name = push(&mut text, &p.name);
            let mut ids: Vec<u32> = p.codes.iter().map(|c| renumber[*c as usize]).collect();
            ids.sort_unstable();
            ids.dedup();
            let codes = Span {
                start: place_codes.len() as u32,
                len: ids.len() as u32,
            };
            place_codes.extend(ids);
            places.push(Place {
                folded,
                norm,
                name,
                region: p.region,
                codes,
            });
        }
        drop(self.places);
        let mut region_words: HashMap<Box<str>, Vec<u32>> = HashMap::new();
        for (i, r) in self.regions.iter().enumerate() {
            for word in [&r.name_folded, &r.code_folded] {
                if !word.is_empty() {
                    let ids = region_words.entry(word.clone()).or_default();
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
        let mut lists: HashMap<u32, (u32, Vec<u8>)> = HashMap::new();
        let mut grams = Vec::new();
        for (id, place) in places.iter().enumerate() {
            let id = id as u32;
            let plain = skeleton(place.norm.of(&text));
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
        CountryCities {
            language,
            text,
            regions: self.regions,
            region_words,
            places,
            by_norm,
            by_skeleton,
            codes_text,
            code_starts,
            place_codes,
            postings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postings_decode_to_what_was_encoded() {
        let ids = [0u32, 1, 5, 200, 70_000, 70_001];
        let mut list = Vec::new();
        let mut last = 0;
        for id in ids {
            encode(&mut list, id - last);
            last = id;
        }
        assert_eq!(decode(&list).collect::<Vec<_>>(), ids);
    }
}
