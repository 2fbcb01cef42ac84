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

mod build;
mod codes;
mod fuzzy;

use std::cell::RefCell;
use std::sync::Arc;

use anyhow::Result;
use regex::Regex;
use rusqlite::Connection;

use crate::db;
use crate::domain::CountryCode;
use crate::domain::city_match::{
    DOMINANT, Language, PLACEHOLDERS, Rank, inner_trigrams, numbered, skeleton, skeleton_cmp,
    strip_trailing,
};
use crate::domain::regions;
use crate::domain::text::written_in_latin;
use build::{Builder, GazetteerCity};
use codes::{CodeShape, code_text};

/// The maps and sets of the city index, those every load builds (a few million entries on
/// the full dataset) and those queries read: foldhash, randomly seeded, not SipHash, which
/// took 4.7% of a server's start on the sample (perf; issue 53). Keys are the dataset's
/// own names and ids, never a request's.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// A town: a gazetteer place of this many people (a district holding one is no city,
/// `build::districts`; a typo may be taken for one anywhere, `fuzzy`).
const TOWN_POPULATION: u64 = 1_000;

/// Longest folded query that is matched fuzzily (the longest place name of the data has
/// 192 characters); longer ones match exactly or not at all.
pub(super) const FUZZY_MAX_CHARS: usize = 200;
/// Most candidates (best shared-trigram count first) checked by edit distance per query.
const FUZZY_CANDIDATES: usize = 400;
/// GeoNames' own threshold of a city (cities15000): the other Latin names of cities this
/// large are candidates of the typo step too (`fuzzy`; `Colone` finds Köln's `Cologne`).
pub(super) const CITY_POPULATION: u64 = 15_000;
/// A city this large is meant by one of its other names before places of that name that
/// the gazetteer does not know (`fuzzy`).
const LARGE_CITY: u64 = 100_000;

/// A `/api/city` question, its parts folded with `domain::text::fold`.
#[derive(Debug, Clone)]
pub struct CityQuery {
    pub country: CountryCode,
    pub city: String,
    /// Matches admin name1 (or, for the US, also admin code1).
    pub state: Option<String>,
    /// Matches admin code1.
    pub st: Option<String>,
    /// The city was typed in the Latin alphabet (`text::written_in_latin`): a place whose
    /// name is written otherwise, found through its transliteration (`Lviv` -> `Львів`),
    /// is named in the answer.
    pub latin: bool,
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
    /// `name_folded` as the region table writes it (`regions::data_name`): what a `state`
    /// filter compares, so that `Bayern` admits the codes GeoNames files under `Bavaria`
    /// too.
    key: Box<str>,
    name: Box<str>,
    code: Box<str>,
    name_folded: Box<str>,
    code_folded: Box<str>,
}

/// What a name of the index is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A place name of the postal data (`place_name`): the only kind an exact name answers
    /// without `matched*`.
    Place,
    /// A city the admin columns name (`Tokyo To`), or a city's post offices together
    /// (`Karachi Gpo`, `Karachi Saddar`...), joined to a gazetteer city.
    Admin,
    /// Another name of a place or city (the gazetteer's alternate names, each half of a
    /// bilingual name): answers with that place's codes and names it.
    Alias,
    /// JP: a municipality of the post (a city, ward, town or village: `index::city::build`'s
    /// `add_municipalities`), or another of its names: the cities, answered before any
    /// place or other name of theirs (issue 34).
    Municipality,
    /// An alternate name written in another script (`Мюнхен`, `東京`): found as typed
    /// only, never completed by /api/suggest.
    Foreign,
}

/// A name in one region (admin name1/code1) and the postal codes it answers with.
struct Place {
    folded: Span,
    /// The folded name with the country's aliases applied (`st louis`).
    norm: Span,
    /// The place as the data writes it (the first record's place name, the admin name).
    name: Span,
    region: u32,
    /// Into `place_codes`; an alias shares its place's span.
    codes: Span,
    /// The gazetteer's population of the city joined to it (0: none).
    population: u32,
    kind: Kind,
}

impl Place {
    /// Another name of a place, not the data's own name for it.
    fn is_alias(&self) -> bool {
        matches!(self.kind, Kind::Alias | Kind::Foreign)
    }
}

struct CountryCities {
    country: CountryCode,
    language: Language,
    /// The country's name in the dataset, folded: dropped from the end of a query (`Paris,
    /// France`).
    country_name: Box<str>,
    /// Its names in its own languages too, folded, longest first (`clean`'s lenient
    /// reading: `Roma, Italia`).
    country_names: Vec<Box<str>>,
    /// countryInfo's regex of the country's postal codes (`clean`).
    code_regex: Option<Arc<Regex>>,
    /// JP: the municipality of each office code (by code id, ascending), the `city` of its
    /// lookup (`CityIndex::office_city`).
    office_cities: Vec<(u32, Box<str>)>,
    text: String,
    regions: Vec<Region>,
    /// Folded region name or code -> regions (trailing words of a query).
    region_words: HashMap<Box<str>, Vec<u32>>,
    /// Words of the longest of them.
    longest_region_words: usize,
    /// The longest folded query that can find a place, in bytes: the longest folded name
    /// (or what the typo steps take, `FUZZY_MAX_CHARS`), with what `clean` may take off
    /// around it (a code at each of its positions, the country's name). A longer query
    /// finds nothing and is not looked into (verify does not even fold past it).
    longest_matchable: usize,
    /// Sorted by folded name, then region.
    places: Vec<Place>,
    /// Place ids sorted by norm (word prefixes).
    by_norm: Vec<u32>,
    /// Place ids sorted by skeleton (norm without spaces).
    by_skeleton: Vec<u32>,
    /// The longest name a typo may be taken for (`fuzzy`'s candidates), without spaces,
    /// in bytes: a query too much longer than it is no typo of any name.
    longest_typo_name: usize,
    /// The country's canonical postal codes, ascending, in one arena.
    codes_text: String,
    code_starts: Vec<u32>,
    /// Each code's point (its first record with coordinates; NaN: none), by code id.
    code_points: Vec<(f32, f32)>,
    /// What every code of the country looks like, to pass over most word windows of a
    /// query without a search (`is_code`).
    code_shape: CodeShape,
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
    /// The query says where the place lies (`state`, `ST` or a region in its words).
    fn locates(&self) -> bool {
        self.state.is_some() || self.st.is_some() || self.named.is_some()
    }

    fn admits(&self, r: &Region) -> bool {
        let state_ok = self
            .state
            .is_none_or(|s| *s == *r.key || (self.us && *s == *r.code_folded));
        let st_ok = self.st.is_none_or(|s| *s == *r.code_folded);
        let named_ok = self
            .named
            .is_none_or(|s| *s == *r.key || *s == *r.name_folded || *s == *r.code_folded);
        state_ok && st_ok && named_ok
    }
}

impl CityIndex {
    /// Reads every record's place, region and code, country by country (rows of one name
    /// arrive together, in source order), and the gazetteer's cities of the country.
    pub fn load(conn: &Connection) -> Result<CityIndex> {
        let mut countries = HashMap::default();
        for row in db::postal::loaded_countries(conn)? {
            let Some(country) = CountryCode::parse(&row.code) else {
                continue;
            };
            let mut builder = Builder::new(country, &row.name, row.data.postal_regex.clone());
            db::postal::for_each_place(conn, country.as_str(), |r| builder.add(r))?;
            let mut cities = Vec::new();
            db::gazetteer::for_each_place(conn, country.as_str(), |g| {
                cities.push(GazetteerCity::new(
                    g.name,
                    g.alternate_names,
                    g.latitude,
                    g.longitude,
                    g.population,
                ));
            })?;
            countries.insert(country, builder.finish(&cities));
        }
        Ok(CityIndex { countries })
    }

    /// Exact match on the folded name (every place of that name the filters admit, no
    /// `fuzzy`); else the closest place (docs/city.md, the order of steps).
    pub fn find(&self, query: &CityQuery) -> Option<CityMatch> {
        let cities = self.countries.get(&query.country)?;
        let filter = Filter {
            state: query
                .state
                .as_deref()
                .map(|s| regions::data_name(query.country.as_str(), s)),
            st: query.st.as_deref(),
            us: query.country == CountryCode::US,
            named: None,
        };
        if query.city.is_empty() || query.city.len() > cities.longest_matchable {
            return None;
        }
        if let Some(found) = cities.exact(&query.city, &filter, false, query.latin) {
            return Some(found);
        }
        // What forms add to a city: a postal code, the country's name; strictly, then
        // leniently (`clean`).
        let cleaned = cities.clean(&query.city, false);
        if cleaned != query.city
            && !cleaned.is_empty()
            && let Some(found) = cities.exact(&cleaned, &filter, true, query.latin)
        {
            return Some(found);
        }
        let lenient = cities.clean(&query.city, true);
        if lenient != query.city
            && lenient != cleaned
            && !lenient.is_empty()
            && let Some(found) = cities.exact(&lenient, &filter, true, query.latin)
        {
            return Some(found);
        }
        if cleaned.is_empty()
            || cleaned.len() > FUZZY_MAX_CHARS
            || PLACEHOLDERS.contains(&&*cleaned)
        {
            return None;
        }
        // Words cut short after the first (`Frankfurt a.M.`, `Freiburg i. Br.`, `Bad Homburg
        // v.d.H.`): before the typos, which found another city (Frankfurt (Oder)).
        if let Some(id) = cities.abbreviated(&cleaned, &filter) {
            return Some(CityMatch {
                zipcodes: cities.codes_of(&[id]),
                fuzzy: Some(cities.matched(id)),
            });
        }
        // The steps of before on the query as typed (its trailing words may name a region:
        // `Northbridge Western Australia`), then on what is left of it.
        let id = cities
            .closest(&query.city, &filter)
            .or_else(|| (cleaned != query.city).then(|| cities.closest(&cleaned, &filter))?)?;
        Some(CityMatch {
            zipcodes: cities.codes_of(&[id]),
            fuzzy: Some(cities.matched(id)),
        })
    }

    /// The longest folded query of `country` that can find a place (`find` answers `None`
    /// to longer ones): no bound for a country without places.
    pub fn longest_matchable(&self, country: CountryCode) -> usize {
        self.countries
            .get(&country)
            .map_or(usize::MAX, |c| c.longest_matchable)
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
            state: state.map(|s| regions::data_name(country.as_str(), s)),
            st,
            us: country == CountryCode::US,
            named: None,
        };
        let admitted = |id: &u32| {
            filter.admits(cities.region(*id)) && cities.places[*id as usize].kind != Kind::Foreign
        };
        let mut starting: Vec<u32> = cities.prefix_range(prefix).filter(admitted).collect();
        let mut chosen = cities.most_codes(&mut starting, limit, &HashSet::default());
        if chosen.len() < limit && prefix.len() >= 3 {
            let seen: HashSet<(u32, u32)> = chosen.iter().map(|id| cities.unit(*id)).collect();
            let mut containing: Vec<u32> = cities
                .containing(prefix)
                .into_iter()
                .filter(|id| admitted(id))
                .collect();
            let more = cities.most_codes(&mut containing, limit - chosen.len(), &seen);
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
        let stripped = strip_trailing(&words, self.longest_region_words, |suffix| {
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
        // A region the query names, as the region table writes it (`Bavaria`: `bayern`).
        let named_filter = stripped.as_ref().map(|(_, region)| Filter {
            named: region
                .as_deref()
                .map(|r| regions::data_name(self.country.as_str(), r)),
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
        // 3. typos: fewest edits, then most postal codes; never a hamlet far from the
        // places the query's words name (`typo_elsewhere`).
        attempts
            .iter()
            .flat_map(|(forms, filter)| forms.iter().map(move |f| (f, *filter)))
            .filter_map(|(form, filter)| {
                self.fuzzy(&form.skeleton, filter)
                    .filter(|rank| !self.typo_elsewhere(folded, rank, filter))
            })
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
    /// The place whose name the query writes with words cut short: the same number of
    /// words, the first (3 letters or more) in full, every other one the start of the name's
    /// word there, one at least cut (`frankfurt a m` -> `frankfurt am main`, `freiburg i br`
    /// -> `freiburg im breisgau`; not `freiburg elbe`); the best ranked (`best`).
    fn abbreviated(&self, folded: &str, filter: &Filter<'_>) -> Option<u32> {
        let words: Vec<&str> = folded.split(' ').collect();
        let (first, rest) = words.split_first()?;
        if rest.is_empty() || first.len() < 3 || folded.len() > FUZZY_MAX_CHARS {
            return None;
        }
        let prefix = format!("{first} ");
        // A number is a district's, never cut short (`Paris 2` is not `Paris 20`).
        let number = |w: &str| w.bytes().any(|b| b.is_ascii_digit());
        let fits = |id: &u32| {
            let name: Vec<&str> = self.folded(*id).split(' ').collect();
            name.len() == words.len()
                && words.iter().zip(&name).all(|(w, n)| {
                    if number(w) || number(n) {
                        numbered(w) == numbered(n)
                    } else {
                        n.starts_with(w)
                    }
                })
                && words
                    .iter()
                    .zip(&name)
                    .any(|(w, n)| !number(w) && w.len() < n.len())
        };
        self.best(self.prefix_range(&prefix).filter(fits), filter)
    }

    fn best(&self, ids: impl Iterator<Item = u32>, filter: &Filter<'_>) -> Option<u32> {
        ids.filter(|id| filter.admits(self.region(*id)))
            .min_by_key(|id| Rank {
                edits: 0,
                alias: self.places[*id as usize].is_alias(),
                population: u64::from(self.places[*id as usize].population),
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

    /// Places whose folded name contains `text` (3 characters or more): the data's own
    /// names (the postings hold some cities' other names too, for typos).
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
            .filter(|id| !self.places[*id as usize].is_alias() && self.folded(*id).contains(text))
            .collect()
    }

    /// The `limit` places of `ids` with the largest population, then the most postal
    /// codes, first (then by name); one name per place (an alias gives way to its place or
    /// another alias of it ranked first), none of the places in `seen`.
    fn most_codes(&self, ids: &mut [u32], limit: usize, seen: &HashSet<(u32, u32)>) -> Vec<u32> {
        let key = |id: &u32| {
            let p = &self.places[*id as usize];
            (
                std::cmp::Reverse(p.population),
                std::cmp::Reverse(p.codes.len),
                *id,
            )
        };
        // A few more than asked for, so that names of one place counted once still fill it.
        let mut wanted = limit.saturating_mul(4);
        loop {
            if ids.len() > wanted && wanted > 0 {
                ids.select_nth_unstable_by_key(wanted - 1, key);
            }
            let mut top = ids[..ids.len().min(wanted)].to_vec();
            top.sort_by_key(key);
            let mut units = seen.clone();
            top.retain(|id| units.insert(self.unit(*id)));
            top.truncate(limit);
            if top.len() == limit || wanted >= ids.len() {
                return top;
            }
            wanted = wanted.saturating_mul(4);
        }
    }

    /// What identifies a place's codes: an alias has its place's.
    fn unit(&self, id: u32) -> (u32, u32) {
        let codes = self.places[id as usize].codes;
        (codes.start, codes.len)
    }

    /// The answer naming one place.
    fn matched(&self, id: u32) -> MatchedPlace {
        let place = &self.places[id as usize];
        let region = &self.regions[place.region as usize];
        MatchedPlace {
            city: place.name.of(&self.text).to_string(),
            state: region.name.to_string(),
            st: region.code.to_string(),
        }
    }

    /// Names equal to the folded query (docs/city.md, step 1): every place of that name
    /// answers together, without `matched*`; but when one of the names is a city the
    /// gazetteer counts [`DOMINANT`] times as many people as any other, or only names that
    /// are not place names match (a city of the admin columns, another name of a place),
    /// the one place answers and is named. `named`: the query was not the name as typed
    /// (`10115 Berlin`), so the answer names its place in any case; so does a query typed
    /// in another script than the place's name (`latin`: `Lviv` finds `Львів`, named).
    fn exact(
        &self,
        folded: &str,
        filter: &Filter<'_>,
        named: bool,
        latin: bool,
    ) -> Option<CityMatch> {
        let mut ids: Vec<u32> = self
            .folded_range(folded)
            .filter(|id| filter.admits(self.region(*id)))
            .collect();
        // The post's municipalities are the cities: one named so answers, not the
        // neighbourhoods, prefectures or districts of its name (`Minato`: Minato Ku, not
        // the chōme named Minato; `Fukushima`: the city, not the prefecture), the one a
        // person means first (population, then postal codes), named.
        if ids
            .iter()
            .any(|id| self.places[*id as usize].kind == Kind::Municipality)
        {
            let best = *ids
                .iter()
                .filter(|id| self.places[**id as usize].kind == Kind::Municipality)
                .max_by_key(|id| {
                    let p = &self.places[**id as usize];
                    (p.population, p.codes.len, std::cmp::Reverse(**id))
                })?;
            return Some(CityMatch {
                zipcodes: self.codes_of(&[best]),
                fuzzy: Some(self.matched(best)),
            });
        }
        // A place the data names so is meant before another place's other name (`Isola`
        // is a village of that name, not Isola di Capo Rizzuto, also called Isola).
        if ids
            .iter()
            .any(|id| self.places[*id as usize].kind == Kind::Place)
        {
            ids.retain(|id| !self.places[*id as usize].is_alias());
        }
        let best = *ids.iter().max_by_key(|id| {
            let p = &self.places[**id as usize];
            (p.population, p.codes.len, std::cmp::Reverse(**id))
        })?;
        let largest = self.places[best as usize].population;
        let others = ids
            .iter()
            .filter(|id| self.unit(**id) != self.unit(best))
            .map(|id| self.places[*id as usize].population)
            .max()
            .unwrap_or(0);
        let dominant = largest > 0 && u64::from(largest) >= DOMINANT * u64::from(others);
        let places: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|id| self.places[*id as usize].kind == Kind::Place)
            .collect();
        let every_place = (!places.is_empty()).then(|| self.codes_of(&places));
        let zipcodes = match &every_place {
            Some(codes) if !dominant => codes.clone(),
            _ => self.codes_of(&[best]),
        };
        let transliterated =
            written_in_latin(self.places[best as usize].name.of(&self.text)) != latin;
        let fuzzy = (named || transliterated || every_place.as_ref() != Some(&zipcodes))
            .then(|| self.matched(best));
        Some(CityMatch { zipcodes, fuzzy })
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
            .map(|c| code_text(&self.codes_text, &self.code_starts, c as usize).to_string())
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
