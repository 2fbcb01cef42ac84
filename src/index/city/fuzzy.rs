//! Typos (`/api/city`'s last step): the closest place by edit distance on skeletons,
//! among the places sharing the most padded trigrams with the query (docs/city.md).

use super::{
    CountryCities, FUZZY_CANDIDATES, Filter, LARGE_CITY, SCRATCH, Scratch, TOWN_POPULATION, decode,
};
use crate::domain::city_match::{
    Rank, edits_fit_the_difference, edits_within, max_edits, same_numbers, trigrams,
};
use crate::domain::geo::haversine_km;

/// A typo may be taken for a place of this many postal codes, or a town of
/// [`TOWN_POPULATION`] people, wherever it lies (`typo_elsewhere`).
const TYPO_TOWN_CODES: usize = 2;
/// A query's word names places near a hamlet when one of them lies this close to it.
const SAID_NEAR_KM: f64 = 50.0;
/// The places a query's word names that are looked at; a word in more names says little
/// about where the place is.
const SAID_PLACES: usize = 2_000;

impl CountryCities {
    /// Whether a typo's answer `rank` (for the folded query) is a hamlet far from what the
    /// query says (issue 52): a place of one postal code, and no town, where the query
    /// names no region, while a word of the query (4 letters or more) that the hamlet's
    /// name lacks (in full or cut short) is a word of the names of places that all lie
    /// more than [`SAID_NEAR_KM`] from it. `La Hague`, a commune the data writes by its
    /// old communes (`Beaumont-Hague`, in Normandy), is not the hamlet `Lahage` 700 km
    /// away; a typo no other name holds as a word still finds its place (`Lahagr`; PH
    /// `Acaca` is Acacia, though `Bacacay` holds it inside a word).
    pub(super) fn typo_elsewhere(&self, folded: &str, rank: &Rank, filter: &Filter<'_>) -> bool {
        if filter.locates() || rank.codes >= TYPO_TOWN_CODES || rank.population >= TOWN_POPULATION {
            return false;
        }
        let Some(here) = self.place_point(rank.order) else {
            return false;
        };
        let has_word = |id: u32, word: &str| self.folded(id).split(' ').any(|w| w == word);
        // A word the hamlet's name writes in full or cut short (`Taboada`: `T.`).
        let written = |word: &str| {
            self.folded(rank.order)
                .split(' ')
                .any(|w| !w.is_empty() && word.starts_with(w))
        };
        folded
            .split(' ')
            .filter(|word| word.len() >= 4 && !written(word))
            .any(|word| {
                let mut named = self.containing(word);
                named.retain(|id| has_word(*id, word));
                !named.is_empty()
                    && named.len() <= SAID_PLACES
                    && named.iter().all(|id| {
                        self.place_point(*id).is_none_or(|(lat, lon)| {
                            haversine_km(lat, lon, here.0, here.1) > SAID_NEAR_KM
                        })
                    })
            })
    }

    /// The point of a place's first postal code.
    fn place_point(&self, id: u32) -> Option<(f64, f64)> {
        let span = self.places[id as usize].codes;
        let code = *self
            .place_codes
            .get(span.start as usize)
            .filter(|_| span.len > 0)?;
        let (lat, lon) = self.code_points[code as usize];
        (!lat.is_nan()).then(|| (f64::from(lat), f64::from(lon)))
    }

    /// The closest admitted place by edit distance on skeletons, among the places sharing
    /// the most padded trigrams with the query.
    pub(super) fn fuzzy(&self, query: &str, filter: &Filter<'_>) -> Option<Rank> {
        if query.len() < 3 {
            return None;
        }
        // Every candidate is at most `longest_typo_name` long: when that is more edits
        // away than a name of that length may be, none can be (the check `edits_within`
        // starts with), and the trigram count is not made (a query of 200 characters of
        // common trigrams, 'Frankfurt am Main' x 11, cost 50 µs here).
        let longest = self.longest_typo_name;
        if query.len() > longest && query.len() - longest > max_edits(query.len(), longest) {
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
            // The best of the cities' other names, and the most people of a place of the
            // data's own name among the closest ones (edits, people).
            let mut best_alias: Option<Rank> = None;
            let mut people: Option<(usize, u64)> = None;
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
                    if !same_numbers(query.as_bytes(), &buffer) {
                        continue;
                    }
                    if let Some(edits) = edits_within(query.as_bytes(), &buffer, limit)
                        .filter(|edits| edits_fit_the_difference(query.as_bytes(), &buffer, *edits))
                    {
                        let rank = Rank {
                            edits,
                            alias: place.is_alias(),
                            population: u64::from(place.population),
                            codes: place.codes.len as usize,
                            name_len: buffer.len(),
                            order: *id,
                        };
                        if rank.alias {
                            if best_alias.is_none_or(|b| rank < b) {
                                best_alias = Some(rank);
                            }
                        } else {
                            people = match people {
                                Some((e, p)) if e == edits => Some((e, p.max(rank.population))),
                                Some((e, _)) if e < edits => people,
                                _ => Some((edits, rank.population)),
                            };
                        }
                        if best.is_none_or(|b| rank < b) {
                            best = Some(rank);
                        }
                    }
                }
            }
            // The data's own names first among names equally close, unless another name
            // is a city of [`LARGE_CITY`] people and the gazetteer knows no place of those
            // names (`Corunna`: A Coruña's `Coruna`, 245,468 people, not the hamlet
            // `Coruña`; `Aflredo Chaves` stays the town Alfredo Chaves, not Veranópolis,
            // once so named; `Pnelem` the villages Pelem, not Kertosono, 60,782 people,
            // also called Pelem; `Gdualur` the towns Gudalur, not Cuddalore).
            match (best, best_alias) {
                (Some(b), Some(a)) if !b.alias && a.edits == b.edits => {
                    let known = people.is_some_and(|(_, p)| p > 0);
                    Some(if !known && a.population >= LARGE_CITY {
                        a
                    } else {
                        b
                    })
                }
                _ => best,
            }
        })
    }
}
