//! Address blocks (`10.0.0.0/8`, `2001:db8::/32`, or one address): the proxies whose
//! `X-Forwarded-For` `postal serve --trusted-proxy` believes.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An IPv4 or IPv6 network: the address with its host bits cleared, and the prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid address block {0:?} (expected an IP address or ADDRESS/PREFIX, e.g. 10.0.0.0/8)")]
pub struct InvalidCidr(String);

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        // An IPv4 client seen through an IPv6 socket (::ffff:a.b.c.d) is that IPv4 client.
        let ip = ip.to_canonical();
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                mask(u32::from(ip).into(), self.prefix, 32) == u128::from(u32::from(net))
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                mask(u128::from(ip), self.prefix, 128) == u128::from(net)
            }
            _ => false,
        }
    }
}

/// `bits` with all but the first `prefix` of its `width` bits cleared.
fn mask(bits: u128, prefix: u8, width: u8) -> u128 {
    if prefix == 0 {
        return 0;
    }
    let host_bits = u32::from(width - prefix);
    bits >> host_bits << host_bits
}

impl FromStr for Cidr {
    type Err = InvalidCidr;

    fn from_str(text: &str) -> Result<Cidr, InvalidCidr> {
        let invalid = || InvalidCidr(text.to_owned());
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let address: IpAddr = address.parse().map_err(|_| invalid())?;
        let width = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= width)
                .ok_or_else(invalid)?,
            Some(_) => return Err(invalid()),
            None => width,
        };
        let network = match address {
            IpAddr::V4(a) => IpAddr::V4((mask(u32::from(a).into(), prefix, 32) as u32).into()),
            IpAddr::V6(a) => IpAddr::V6(mask(u128::from(a), prefix, 128).into()),
        };
        Ok(Cidr { network, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn blocks_contain_their_addresses() {
        let private: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(private.contains(ip("10.200.3.4")));
        assert!(!private.contains(ip("11.0.0.1")));
        assert!(private.contains(ip("::ffff:10.1.2.3")));
        let one: Cidr = "192.0.2.7".parse().unwrap();
        assert!(one.contains(ip("192.0.2.7")) && !one.contains(ip("192.0.2.8")));
        let v6: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:1::5")) && !v6.contains(ip("2001:db9::1")));
        assert!(!v6.contains(ip("10.0.0.1")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("8.8.8.8")));
        assert_eq!(
            "10.1.2.3/8".parse::<Cidr>().unwrap().to_string(),
            "10.0.0.0/8"
        );
    }

    #[test]
    fn what_is_not_a_block_is_refused() {
        for text in [
            "10.0.0.0/33",
            "10.0.0.0/",
            "10.0.0/8",
            "localhost",
            "::1/129",
            "1.2.3.4/+8",
        ] {
            assert_eq!(
                text.parse::<Cidr>(),
                Err(InvalidCidr(text.to_owned())),
                "{text}"
            );
        }
    }
}
