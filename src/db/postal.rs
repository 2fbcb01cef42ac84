//! Reads of the postal data: lookup by key, city search, validation.
