//! Where this server may call, or send a browser, on the operator's word: identity
//! providers, GitHub and Stripe. Only https, except http to a loopback host (the tests'
//! stand-ins), because a plain-http hop anywhere else hands the client secret, the Stripe
//! key and the answers that sign customers in or credit them to whoever is on the path
//! (security review 2026-11-28, L3). The one rule: `provider add` and `payments stripe`
//! refuse with it, the sign-in and the payment calls check it again at run time (on what
//! was stored before it existed, and on what a discovery document names), and the agent of
//! every outside call refuses a request that breaks it.

use std::net::{Ipv4Addr, Ipv6Addr};

/// The rule, as the refusals say it.
pub const RULE: &str = "https, or http only to a loopback host (127.0.0.0/8, [::1], localhost)";

/// Whether a request may go to `url`: https to any host, or http to a loopback host. The
/// URL is read as browsers read it (WHATWG), so an authorization endpoint is judged as the
/// browser sent there will reach it.
pub fn allowed(url: &str) -> bool {
    url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(|host| allowed_parts(u.scheme(), host)))
        .unwrap_or(false)
}

/// The same rule on a URL already split: its scheme and its host (an IPv6 address in
/// brackets, as a URL writes it).
pub fn allowed_parts(scheme: &str, host: &str) -> bool {
    if scheme.eq_ignore_ascii_case("https") {
        !host.is_empty()
    } else if scheme.eq_ignore_ascii_case("http") {
        loopback(host)
    } else {
        false
    }
}

/// 127.0.0.0/8, `[::1]` or `localhost`. Nothing else counts, not even a name that
/// resolves to one of them, nor an IPv4-mapped `[::ffff:127.0.0.1]`: the rule is read off
/// the URL, never off a resolver.
fn loopback(host: &str) -> bool {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse::<Ipv6Addr>().is_ok_and(|a| a.is_loopback());
    }
    if let Ok(v4) = host.parse::<Ipv4Addr>() {
        return v4.is_loopback();
    }
    host.eq_ignore_ascii_case("localhost")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_is_allowed_to_any_host() {
        for url in [
            "https://accounts.google.com",
            "https://sso.example.com/realms/main",
            "https://api.stripe.com",
            "HTTPS://Example.COM:8443/x",
            "https://10.0.0.5/",
        ] {
            assert!(allowed(url), "{url}");
        }
    }

    #[test]
    fn http_is_allowed_only_to_a_loopback_host() {
        for url in [
            "http://127.0.0.1:8080",
            "http://127.3.4.5/x",
            "http://[::1]:9000/token",
            "http://localhost:3000",
            "http://LOCALHOST",
        ] {
            assert!(allowed(url), "{url}");
        }
        for url in [
            "http://idp.example.com",
            "http://stripe-proxy.example.com",
            "http://10.0.0.5:8080",
            "http://128.0.0.1",
            "http://[::ffff:127.0.0.1]:80",
            "http://[::2]",
            "http://localhost.example.com",
            "http://127.0.0.1.example.com",
            "http://127.0.0.1@idp.example.com/",
        ] {
            assert!(!allowed(url), "{url}");
        }
    }

    #[test]
    fn other_schemes_and_non_urls_are_refused() {
        for url in [
            "",
            "idp.example.com",
            "ftp://127.0.0.1/",
            "file:///etc/passwd",
            "javascript:alert(1)",
            "https://",
            "//idp.example.com",
        ] {
            assert!(!allowed(url), "{url}");
        }
    }

    #[test]
    fn the_split_form_reads_hosts_as_request_lines_carry_them() {
        assert!(allowed_parts("https", "api.stripe.com"));
        assert!(allowed_parts("http", "127.0.0.1"));
        assert!(allowed_parts("http", "[::1]"));
        assert!(!allowed_parts("http", "::1"));
        assert!(!allowed_parts("http", "api.stripe.com"));
        assert!(!allowed_parts("https", ""));
        assert!(!allowed_parts("", "127.0.0.1"));
    }
}
