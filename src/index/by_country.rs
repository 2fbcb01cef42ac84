//! `ByCountry<T>`: a country's data found by the country code's slot, without hashing.
//!
//! `/api/validate-bulk` finds two of a country's tables for each of up to 1,000 records;
//! a `HashMap` hashed the code each time (issue 37). A country code is two letters, so a
//! table of 676 small slots is an exact index.

use crate::domain::CountryCode;

/// No country in this slot.
const EMPTY: u16 = u16::MAX;

/// Each country's `T`, in the order inserted.
pub struct ByCountry<T> {
    /// Slot of a code -> its place in `items`, or `EMPTY`.
    slots: Box<[u16]>,
    items: Vec<(CountryCode, T)>,
}

impl<T> Default for ByCountry<T> {
    fn default() -> Self {
        ByCountry {
            slots: vec![EMPTY; CountryCode::SLOTS].into_boxed_slice(),
            items: Vec::new(),
        }
    }
}

impl<T> ByCountry<T> {
    /// Sets the country's `T` (replacing one there).
    pub fn insert(&mut self, country: CountryCode, value: T) {
        let slot = &mut self.slots[country.slot()];
        match self.items.get_mut(usize::from(*slot)) {
            Some(item) => item.1 = value,
            None => {
                // 676 slots at most, far below `EMPTY`.
                *slot = self.items.len() as u16;
                self.items.push((country, value));
            }
        }
    }

    pub fn get(&self, country: CountryCode) -> Option<&T> {
        let at = *self.slots.get(country.slot())?;
        self.items.get(usize::from(at)).map(|(_, value)| value)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&CountryCode, &T)> {
        self.items.iter().map(|(country, value)| (country, value))
    }

    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.items.iter().map(|(_, value)| value)
    }
}

impl<T> FromIterator<(CountryCode, T)> for ByCountry<T> {
    fn from_iter<I: IntoIterator<Item = (CountryCode, T)>>(iter: I) -> Self {
        let mut table = ByCountry::default();
        for (country, value) in iter {
            table.insert(country, value);
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_country_finds_its_own_value_and_no_other() {
        let de = CountryCode::parse("DE").unwrap();
        let mut table: ByCountry<&str> =
            [(CountryCode::US, "us"), (de, "de")].into_iter().collect();
        assert_eq!(table.get(CountryCode::US), Some(&"us"));
        assert_eq!(table.get(de), Some(&"de"));
        assert_eq!(table.get(CountryCode::JP), None);
        table.insert(de, "de again");
        assert_eq!(table.get(de), Some(&"de again"));
        assert_eq!(table.len(), 2);
    }
}
