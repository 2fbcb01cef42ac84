//! A country's compact keys by rank, most packed into 8 bytes (`CountryCodes`' keys).

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::HashTable;

use crate::domain::word::word;

/// A country's compact keys by rank.
pub(super) struct Keys {
    /// By rank: the key packed ([`pack`]), or for a longer key [`LONG`] then its index in
    /// `long_keys`.
    pub(super) packed: Vec<[u8; 8]>,
    /// The keys [`pack`] cannot hold: `long_keys[long_ends[i - 1]..long_ends[i]]` is the
    /// i-th.
    pub(super) long_keys: String,
    pub(super) long_ends: Vec<u32>,
    pub(super) hasher: RandomState,
}

impl Keys {
    /// Appends the key of the next rank.
    pub(super) fn push(&mut self, key: &str) {
        let packed = pack(key.as_bytes()).unwrap_or_else(|| {
            self.long_keys.push_str(key);
            self.long_ends.push(self.long_keys.len() as u32);
            let index = (self.long_ends.len() - 1) as u64;
            let mut entry = (index << 8).to_le_bytes();
            entry[0] = LONG;
            entry
        });
        self.packed.push(packed);
    }

    /// A key's hash: of its packed integer when it packs, else of its bytes.
    #[inline]
    pub(super) fn hash(&self, key: &[u8]) -> u64 {
        match pack(key) {
            Some(packed) => self.hasher.hash_one(u64::from_le_bytes(packed)),
            None => self.hasher.hash_one(key),
        }
    }

    /// The rank of `key` in `table`, whose ranks were hashed by [`Keys::hash`]: a packed
    /// key is hashed and compared as one integer.
    #[inline]
    pub(super) fn find(&self, table: &HashTable<u32>, key: &[u8]) -> Option<u32> {
        match pack(key) {
            Some(packed) => {
                let packed = u64::from_le_bytes(packed);
                table.find(self.hasher.hash_one(packed), |r| {
                    self.packed
                        .get(*r as usize)
                        .is_some_and(|k| u64::from_le_bytes(*k) == packed)
                })
            }
            None => table.find(self.hasher.hash_one(key), |r| self.bytes(*r) == key),
        }
        .copied()
    }

    /// The key of `rank` ("" past the last).
    pub(super) fn bytes(&self, rank: u32) -> &[u8] {
        let Some(entry) = self.packed.get(rank as usize) else {
            return b"";
        };
        if entry[0] != LONG {
            return unpack(entry);
        }
        let index = (u64::from_le_bytes(*entry) >> 8) as u32;
        key_at(&self.long_keys, &self.long_ends, index).as_bytes()
    }
}

/// The first byte of a [`Keys::packed`] entry of a long key: never a byte of UTF-8.
pub(super) const LONG: u8 = 0xFF;

/// A key as 8 bytes, zero-padded: one integer to hash and compare. `None` for a key that
/// does not fit, or whose packing another key could share (a trailing zero byte), or that
/// starts as a long entry does (no text does).
#[inline]
pub(super) fn pack(key: &[u8]) -> Option<[u8; 8]> {
    if key.len() > 8 || key.last() == Some(&0) || key.first() == Some(&LONG) {
        return None;
    }
    Some(word(key).to_le_bytes())
}

/// The bytes of a packed key (up to its last non-zero byte).
fn unpack(packed: &[u8; 8]) -> &[u8] {
    let len = 8 - u64::from_le_bytes(*packed).leading_zeros() as usize / 8;
    &packed[..len]
}

pub(super) fn key_at<'a>(keys: &'a str, ends: &[u32], rank: u32) -> &'a str {
    let rank = rank as usize;
    let start = if rank == 0 {
        0
    } else {
        ends[rank - 1] as usize
    };
    &keys[start..ends[rank] as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(of: &[&str]) -> Keys {
        let mut keys = Keys {
            packed: Vec::new(),
            long_keys: String::new(),
            long_ends: Vec::new(),
            hasher: RandomState::default(),
        };
        for key in of {
            keys.push(key);
        }
        keys
    }

    #[test]
    fn a_key_of_up_to_eight_bytes_is_packed_and_a_longer_one_is_kept_whole() {
        let of = [
            "",
            "1",
            "1000001",
            "12345678",
            "123456789",
            "75754CEDEX15",
            "SW1A",
            "LV1001",
            "Ø1234",
            "東京1",
            "東京都1",
        ];
        let keys = keys(&of);
        for (rank, key) in of.iter().enumerate() {
            assert_eq!(keys.bytes(rank as u32), key.as_bytes(), "{key}");
            let packed = keys.packed[rank];
            assert_eq!(packed[0] == LONG, key.len() > 8, "{key}");
            assert_eq!(pack(key.as_bytes()).is_some(), key.len() <= 8, "{key}");
        }
        assert_eq!(keys.bytes(of.len() as u32), b"");
        assert_eq!(keys.long_keys, "12345678975754CEDEX15東京都1");
    }

    #[test]
    fn no_two_keys_share_a_packing() {
        assert_eq!(pack(b"A\0"), None);
        assert_eq!(pack(b"\xFFA"), None);
        assert_ne!(pack(b"A"), pack(b"A\0B"));
        assert_eq!(pack(b"AB"), Some(*b"AB\0\0\0\0\0\0"));
    }
}
