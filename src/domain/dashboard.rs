//! The rules of the account dashboard (docs/account.md), the same for the file and the
//! cluster's ledger: how long a session lives, what a provider's name and a key's name
//! may be, how many live keys an account holds, and the random secrets a sign-in and a
//! session are made of.

use rand::RngExt;
use sha2::{Digest, Sha256};

/// A session ends after this long without a request.
pub const IDLE_SECS: i64 = 30 * 60;
/// A session ends this long after its sign-in, used or not.
pub const ABSOLUTE_SECS: i64 = 12 * 60 * 60;
/// A sign-in must come back from its provider within this long.
pub const SIGNIN_SECS: i64 = 10 * 60;
/// The most live (not revoked) keys an account holds.
pub const MAX_LIVE_KEYS: u64 = 20;
/// The longest key name.
pub const MAX_KEY_NAME_CHARS: usize = 100;

/// Whether a session signed in at `created` and last used at `seen` has ended by `now`
/// (unix seconds).
pub fn session_expired(created: i64, seen: i64, now: i64) -> bool {
    now - seen >= IDLE_SECS || now - created >= ABSOLUTE_SECS
}

/// How stale a session's stored last use may be: it is written when it is this old (or
/// older), so a signed-in customer's requests write at most once a minute (the idle
/// timeout is then kept to the minute).
pub const SEEN_EVERY_SECS: i64 = 60;

/// Whether a session last stored as used at `seen` is to be marked used at `now`.
pub fn session_seen_is_stale(seen: i64, now: i64) -> bool {
    now - seen >= SEEN_EVERY_SECS
}

/// A secret of 256 random bits as 43 base64url characters (no padding): session ids,
/// sign-in states, nonces, CSRF tokens.
pub fn random_token() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut rng = rand::rng();
    (0..43)
        .map(|_| char::from(ALPHABET[rng.random_range(0..64)]))
        .collect()
}

/// Whether `text` has the shape of a [`random_token`]: 43 base64url characters.
pub fn is_token(text: &str) -> bool {
    text.len() == 43
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// What the database keeps of a session id or a sign-in state: its SHA-256.
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A session's public id, by which the customer lists and ends it: `ses_` + 12 characters.
pub fn new_session_id() -> String {
    format!("ses_{}", &random_token()[..12])
}

/// The shortest and longest grace of a rolled key, in hours.
pub const GRACE_HOURS: std::ops::RangeInclusive<u64> = 1..=168;

/// A rolled key's grace in seconds, checked.
pub fn grace_secs(hours: u64) -> Result<i64, DashboardRefused> {
    match GRACE_HOURS.contains(&hours) {
        true => Ok(i64::try_from(hours * 3600).unwrap_or(i64::MAX)),
        false => Err(DashboardRefused::Grace),
    }
}

/// Accounts one client address may make by signing in per UTC day, unless `postal serve
/// --max-new-accounts-per-ip-day` says otherwise: each gets the free allowance, so an open
/// provider (any Google account) would otherwise hand out allowances without end.
pub const NEW_ACCOUNTS_PER_IP_DAY: u32 = 20;

/// The sign-in page's text when an address made its day's accounts (429).
pub const TOO_MANY_NEW_ACCOUNTS: &str = "Too many new accounts from your address today; try \
     again tomorrow or sign in to an existing account.";

/// How a client address is counted for new accounts, as the per-IP limits count it
/// (`api::access::counted_as`: an IPv4 address, an IPv6 /64, IPv4-mapped as IPv4): its
/// text, an IPv6 network with its `/64`.
pub fn address_key(counted: Option<std::net::IpAddr>) -> String {
    match counted {
        Some(ip @ std::net::IpAddr::V4(_)) => ip.to_string(),
        Some(ip @ std::net::IpAddr::V6(_)) => format!("{ip}/64"),
        None => "unknown".to_owned(),
    }
}

/// The start of the UTC day of `now` (unix seconds): new accounts count from there.
pub fn day_start(now: i64) -> i64 {
    now - now.rem_euclid(86_400)
}

/// Why a dashboard change was refused: the texts, word for word (docs/account.md).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DashboardRefused {
    #[error("provider name must be 1 to 32 characters of a-z, 0-9 and '-'")]
    ProviderName,
    #[error("key name must be 1 to 100 characters")]
    KeyName,
    #[error("an account holds at most 20 live keys; revoke one first")]
    TooManyKeys,
    #[error("new accounts are closed on this server")]
    SignupsClosed,
    #[error("this identity belongs to another account")]
    IdentityElsewhere,
    #[error("this identity was unlinked from its account")]
    IdentityUnlinked,
    #[error("an account keeps at least one identity")]
    LastIdentity,
    #[error("graceHours must be 1 to 168 (7 days)")]
    Grace,
    #[error("a revoked key cannot be rolled")]
    RollRevoked,
    #[error("this key was already rolled: roll its successor")]
    RolledAlready,
}

words! {
    /// How a provider signs customers in (`postal provider add --kind`): `oidc` any
    /// OpenID Connect issuer by discovery; `google` and `microsoft` OpenID Connect with
    /// the issuer filled in (Microsoft's multi-tenant issuer checked against the token's
    /// tenant); `github` GitHub's OAuth web flow and REST API (not OpenID Connect).
    pub enum ProviderKind {
        Oidc => "oidc",
        Google => "google",
        Github => "github",
        Microsoft => "microsoft",
    }
}

words! {
    /// What a sign-in under way is for: a sign-in (which may make an account), a link of
    /// another identity to the signed-in account, or a session's sign-in again (before a
    /// change that needs a recent one). The two last complete only in the session that
    /// started them.
    pub enum SignInPurpose {
        SignIn => "signin",
        Link => "link",
        Again => "reauth",
    }
}

/// How long a session's last sign-in stays recent enough for a change of keys, limits,
/// identities or money (a roll, a revoke, a limit change, an unlink, a top-up); older,
/// the change asks the customer to sign in again.
pub const RECENT_SIGNIN_SECS: i64 = 15 * 60;

impl ProviderKind {
    /// The name a customer knows the provider by, on the sign-in page; `None` for a
    /// provider of any issuer (`oidc`), shown by its name.
    pub fn label(self) -> Option<&'static str> {
        match self {
            ProviderKind::Oidc => None,
            ProviderKind::Google => Some("Google"),
            ProviderKind::Github => Some("GitHub"),
            ProviderKind::Microsoft => Some("Microsoft"),
        }
    }
}

/// Google's issuer (`--kind google`).
pub const GOOGLE_ISSUER: &str = "https://accounts.google.com";
/// GitHub's address (`--kind github` without `--github-url`).
pub const GITHUB_URL: &str = "https://github.com";
/// Microsoft's sign-in base (`--kind microsoft` without `--issuer`): the issuer is
/// `{base}/{tenant}/v2.0`.
pub const MICROSOFT_BASE: &str = "https://login.microsoftonline.com";

/// The REST API of the GitHub at `url`: `https://api.github.com` for github.com, and
/// `{url}/api/v3` for a GitHub Enterprise Server (as GitHub documents it).
pub fn github_api(url: &str) -> String {
    match url.trim_end_matches('/') {
        GITHUB_URL => "https://api.github.com".to_owned(),
        other => format!("{other}/api/v3"),
    }
}

/// The issuer a Microsoft ID token of tenant `tid` must name, from the issuer its
/// metadata names: a multi-tenant endpoint's (`{base}/{tenantid}/v2.0`) with the
/// placeholder replaced by `tid`; a tenant's own (`{base}/{id}/v2.0`) only when `tid` is
/// that tenant (`None` otherwise: a token of another tenant than the metadata's).
pub fn microsoft_issuer(metadata_issuer: &str, tid: &str) -> Option<String> {
    if metadata_issuer.contains("{tenantid}") {
        return Some(metadata_issuer.replace("{tenantid}", tid));
    }
    let tenant = metadata_issuer.strip_suffix("/v2.0")?.rsplit('/').next()?;
    (tenant == tid).then(|| metadata_issuer.to_owned())
}

/// Whether `named`, the issuer a Microsoft metadata document names, is one the
/// configured `issuer` (`{base}/{tenant}/v2.0`) may name: of the same base, one path
/// segment (a tenant's id, or the `{tenantid}` placeholder) before `/v2.0`.
pub fn microsoft_metadata_fits(issuer: &str, named: &str) -> bool {
    let base = |url: &str| -> Option<(String, String)> {
        let rest = url.strip_suffix("/v2.0")?;
        let (base, tenant) = rest.rsplit_once('/')?;
        Some((base.to_owned(), tenant.to_owned()))
    };
    match (base(issuer), base(named)) {
        (Some((ours, _)), Some((theirs, tenant))) => {
            ours == theirs && !tenant.is_empty() && !tenant.contains(['?', '#'])
        }
        _ => false,
    }
}

/// A Microsoft tenant id as `--allowed-tenant` takes it: a GUID, lower-cased as tokens'
/// `tid` carry it.
pub fn tenant_id(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let groups: Vec<&str> = lower.split('-').collect();
    let shape = [8, 4, 4, 4, 12];
    let ok = groups.len() == 5
        && groups
            .iter()
            .zip(shape)
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()));
    ok.then_some(lower)
}

/// An organization login of GitHub (`--allowed-org`) or a Microsoft tenant as `--tenant`
/// takes it (a GUID, a domain, `common`...): 1 to 100 of a-z, A-Z, 0-9, '-', '.' and '_',
/// at least one a letter or a digit (never `.` or `..`, which would change a path).
pub fn allowed_name(name: &str) -> Option<&str> {
    let ok = (1..=100).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        && name.bytes().any(|b| b.is_ascii_alphanumeric());
    ok.then_some(name)
}

/// A provider's name, checked: it is part of the redirect URI.
pub fn provider_name(name: &str) -> Result<&str, DashboardRefused> {
    let ok = (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    ok.then_some(name).ok_or(DashboardRefused::ProviderName)
}

/// A key's name as given, trimmed; `None` when blank.
pub fn key_name(name: Option<&str>) -> Result<Option<String>, DashboardRefused> {
    match name.map(str::trim).filter(|n| !n.is_empty()) {
        None => Ok(None),
        Some(n) if n.chars().count() <= MAX_KEY_NAME_CHARS && !n.chars().any(char::is_control) => {
            Ok(Some(n.to_string()))
        }
        Some(_) => Err(DashboardRefused::KeyName),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_accounts_count_per_counted_address_and_utc_day() {
        let v4: std::net::IpAddr = "203.0.113.7".parse().unwrap();
        let v6: std::net::IpAddr = "2001:db8:1:2::".parse().unwrap();
        assert_eq!(address_key(Some(v4)), "203.0.113.7");
        assert_eq!(address_key(Some(v6)), "2001:db8:1:2::/64");
        assert_eq!(address_key(None), "unknown");
        assert_eq!(day_start(86_400 * 20_000 + 3_599), 86_400 * 20_000);
        assert_eq!(day_start(86_400 * 20_000), 86_400 * 20_000);
    }

    #[test]
    fn a_session_ends_when_idle_or_old() {
        assert!(!session_expired(0, 0, IDLE_SECS - 1));
        assert!(session_expired(0, 0, IDLE_SECS));
        assert!(!session_expired(0, ABSOLUTE_SECS - 10, ABSOLUTE_SECS - 1));
        assert!(session_expired(0, ABSOLUTE_SECS - 10, ABSOLUTE_SECS));
    }

    #[test]
    fn only_the_shape_of_a_token_is_one() {
        assert!(is_token(&random_token()));
        for junk in [
            "",
            "junk",
            &"a".repeat(42),
            &"a".repeat(44),
            &format!("{}=", "a".repeat(42)),
        ] {
            assert!(!is_token(junk), "{junk}");
        }
    }

    #[test]
    fn tokens_are_43_url_safe_characters_and_differ() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 43);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
        assert_ne!(a, b);
        assert_eq!(new_session_id().len(), 16);
    }

    #[test]
    fn a_grace_is_1_hour_to_7_days() {
        assert_eq!(grace_secs(1), Ok(3600));
        assert_eq!(grace_secs(168), Ok(604_800));
        assert_eq!(grace_secs(0), Err(DashboardRefused::Grace));
        assert_eq!(grace_secs(169), Err(DashboardRefused::Grace));
    }

    #[test]
    fn provider_kinds_name_their_places() {
        assert_eq!(github_api("https://github.com/"), "https://api.github.com");
        assert_eq!(
            github_api("https://git.example.com"),
            "https://git.example.com/api/v3"
        );
        let common = "https://login.microsoftonline.com/{tenantid}/v2.0";
        assert_eq!(
            microsoft_issuer(common, "9188040d").as_deref(),
            Some("https://login.microsoftonline.com/9188040d/v2.0")
        );
        let own = "https://login.microsoftonline.com/9188040d/v2.0";
        assert_eq!(microsoft_issuer(own, "9188040d").as_deref(), Some(own));
        assert_eq!(microsoft_issuer(own, "other"), None);
        let configured = "https://login.microsoftonline.com/common/v2.0";
        assert!(microsoft_metadata_fits(configured, common));
        assert!(microsoft_metadata_fits(configured, own));
        for other in [
            "https://login.microsoftonline.com/a/b/v2.0",
            "https://login.microsoftonline.com/common/v1.0",
            "https://evil.example/common/v2.0",
            "https://login.microsoftonline.com//v2.0",
        ] {
            assert!(!microsoft_metadata_fits(configured, other), "{other}");
        }
        assert_eq!(
            tenant_id("9188040D-6C67-4C5B-B112-36A304B66DAD").as_deref(),
            Some("9188040d-6c67-4c5b-b112-36a304b66dad")
        );
        for bad in [
            "contoso.com",
            "9188040d",
            "9188040d-6c67-4c5b-b112-36a304b66dax",
        ] {
            assert_eq!(tenant_id(bad), None, "{bad}");
        }
        assert_eq!(
            ProviderKind::from_stored("github"),
            Some(ProviderKind::Github)
        );
        assert_eq!(ProviderKind::Oidc.label(), None);
        assert_eq!(allowed_name("acme-corp"), Some("acme-corp"));
        for bad in ["", "a b", "a/b", ".", "..", "-", &"a".repeat(101)] {
            assert_eq!(allowed_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn names_are_checked() {
        assert_eq!(provider_name("google-2"), Ok("google-2"));
        for bad in ["", "Google", "a b", "a/b", &"a".repeat(33)] {
            assert_eq!(
                provider_name(bad),
                Err(DashboardRefused::ProviderName),
                "{bad}"
            );
        }
        assert_eq!(key_name(Some("  shop ")), Ok(Some("shop".into())));
        assert_eq!(key_name(Some("   ")), Ok(None));
        assert_eq!(key_name(None), Ok(None));
        assert_eq!(key_name(Some(&"é".repeat(100))), Ok(Some("é".repeat(100))));
        assert_eq!(
            key_name(Some(&"é".repeat(101))),
            Err(DashboardRefused::KeyName)
        );
        assert_eq!(key_name(Some("a\nb")), Err(DashboardRefused::KeyName));
    }
}
