//! The operator's mail relay (`postal mail`, docs/alerts.md): its settings checked, and
//! plain-text messages sent through it with lettre's blocking SMTP client, one connection
//! per message (the caller runs [`Mailer::send`] on a blocking thread).
//!
//! Off this machine the relay is reached over TLS only, STARTTLS (`smtp://`, refused when
//! the relay does not offer it) or implicit (`smtps://`), its certificate verified against
//! the Mozilla roots: the password and the customers' addresses never cross a network in
//! clear. On loopback (a local Postfix, a test's sink) `smtp://` uses STARTTLS when offered
//! and plain text otherwise, and a certificate is not verified: the connection never leaves
//! the machine, and a local relay's certificate is seldom one a public CA signed.

use std::error::Error as _;
use std::net::Ipv4Addr;
use std::time::Duration;

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::transport::smtp;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{Message, SmtpTransport, Transport};

/// The relay's settings as stored (`db::admin`, where the SQL twins read and write them).
pub use crate::db::admin::MailSettings;

/// How long connecting, and each reply of the relay, may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The forms a relay URL may take, in its errors.
const URL_FORMS: &str = "smtp://HOST[:PORT] (STARTTLS, port 587 by default) or \
    smtps://HOST[:PORT] (implicit TLS, port 465 by default)";

/// How the connection to the relay is encrypted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encryption {
    /// `smtp://`: plain, then STARTTLS.
    StartTls,
    /// `smtps://`: TLS from the first byte.
    Implicit,
}

/// A relay URL, checked.
#[derive(Debug, PartialEq, Eq)]
struct Relay {
    encryption: Encryption,
    /// The name or address connected to (an IPv6 address without brackets), which the
    /// certificate must name.
    host: String,
    port: u16,
    /// 127.0.0.0/8, ::1 or `localhost`: TLS is not required.
    loopback: bool,
}

impl Relay {
    fn parse(url: &str) -> Result<Relay, String> {
        let parsed = url::Url::parse(url.trim())
            .map_err(|e| format!("the relay URL {url:?} is not a URL ({e}): give {URL_FORMS}"))?;
        let (encryption, default_port) = match parsed.scheme() {
            "smtp" => (Encryption::StartTls, 587),
            "smtps" => (Encryption::Implicit, 465),
            other => {
                return Err(format!(
                    "the relay URL {url:?} has the scheme {other:?}: give {URL_FORMS}"
                ));
            }
        };
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(format!(
                "the relay URL {url:?} holds a user or password: give the user as --user and \
                 the password by --password-env or --password-file"
            ));
        }
        let no_host = || format!("the relay URL {url:?} has no host: give {URL_FORMS}");
        let (host, loopback) = match parsed.host().ok_or_else(no_host)? {
            url::Host::Ipv4(ip) => (ip.to_string(), ip.is_loopback()),
            url::Host::Ipv6(ip) => (ip.to_string(), ip.is_loopback()),
            // `smtp` is not a scheme the URL standard knows, so its host is left as
            // written: an IPv4 address, or a name to check here.
            url::Host::Domain("") => return Err(no_host()),
            url::Host::Domain(name) => match name.parse::<Ipv4Addr>() {
                Ok(ip) => (ip.to_string(), ip.is_loopback()),
                Err(_) if is_host_name(name) => {
                    let name = name.to_ascii_lowercase();
                    let loopback = name == "localhost";
                    (name, loopback)
                }
                Err(_) => {
                    return Err(format!(
                        "the relay URL {url:?} has the host {name:?}, which is neither an IP \
                         address nor a host name (letters, digits, '-' and '.'; an \
                         international name in its xn-- form)"
                    ));
                }
            },
        };
        if !matches!(parsed.path(), "" | "/") || parsed.query().is_some() {
            return Err(format!(
                "the relay URL {url:?} has a path or query: give {URL_FORMS}"
            ));
        }
        if parsed.fragment().is_some() {
            return Err(format!(
                "the relay URL {url:?} has a fragment: give {URL_FORMS}"
            ));
        }
        let port = match parsed.port() {
            Some(0) => return Err(format!("the relay URL {url:?} has port 0")),
            Some(port) => port,
            None => default_port,
        };
        Ok(Relay {
            encryption,
            host,
            port,
            loopback,
        })
    }

    /// lettre's TLS setting for this relay.
    fn tls(&self) -> Result<Tls, String> {
        let parameters = TlsParameters::builder(self.host.clone())
            .dangerous_accept_invalid_certs(self.loopback)
            .build_rustls()
            .map_err(|e| format!("TLS settings for {}: {}", self.host, why(&e)))?;
        Ok(match (self.encryption, self.loopback) {
            (Encryption::Implicit, _) => Tls::Wrapper(parameters),
            (Encryption::StartTls, false) => Tls::Required(parameters),
            (Encryption::StartTls, true) => Tls::Opportunistic(parameters),
        })
    }
}

/// A DNS host name in ASCII: labels of letters, digits and inner hyphens.
fn is_host_name(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The From mailbox: `billing@example.com` or `Postal <billing@example.com>`.
fn sender_mailbox(sender: &str) -> Result<Mailbox, String> {
    sender.trim().parse::<Mailbox>().map_err(|e| {
        format!(
            "the sender {sender:?} is not a mailbox such as \"Postal <billing@example.com>\" \
             ({e})"
        )
    })
}

/// Checks the settings given on the command line (the URL's scheme, host and port; the
/// From mailbox), without connecting: an error says what is wrong and what to give.
pub fn check(url: &str, sender: &str) -> Result<(), String> {
    Relay::parse(url)?;
    sender_mailbox(sender)?;
    Ok(())
}

/// Checks a recipient's address (`someone@example.com`), as [`Mailer::send`] takes it.
pub fn check_recipient(address: &str) -> Result<(), String> {
    recipient(address).map(drop)
}

fn recipient(address: &str) -> Result<Mailbox, String> {
    address
        .trim()
        .parse()
        .map_err(|e| format!("{address:?} is not an e-mail address ({e})"))
}

/// A transport to the relay and the From mailbox, ready to send.
pub struct Mailer {
    transport: SmtpTransport,
    from: Mailbox,
}

impl Mailer {
    /// Checks and builds the transport: url `smtp://HOST[:PORT]` (STARTTLS, port 587 by
    /// default) or `smtps://HOST[:PORT]` (implicit TLS, 465); TLS required when HOST is not
    /// loopback (127.0.0.0/8, ::1, localhost); on loopback, `smtp://` uses STARTTLS when
    /// offered, plain otherwise. A 10 s timeout. Nothing is connected yet.
    pub fn new(settings: &MailSettings) -> Result<Mailer, String> {
        let relay = Relay::parse(&settings.url)?;
        let from = sender_mailbox(&settings.sender)?;
        let mut transport = SmtpTransport::builder_dangerous(relay.host.as_str())
            .port(relay.port)
            .tls(relay.tls()?)
            .timeout(Some(TIMEOUT));
        match (&settings.username, &settings.password) {
            (Some(user), Some(password)) => {
                transport = transport.credentials(Credentials::new(user.clone(), password.clone()));
            }
            (None, None) => {}
            (Some(_), None) => return Err("the relay's user has no password".to_owned()),
            (None, Some(_)) => return Err("the relay's password has no user".to_owned()),
        }
        Ok(Mailer {
            transport: transport.build(),
            from,
        })
    }

    /// Sends one plain-text message (a Message-ID and a Date of its own, From the
    /// settings' sender, To `to`): the relay's reply line (`250 2.0.0 Ok: queued ...`), or
    /// why it was not taken, in one line (`SMTP 550 5.1.1 ...`, `connection refused`, `the
    /// relay offers no STARTTLS`).
    pub fn send(&self, to: &str, subject: &str, text: &str) -> Result<String, String> {
        let to = recipient(to)?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .message_id(None)
            .header(ContentType::TEXT_PLAIN)
            .body(text.to_owned())
            .map_err(|e| format!("the message could not be made: {e}"))?;
        let reply = self.transport.send(&message).map_err(|e| why(&e))?;
        let line = reply.first_line().unwrap_or_default();
        Ok(one_line(&format!("{} {line}", reply.code())))
    }
}

/// Why lettre's SMTP client failed, in one line an operator can act on.
fn why(e: &smtp::Error) -> String {
    let detail = e.source().map(ToString::to_string).unwrap_or_default();
    if let Some(code) = e.status() {
        return one_line(&format!("SMTP {code} {detail}"));
    }
    let mut source = e.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind;
            if let Some(tls) = io.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
                return one_line(&format!("TLS: {tls}"));
            }
            return match io.kind() {
                ErrorKind::ConnectionRefused => "connection refused".to_owned(),
                ErrorKind::TimedOut | ErrorKind::WouldBlock => {
                    format!("no answer within {} s", TIMEOUT.as_secs())
                }
                ErrorKind::ConnectionReset | ErrorKind::UnexpectedEof => {
                    "the relay closed the connection".to_owned()
                }
                _ => one_line(&io.to_string()),
            };
        }
        source = cause.source();
    }
    // lettre says these only in words.
    if detail.contains("STARTTLS is not supported") {
        return "the relay offers no STARTTLS".to_owned();
    }
    if detail.contains("No compatible authentication mechanism") {
        return "the relay offers no AUTH PLAIN or LOGIN".to_owned();
    }
    if e.is_tls() {
        return one_line(&format!("TLS: {detail}"));
    }
    one_line(&e.to_string())
}

/// `text` on one line: a reply of several lines joined by spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relay(url: &str) -> Relay {
        Relay::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    #[test]
    fn smtp_is_starttls_on_587_and_smtps_implicit_tls_on_465_by_default() {
        assert_eq!(
            relay("smtp://mail.example.com"),
            Relay {
                encryption: Encryption::StartTls,
                host: "mail.example.com".into(),
                port: 587,
                loopback: false,
            }
        );
        assert_eq!(
            relay("smtps://Mail.Example.com:2465/"),
            Relay {
                encryption: Encryption::Implicit,
                host: "mail.example.com".into(),
                port: 2465,
                loopback: false,
            }
        );
    }

    #[test]
    fn loopback_is_127_0_0_0_8_and_ipv6_1_and_localhost_only() {
        for url in [
            "smtp://127.0.0.1:25",
            "smtp://127.9.8.7:25",
            "smtp://[::1]:25",
            "smtp://localhost:25",
            "smtp://LOCALHOST",
        ] {
            assert!(relay(url).loopback, "{url}");
        }
        for url in [
            "smtp://10.0.0.1:25",
            "smtp://[::2]:25",
            "smtp://mail.localhost.example.com",
            "smtp://192.168.1.1",
        ] {
            assert!(!relay(url).loopback, "{url}");
        }
        assert_eq!(relay("smtp://[::1]:25").host, "::1");
    }

    #[test]
    fn a_url_of_another_form_is_refused_with_the_forms_it_may_take() {
        for (url, error) in [
            ("http://mail.example.com", "has the scheme \"http\""),
            ("mail.example.com:25", "has the scheme \"mail.example.com\""),
            ("smtp://", "has no host"),
            ("smtp:mail.example.com", "has no host"),
            ("smtp://:25", "not a URL"),
            (
                "smtp://user:secret@mail.example.com",
                "holds a user or password",
            ),
            ("smtp://mail.example.com/x", "has a path or query"),
            ("smtp://mail.example.com?x=1", "has a path or query"),
            ("smtp://mail.example.com:0", "port 0"),
            ("smtp://mail.example.com:70000", "not a URL"),
            (
                "smtp://mail_relay.example.com",
                "neither an IP address nor a host name",
            ),
            (
                "smtp://-mail.example.com",
                "neither an IP address nor a host name",
            ),
        ] {
            let got = Relay::parse(url).expect_err(url);
            assert!(got.contains(error), "{url}: {got}");
        }
    }

    #[test]
    fn the_sender_is_a_mailbox_with_or_without_a_name() {
        assert!(check("smtp://localhost", "billing@example.com").is_ok());
        assert!(check("smtp://localhost", "Postal <billing@example.com>").is_ok());
        for sender in ["billing", "Postal <billing>", "", "<@example.com>"] {
            let got = check("smtp://localhost", sender).expect_err(sender);
            assert!(got.starts_with("the sender"), "{sender}: {got}");
        }
    }

    #[test]
    fn a_mailer_can_be_shared_with_blocking_threads() {
        fn shared<T: Send + Sync + 'static>() {}
        shared::<Mailer>();
    }

    #[test]
    fn a_user_needs_a_password_and_the_debug_form_hides_it() {
        let mut settings = MailSettings {
            url: "smtp://localhost:2525".into(),
            sender: "billing@example.com".into(),
            username: Some("postal".into()),
            password: None,
            updated_at: 0,
        };
        assert!(Mailer::new(&settings).is_err());
        settings.password = Some("hunter2".into());
        assert!(Mailer::new(&settings).is_ok());
        let shown = format!("{settings:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("(set)"),
            "{shown}"
        );
    }
}
