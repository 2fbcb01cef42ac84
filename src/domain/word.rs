//! Up to 8 bytes in a machine word, little-endian, and byte-wise tests on it (SWAR): the
//! short texts of the hot paths (postal codes, country codes) without a loop or a
//! `memcpy` call a text (issue 37).

/// The bytes of `bytes` (at most 8: more is a bug of the caller's, and panics) in a word,
/// little-endian, zero-padded: as `copy_from_slice` into `[0; 8]`, which calls `memcpy`
/// for a length not known at compile time (a tenth of `/api/validate-bulk`'s work a
/// record, issue 37). Two loads that may overlap, whose common bytes agree.
#[inline]
pub fn word(bytes: &[u8]) -> u64 {
    let len = bytes.len();
    let at = |i: usize| u64::from(bytes[i]) << (8 * i);
    match len {
        0 => 0,
        1..=3 => at(0) | at(len / 2) | at(len - 1),
        4..=8 => {
            let four = |from: usize| {
                let mut four = [0u8; 4];
                four.copy_from_slice(&bytes[from..from + 4]);
                u64::from(u32::from_le_bytes(four)) << (8 * from)
            };
            four(0) | four(len - 4)
        }
        _ => panic!("a word holds at most 8 bytes"),
    }
}

/// A byte repeated in each byte of a word.
pub const fn splat(b: u8) -> u64 {
    u64::from_le_bytes([b; 8])
}

/// The high bit of each byte of a word.
pub const HIGH: u64 = splat(0x80);

/// Of any word: the high bit of each byte below `b` (at most 0x80; a byte from 0x80 is
/// never below), exact up to the lowest such byte only: a byte above it may be flagged
/// by its borrow. Whether any byte of a prefix is below `b` is exact (`flags & mask`).
pub fn below(word: u64, b: u8) -> u64 {
    word.wrapping_sub(splat(b)) & !word & HIGH
}
