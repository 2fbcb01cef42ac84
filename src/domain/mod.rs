//! The rules of the service, free of I/O: parse, don't validate.

pub mod country;
pub mod postal_code;
pub mod text;

pub use country::CountryCode;
pub use postal_code::PostalQuery;
