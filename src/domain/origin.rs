//! Web origins (RFC 6454: scheme, host, port) and the origin patterns of a publishable key.
//!
//! A pattern is `scheme://host[:port]`, `http` or `https`, with an optional leading `*.`
//! on the host that matches any subdomain (`https://*.shop.example` matches
//! `https://a.shop.example` and `https://a.b.shop.example`, not `https://shop.example`
//! itself: list both when both serve the form). Hosts compare case-insensitively, a port
//! equal to its scheme's default is the same origin as none (`https://a:443` is
//! `https://a`). A pattern is stored in its canonical text (`Display`), so what `key list`
//! shows is what is compared.

use std::fmt;

/// `http` or `https`: the only schemes a page that runs a form is served from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// A browser's `Origin`: scheme, lower-case host, port (the default made explicit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    scheme: Scheme,
    host: String,
    port: u16,
}

/// An allowed origin of a publishable key: an exact origin, or every subdomain of a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OriginPattern {
    scheme: Scheme,
    /// Without the `*.` of a wildcard.
    host: String,
    subdomains: bool,
    port: u16,
}

/// Why a pattern given to `postal key create --origin` was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid origin {text:?}: {reason} (an origin is scheme://host[:port], e.g. https://shop.example or https://*.shop.example)"
)]
pub struct InvalidOrigin {
    text: String,
    reason: &'static str,
}

impl Origin {
    /// The value of an `Origin` header; `None` for `null` and anything that is not an
    /// http(s) origin (such a request is simply not from an allowed origin).
    pub fn parse(header: &str) -> Option<Origin> {
        let (scheme, host, port) = split(header).ok()?;
        if host.starts_with("*.") {
            return None;
        }
        Some(Origin { scheme, host, port })
    }
}

impl OriginPattern {
    pub fn parse(text: &str) -> Result<OriginPattern, InvalidOrigin> {
        let (scheme, host, port) = split(text).map_err(|reason| InvalidOrigin {
            text: text.to_owned(),
            reason,
        })?;
        let (host, subdomains) = match host.strip_prefix("*.") {
            Some(rest) => (rest.to_owned(), true),
            None => (host, false),
        };
        Ok(OriginPattern {
            scheme,
            host,
            subdomains,
            port,
        })
    }

    pub fn matches(&self, origin: &Origin) -> bool {
        if self.scheme != origin.scheme || self.port != origin.port {
            return false;
        }
        if !self.subdomains {
            return origin.host == self.host;
        }
        origin
            .host
            .strip_suffix(self.host.as_str())
            .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.'))
    }
}

/// Scheme, lower-case host (a leading `*.` kept), effective port.
fn split(text: &str) -> Result<(Scheme, String, u16), &'static str> {
    let scheme_of = |prefix: &str| {
        text.get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
            .then(|| &text[prefix.len()..])
    };
    let (scheme, rest) = if let Some(rest) = scheme_of("https://") {
        (Scheme::Https, rest)
    } else if let Some(rest) = scheme_of("http://") {
        (Scheme::Http, rest)
    } else {
        return Err("the scheme must be http:// or https://");
    };
    if rest.contains(['/', '?', '#']) {
        return Err("an origin has no path, query or fragment");
    }
    if rest.contains('@') {
        return Err("an origin has no user information");
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) => {
            let port: u16 = port
                .parse()
                .ok()
                .filter(|p| *p > 0 && port.bytes().all(|b| b.is_ascii_digit()))
                .ok_or("the port must be a number from 1 to 65535")?;
            (host, port)
        }
        None => (rest, scheme.default_port()),
    };
    let labels = host.strip_prefix("*.").unwrap_or(host);
    let valid_label = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if host.len() > 253 || !labels.split('.').all(valid_label) {
        return Err("the host must be a DNS name or IPv4 address in ASCII (punycode for others)");
    }
    Ok((scheme, host.to_ascii_lowercase(), port))
}

fn write(
    f: &mut fmt::Formatter<'_>,
    scheme: Scheme,
    wildcard: bool,
    host: &str,
    port: u16,
) -> fmt::Result {
    let star = if wildcard { "*." } else { "" };
    write!(f, "{}://{star}{host}", scheme.as_str())?;
    if port != scheme.default_port() {
        write!(f, ":{port}")?;
    }
    Ok(())
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write(f, self.scheme, false, &self.host, self.port)
    }
}

impl fmt::Display for OriginPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write(f, self.scheme, self.subdomains, &self.host, self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(pattern: &str, origin: &str) -> bool {
        OriginPattern::parse(pattern)
            .unwrap()
            .matches(&Origin::parse(origin).unwrap())
    }

    #[test]
    fn an_exact_pattern_matches_its_origin_only() {
        assert!(allowed("https://shop.example", "https://shop.example"));
        assert!(allowed("https://shop.example", "https://SHOP.example:443"));
        assert!(allowed("https://Shop.Example:443", "https://shop.example"));
        assert!(!allowed("https://shop.example", "http://shop.example"));
        assert!(!allowed(
            "https://shop.example",
            "https://shop.example:8443"
        ));
        assert!(!allowed("https://shop.example", "https://a.shop.example"));
        assert!(!allowed("https://shop.example", "https://evilshop.example"));
        assert!(!allowed(
            "https://shop.example",
            "https://shop.example.evil"
        ));
        assert!(allowed("http://127.0.0.1:8000", "http://127.0.0.1:8000"));
        assert!(!allowed("http://127.0.0.1:8000", "http://127.0.0.1:8001"));
    }

    #[test]
    fn a_wildcard_matches_subdomains_not_the_host_itself() {
        assert!(allowed("https://*.shop.example", "https://a.shop.example"));
        assert!(allowed(
            "https://*.shop.example",
            "https://a.b.shop.example"
        ));
        assert!(!allowed("https://*.shop.example", "https://shop.example"));
        assert!(!allowed(
            "https://*.shop.example",
            "https://evilshop.example"
        ));
        assert!(Origin::parse("https://.shop.example").is_none());
        assert!(!allowed("https://*.shop.example", "http://a.shop.example"));
    }

    #[test]
    fn patterns_print_canonically() {
        let canonical = |text: &str| OriginPattern::parse(text).unwrap().to_string();
        assert_eq!(
            canonical("HTTPS://Shop.Example:443"),
            "https://shop.example"
        );
        assert_eq!(
            canonical("http://*.A.example:8080"),
            "http://*.a.example:8080"
        );
        assert_eq!(
            Origin::parse("http://x.example:80").unwrap().to_string(),
            "http://x.example"
        );
    }

    #[test]
    fn what_is_not_an_origin_is_refused_with_its_reason() {
        let reason = |text: &str| OriginPattern::parse(text).unwrap_err().reason;
        assert_eq!(
            reason("shop.example"),
            "the scheme must be http:// or https://"
        );
        assert_eq!(
            reason("ftp://shop.example"),
            "the scheme must be http:// or https://"
        );
        assert_eq!(
            reason("https://shop.example/"),
            "an origin has no path, query or fragment"
        );
        assert_eq!(
            reason("https://shop.example:0"),
            "the port must be a number from 1 to 65535"
        );
        assert_eq!(
            reason("https://shop.example:+80"),
            "the port must be a number from 1 to 65535"
        );
        assert_eq!(
            reason("https://a.*.example"),
            "the host must be a DNS name or IPv4 address in ASCII (punycode for others)"
        );
        assert_eq!(
            reason("https://*"),
            "the host must be a DNS name or IPv4 address in ASCII (punycode for others)"
        );
        assert_eq!(
            reason("https://bücher.example"),
            "the host must be a DNS name or IPv4 address in ASCII (punycode for others)"
        );
        assert_eq!(
            reason("https://u@shop.example"),
            "an origin has no user information"
        );
        assert!(Origin::parse("null").is_none());
        assert!(Origin::parse("https://*.shop.example").is_none());
        let message = OriginPattern::parse("shop.example")
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "invalid origin \"shop.example\": the scheme must be http:// or https:// (an origin is scheme://host[:port], e.g. https://shop.example or https://*.shop.example)"
        );
    }
}
