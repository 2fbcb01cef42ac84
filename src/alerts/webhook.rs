//! One alert sent to a customer's webhook URL, as the Standard Webhooks specification
//! signs and sends it (issue 51): the signing secret, the signature, the check of the URL
//! when the customer sets it, and one delivery attempt. No database and no retries: the
//! sender that owns the outbox calls [`deliver`] and keeps its [`Outcome`].
//!
//! The URL is the customer's, so this is a request forgery aimed at us unless every
//! address it reaches is public: a URL naming `169.254.169.254`, a private network or
//! loopback would make the server read (or, by the status, probe) what only it can reach.
//! [`check_url`] refuses such a URL when it is set, but DNS can answer differently at send
//! time (a short TTL and a second answer: DNS rebinding), so the check is made again where
//! the connection is made: the agent's resolver (`PublicOnly`) resolves the host, refuses
//! the whole attempt if any address is not public, and hands the connector only the
//! addresses it checked. Nothing else resolves the name between that check and `connect`.
//! `allow_private` (`postal serve --allow-private-webhooks`) lifts the address rule for
//! tests and private networks, and allows plain http.

use std::fmt;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::sync::LazyLock;
use std::time::Duration;

use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

/// The whole of one attempt, from the lookup to the last byte read: the 10 s.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The longest webhook URL a customer may set, in characters.
pub const MAX_URL_CHARS: usize = 2000;

/// How much of an answer's body is read (and thrown away): only its status counts.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// What every secret starts with, so that a customer (and the Standard Webhooks
/// libraries) can tell it for a symmetric signing key.
const SECRET_PREFIX: &str = "whsec_";

/// Random bytes of a new secret: 256 bits, the key size of HMAC-SHA256, within the
/// specification's 24 to 64 bytes.
const SECRET_BYTES: usize = 32;

/// Names that reach a cloud provider's metadata service whatever address they resolve to
/// on the day (Google's resolves to 169.254.169.254 only inside Google Cloud).
const METADATA_HOSTS: &[&str] = &["metadata.google.internal"];

/// `user-agent` of every delivery: a receiver's logs can tell who called.
const USER_AGENT: &str = concat!("postal/", env!("CARGO_PKG_VERSION"), " (webhooks)");

/// Decodes a secret's key with or without its `=` padding, as the Standard Webhooks
/// libraries do (the Python one pads it before decoding).
const KEY_BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A new signing secret: "whsec_" + standard base64 of 32 random bytes (as the Standard
/// Webhooks libraries take it).
pub fn new_secret() -> String {
    // ThreadRng is a CSPRNG seeded from the OS (rand's documentation).
    let key: [u8; SECRET_BYTES] = rand::random();
    format!("{SECRET_PREFIX}{}", STANDARD.encode(key))
}

/// The `webhook-signature` header value: "v1," + base64(HMAC-SHA256(key,
/// "{id}.{timestamp}.{body}")), key = base64-decoded part after "whsec_". Err when the
/// secret is malformed.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Result<String, String> {
    let key = secret
        .strip_prefix(SECRET_PREFIX)
        .and_then(|encoded| KEY_BASE64.decode(encoded).ok())
        .filter(|key| !key.is_empty())
        .ok_or_else(|| "the signing secret is malformed (not whsec_ and base64)".to_owned())?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key)
        .map_err(|_| "the signing secret is malformed (its key)".to_owned())?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Ok(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// Checks a customer's webhook URL when they set it: an absolute https URL (http only
/// with `allow_private`) with a host, no user info, no fragment, at most
/// [`MAX_URL_CHARS`]; its host resolved, and (unless `allow_private`) every address
/// public (see [`non_public`]) and never `metadata.google.internal`. The error is the
/// customer's 400 text.
pub fn check_url(url: &str, allow_private: bool) -> Result<(), String> {
    let parsed = parse(url, allow_private)?;
    // Resolved even with `allow_private`: a name that does not resolve is a mistake there
    // too, better told now than by every delivery failing.
    for ip in addresses(&parsed)? {
        if !allow_private {
            refuse_non_public(ip)?;
        }
    }
    Ok(())
}

/// One delivery attempt's request: the event's id (the same on every attempt), the
/// attempt's time (Unix seconds) and the body exactly as signed.
pub struct Attempt<'a> {
    pub url: &'a str,
    pub secret: &'a str,
    pub id: &'a str,
    pub timestamp: i64,
    pub body: &'a [u8],
}

/// What became of an attempt: `delivered` on any 2xx; `result` says what happened, for
/// the customer's list of deliveries ("HTTP 200", "HTTP 500", "timed out after 10 s",
/// "refused: ...", "connection refused").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub delivered: bool,
    pub result: String,
}

impl Outcome {
    fn failed(result: impl Into<String>) -> Outcome {
        Outcome {
            delivered: false,
            result: result.into(),
        }
    }
}

/// One delivery attempt (blocking, at most [`TIMEOUT`]): POSTs the body with
/// `content-type: application/json` and the three `webhook-*` headers. Any 2xx is
/// delivered; a 3xx is not followed (the customer should set the new URL); every address
/// connected to is checked at connect time (the module's comment), unless
/// `allow_private`. At most 64 KiB of the answer's body is read, and ignored.
pub fn deliver(attempt: &Attempt, allow_private: bool) -> Outcome {
    let url = match parse(attempt.url, allow_private) {
        Ok(url) => url,
        Err(why) => return Outcome::failed(format!("refused: {why}")),
    };
    let signature = match sign(attempt.secret, attempt.id, attempt.timestamp, attempt.body) {
        Ok(signature) => signature,
        Err(why) => return Outcome::failed(why),
    };
    // The URL as parsed (WHATWG), so that ureq connects to the host checked here.
    let sent = agent(allow_private)
        .post(url.as_str())
        .header("content-type", "application/json")
        .header("webhook-id", attempt.id)
        .header("webhook-timestamp", attempt.timestamp.to_string())
        .header("webhook-signature", signature)
        .send(attempt.body);
    let mut answer = match sent {
        Ok(answer) => answer,
        Err(error) => return Outcome::failed(failure(error)),
    };
    let status = answer.status().as_u16();
    // Read and dropped: the receiver may expect its answer taken, never more than this.
    let _ = std::io::copy(
        &mut answer.body_mut().as_reader().take(MAX_ANSWER_BYTES),
        &mut std::io::sink(),
    );
    match status {
        200..=299 => Outcome {
            delivered: true,
            result: format!("HTTP {status}"),
        },
        300..=399 => Outcome::failed(format!("HTTP {status} (redirects are not followed)")),
        _ => Outcome::failed(format!("HTTP {status}")),
    }
}

/// Why an address is not public, as a refusal says it ("a loopback address"); `None` when
/// it is public. IPv4 inside IPv6 (mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4
/// `2002::/16`) is judged by its IPv4 address; IPv6 outside global unicast (`2000::/3`)
/// is refused whole.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    let kind = if a == 0 {
        // 0.0.0.0/8, "this network": Linux connects 0.0.0.0 to the host itself.
        "an unspecified address"
    } else if ip.is_loopback() {
        "a loopback address"
    } else if ip == Ipv4Addr::new(169, 254, 169, 254) {
        "a link-local address (cloud metadata)"
    } else if ip.is_link_local() {
        "a link-local address"
    } else if ip.is_private() {
        "a private address"
    } else if a == 100 && (b & 0xc0) == 64 {
        "a private address (carrier-grade NAT)"
    } else if ip.is_broadcast() {
        "the broadcast address"
    } else if ip.is_multicast() {
        "a multicast address"
    } else if ip.is_documentation() {
        "a documentation address"
    } else if a == 198 && (b & 0xfe) == 18 {
        "a benchmarking address"
    } else if (a == 192 && b == 0 && c == 0) || a >= 240 {
        "a reserved address"
    } else {
        return None;
    };
    Some(kind)
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let embedded = |high: u16, low: u16| Ipv4Addr::from((u32::from(high) << 16) | u32::from(low));
    if let Some(v4) = ip.to_ipv4_mapped() {
        return non_public_v4(v4);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return non_public_v4(embedded(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return non_public_v4(embedded(s[1], s[2]));
    }
    let kind = if ip.is_unspecified() {
        "an unspecified address"
    } else if ip.is_loopback() {
        "a loopback address"
    } else if (s[0] & 0xffc0) == 0xfe80 {
        "a link-local address"
    } else if (s[0] & 0xffc0) == 0xfec0 {
        "a private address (site-local)"
    } else if (s[0] & 0xfe00) == 0xfc00 {
        "a unique-local address"
    } else if (s[0] & 0xff00) == 0xff00 {
        "a multicast address"
    } else if (s[0] == 0x2001 && s[1] == 0x0db8) || (s[0] == 0x3fff && s[1] < 0x1000) {
        "a documentation address"
    } else if s[0] == 0x2001 && s[1] == 0x0002 && s[2] == 0 {
        "a benchmarking address"
    } else if (s[0] & 0xe000) != 0x2000 {
        "a reserved address"
    } else {
        return None;
    };
    Some(kind)
}

/// The customer's text for an address that is not public.
fn refuse_non_public(ip: IpAddr) -> Result<(), String> {
    match non_public(ip) {
        Some(kind) => Err(format!(
            "webhookUrl resolves to {ip}, {kind}: alerts go only to public addresses"
        )),
        None => Ok(()),
    }
}

/// The URL's own rules (no lookup): scheme, host, no user info or fragment, length, and
/// no metadata host name unless `allow_private`.
fn parse(url: &str, allow_private: bool) -> Result<url::Url, String> {
    let scheme_rule = || {
        if allow_private {
            "webhookUrl must be an http or https URL".to_owned()
        } else {
            "webhookUrl must be an https URL".to_owned()
        }
    };
    if url.chars().count() > MAX_URL_CHARS {
        return Err(format!(
            "webhookUrl must be at most {MAX_URL_CHARS} characters"
        ));
    }
    let parsed = url::Url::parse(url).map_err(|_| scheme_rule())?;
    match parsed.scheme() {
        "https" => {}
        "http" if allow_private => {}
        _ => return Err(scheme_rule()),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("webhookUrl must not contain a user name or password".to_owned());
    }
    if parsed.fragment().is_some() {
        return Err("webhookUrl must not contain a fragment (#...)".to_owned());
    }
    let Some(host) = parsed.host_str().filter(|h| !h.is_empty()) else {
        return Err("webhookUrl must name a host".to_owned());
    };
    if !allow_private && metadata_host(host) {
        return Err(format!(
            "webhookUrl names {host}, a cloud metadata service: alerts go only to public \
             addresses"
        ));
    }
    Ok(parsed)
}

/// Whether `host` names a metadata service (any case, with or without the root's dot).
fn metadata_host(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    METADATA_HOSTS
        .iter()
        .any(|name| host.eq_ignore_ascii_case(name))
}

/// Every address of the URL's host: the literal itself, or the name resolved (std's
/// resolver, at most [`TIMEOUT`]).
fn addresses(url: &url::Url) -> Result<Vec<IpAddr>, String> {
    let port = url.port_or_known_default().unwrap_or(443);
    let name = match url.host() {
        Some(url::Host::Ipv4(ip)) => return Ok(vec![IpAddr::V4(ip)]),
        Some(url::Host::Ipv6(ip)) => return Ok(vec![IpAddr::V6(ip)]),
        Some(url::Host::Domain(name)) => name.to_owned(),
        None => return Err("webhookUrl must name a host".to_owned()),
    };
    // std's lookup cannot be given a deadline: it runs on a thread of its own, left to
    // finish alone when it takes too long (as ureq's resolver does).
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    std::thread::spawn(move || {
        let found: Vec<IpAddr> = (name.as_str(), port)
            .to_socket_addrs()
            .map(|addrs| addrs.map(|a| a.ip()).collect())
            .unwrap_or_default();
        let _ = sender.send(found);
    });
    match receiver.recv_timeout(TIMEOUT) {
        Ok(found) if !found.is_empty() => Ok(found),
        Ok(_) => Err("webhookUrl's host does not resolve".to_owned()),
        Err(_) => Err(format!(
            "webhookUrl's host did not resolve within {} s",
            TIMEOUT.as_secs()
        )),
    }
}

/// The agent of deliveries, one per rule: no redirects, statuses as answers, [`TIMEOUT`]
/// in all, no proxy from the environment (a proxy resolves the host itself, past
/// `PublicOnly`), no pooled connections (each attempt resolves and checks again).
fn agent(allow_private: bool) -> &'static ureq::Agent {
    static CHECKED: LazyLock<ureq::Agent> = LazyLock::new(|| build_agent(false));
    static ANY: LazyLock<ureq::Agent> = LazyLock::new(|| build_agent(true));
    if allow_private { &ANY } else { &CHECKED }
}

fn build_agent(allow_private: bool) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_global(Some(TIMEOUT))
        .proxy(None)
        .max_idle_connections(0)
        .max_idle_connections_per_host(0)
        .user_agent(USER_AGENT)
        .build();
    ureq::Agent::with_parts(
        config,
        DefaultConnector::default(),
        PublicOnly { allow_private },
    )
}

/// The resolver of deliveries: ureq's own lookup, then every address checked before the
/// connector sees any (unless `allow_private`). A refusal fails the attempt before a
/// socket is opened.
#[derive(Debug)]
struct PublicOnly {
    allow_private: bool,
}

/// The refusal a [`PublicOnly`] resolver fails with: the customer's text.
#[derive(Debug)]
struct Refused(String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

impl Resolver for PublicOnly {
    fn resolve(
        &self,
        uri: &Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let refused = |why: String| ureq::Error::Other(Box::new(Refused(why)));
        if !self.allow_private && uri.host().is_some_and(metadata_host) {
            return Err(refused(format!(
                "webhookUrl names {}, a cloud metadata service: alerts go only to public \
                 addresses",
                uri.host().unwrap_or_default()
            )));
        }
        let found = DefaultResolver::default()
            .resolve(uri, config, timeout)
            .map_err(|error| match error {
                // std's lookup failing is the name not resolving, not a socket's error.
                ureq::Error::Io(_) => ureq::Error::HostNotFound,
                other => other,
            })?;
        if !self.allow_private {
            for address in &found {
                refuse_non_public(SocketAddr::ip(address)).map_err(refused)?;
            }
        }
        Ok(found)
    }
}

/// The customer's text for an attempt that got no answer.
fn failure(error: ureq::Error) -> String {
    let timed_out = || format!("timed out after {} s", TIMEOUT.as_secs());
    match error {
        ureq::Error::Timeout(_) => timed_out(),
        ureq::Error::HostNotFound => "webhookUrl's host does not resolve".to_owned(),
        ureq::Error::Other(other) => match other.downcast_ref::<Refused>() {
            Some(refused) => format!("refused: {refused}"),
            None => other.to_string(),
        },
        ureq::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
            std::io::ErrorKind::ConnectionReset => "connection reset".to_owned(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => timed_out(),
            _ => format!("connection failed: {io}"),
        },
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) => format!("TLS failed: {error}"),
        other => format!("failed: {other}"),
    }
}

#[cfg(test)]
mod tests;
