//! The typed city of a form against its postal code (`/api/verify`, `/api/verify-bulk`):
//! the code's places (`postal`) and the city matcher of `/api/city` (`city`), in memory.
//!
//! The steps, first answer wins (docs/browser.md):
//! 1. the city is one of the code's places after folding (or a half of a bilingual name,
//!    `Elx/Elche`), in the region typed if any: `match`;
//! 2. `/api/city` with the city, in the region typed (else the code's own region), matches
//!    a place name exactly and its codes hold this one: `match`;
//! 3. the city is a place name of the country, exactly, elsewhere: `conflict` (a real
//!    town is not a typo of this code's);
//! 4. what step 2 matched otherwise (an alias `Munich`, an admin city `Tokyo To`, a typo)
//!    holds this code: `fuzzy_match` naming it;
//! 5. the city is a typo of one of the code's places (the edit bound of `/api/city`):
//!    `fuzzy_match` naming that place;
//! 6. else `conflict`.

use super::city::{CityQuery, MatchedPlace};
use super::postal::{CodePlace, PostalIndex};
use crate::domain::CountryCode;
use crate::domain::city_match::{edits_within, max_edits};
use crate::domain::postal_code::ZipInput;
use crate::domain::regions;
use crate::domain::text::{fold, fold_at_most, written_in_latin};

/// A typed address line to check: the city, and the region if the form has one.
#[derive(Debug, Clone)]
pub struct TypedCity<'a> {
    pub city: &'a str,
    /// Matches admin name1 or admin code1.
    pub state: Option<&'a str>,
    /// Matches admin code1.
    pub st: Option<&'a str>,
}

/// The verdict on a typed city.
#[derive(Debug, Clone, PartialEq)]
pub enum Verification {
    Match,
    /// A typo, an alias, another name or the admin city of one of the code's places:
    /// what it matched.
    FuzzyMatch(MatchedPlace),
    /// The city is not at this code (or not in the region typed): the code's places.
    Conflict(Vec<CodePlace>),
    /// No such code in the country.
    NotFound,
}

impl PostalIndex {
    /// Is `typed` a place of the postal code `zipcode` of `country`? One pass over the
    /// code's places and at most two city searches.
    pub fn verify(
        &self,
        country: CountryCode,
        zipcode: &ZipInput,
        typed: &TypedCity<'_>,
    ) -> Verification {
        let Some(code) = self.places(country, zipcode) else {
            return Verification::NotFound;
        };
        // Longer than any name a place has, with codes and the country around it: no
        // step can match it, so it is not folded further (a hostile record of 200 `㎯`
        // is 1,400 bytes folded).
        let longest = self.city().longest_matchable(country);
        let Some(city) = fold_at_most(typed.city, longest) else {
            return Verification::Conflict(code.places);
        };
        // A region by any name the region table knows (`Bavaria` is `Bayern`).
        let state = typed
            .state
            .map(|s| regions::data_name(country.as_str(), &fold(s)).to_string());
        let st = typed.st.map(fold);
        let in_region = |p: &CodePlace| {
            state.as_deref().is_none_or(|s| {
                regions::data_name(country.as_str(), &fold(&p.state)) == s || fold(&p.st) == s
            }) && st.as_deref().is_none_or(|s| fold(&p.st) == s)
        };
        let places: Vec<&CodePlace> = code.places.iter().filter(|p| in_region(p)).collect();
        if city.is_empty() {
            return Verification::Conflict(code.places);
        }
        // 1. One of its places, or a half of one's bilingual name.
        if places.iter().any(|p| names_of(&p.city).any(|n| n == city)) {
            return Verification::Match;
        }
        // 2. What /api/city answers, in the region typed or the code's own.
        let region = match (&state, &st) {
            (None, None) => places
                .first()
                .map(|p| fold(&p.state))
                .filter(|s| !s.is_empty()),
            _ => state.clone(),
        };
        let asked = CityQuery {
            country,
            city: city.clone(),
            state: region,
            st: st.clone(),
            latin: written_in_latin(typed.city),
        };
        let found = self.city().find(&asked);
        let here = found
            .as_ref()
            .filter(|f| !places.is_empty() && f.zipcodes.binary_search(&code.zipcode).is_ok());
        if here.is_some_and(|f| f.fuzzy.is_none()) {
            return Verification::Match;
        }
        // 3. A place of the country of exactly that name, elsewhere: a real town, not a
        // typo of this code's.
        let anywhere = CityQuery {
            country,
            city: city.clone(),
            state: None,
            st: None,
            latin: written_in_latin(typed.city),
        };
        let exact_elsewhere = match &found {
            Some(found) if found.fuzzy.is_none() => true,
            _ => self
                .city()
                .find(&anywhere)
                .is_some_and(|f| f.fuzzy.is_none()),
        };
        if exact_elsewhere {
            return Verification::Conflict(code.places);
        }
        // What /api/city took the name for (an alias, an admin city, a typo) holds this
        // code.
        if let Some(named) = here.and_then(|f| f.fuzzy.clone()) {
            return Verification::FuzzyMatch(named);
        }
        // 5. A typo of one of its places.
        let closest = places
            .iter()
            .filter_map(|p| {
                let name = fold(&p.city);
                let max = max_edits(city.len(), name.len());
                edits_within(city.as_bytes(), name.as_bytes(), max).map(|d| (d, *p))
            })
            .min_by_key(|(d, _)| *d);
        if let Some((_, place)) = closest {
            return Verification::FuzzyMatch(MatchedPlace {
                city: place.city.clone(),
                state: place.state.clone(),
                st: place.st.clone(),
            });
        }
        Verification::Conflict(code.places)
    }
}

/// The folded names a place answers to: its name, and each half of a bilingual one
/// (`Elx/Elche`, `Biel/Bienne`).
fn names_of(city: &str) -> impl Iterator<Item = String> + '_ {
    let halves = city.contains('/').then(|| city.split('/').map(fold));
    std::iter::once(fold(city)).chain(halves.into_iter().flatten())
}
