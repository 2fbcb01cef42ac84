//! A stand-in SMTP relay for tests: a minimal server on a thread (RFC 5321's EHLO, HELO,
//! MAIL, RCPT, DATA, RSET, NOOP, QUIT; AUTH PLAIN and LOGIN when asked to offer them) that
//! takes every message and keeps it (envelope and raw data) for the test to read. No TLS:
//! it is reached on loopback, where postal sends in plain text when STARTTLS is not
//! offered, or (bound to every address) to check that postal refuses plain text off
//! loopback.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

/// What the sink does.
#[derive(Clone, Debug)]
pub struct Options {
    /// The address it listens on (port 0: any free one). 127.0.0.1 by default.
    pub bind: IpAddr,
    /// Offer AUTH PLAIN and LOGIN in the EHLO reply, and accept any user and password.
    pub auth: bool,
    /// Answer every RCPT with this code (a 4xx or 5xx) instead of 250.
    pub refuse_rcpt: Option<u16>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            auth: false,
            refuse_rcpt: None,
        }
    }
}

/// A message the sink took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// MAIL FROM's address (without the angle brackets).
    pub from: String,
    /// Each RCPT TO's address.
    pub to: Vec<String>,
    /// The data as sent, dot-stuffing undone, lines ending in CRLF, without the final dot.
    pub data: String,
    /// The user and password of the session's AUTH, if any.
    pub auth: Option<(String, String)>,
}

impl Received {
    /// The value of the header `name` (case-insensitive, unfolded), if present.
    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.data.split("\r\n\r\n").next().unwrap_or_default();
        let mut found: Option<String> = None;
        for line in head.split("\r\n") {
            if line.starts_with([' ', '\t']) {
                if let Some(value) = found.as_mut() {
                    value.push(' ');
                    value.push_str(line.trim());
                }
                continue;
            }
            if found.is_some() {
                break;
            }
            if let Some((key, value)) = line.split_once(':')
                && key.eq_ignore_ascii_case(name)
            {
                found = Some(value.trim().to_owned());
            }
        }
        found
    }

    /// The body: what follows the blank line after the headers.
    pub fn body(&self) -> &str {
        self.data
            .split_once("\r\n\r\n")
            .map(|(_, body)| body)
            .unwrap_or_default()
    }
}

#[derive(Default)]
struct Kept {
    messages: Vec<Received>,
}

/// The running sink; stopped when dropped.
pub struct SmtpSink {
    /// The address it listens on (with its port).
    pub address: SocketAddr,
    kept: Arc<(Mutex<Kept>, Condvar)>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SmtpSink {
    /// A sink on 127.0.0.1 that takes every message, without AUTH.
    pub fn start() -> SmtpSink {
        SmtpSink::start_with(Options::default())
    }

    pub fn start_with(options: Options) -> SmtpSink {
        let listener =
            TcpListener::bind(SocketAddr::new(options.bind, 0)).expect("binding the SMTP sink");
        let address = listener.local_addr().expect("the sink's address");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let kept = Arc::new((Mutex::new(Kept::default()), Condvar::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (kept, stop) = (kept.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let (kept, options) = (kept.clone(), options.clone());
                            thread::spawn(move || {
                                let _ = Session::new(stream, options, kept).run();
                            });
                        }
                        Err(_) => thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
        };
        SmtpSink {
            address,
            kept,
            stop,
            thread: Some(thread),
        }
    }

    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// The messages taken so far, in order.
    pub fn messages(&self) -> Vec<Received> {
        self.kept
            .0
            .lock()
            .expect("the sink's lock")
            .messages
            .clone()
    }

    /// The messages once there are at least `n`, or what there is after `timeout`.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        let until = Instant::now() + timeout;
        let (lock, arrived) = &*self.kept;
        let mut kept = lock.lock().expect("the sink's lock");
        while kept.messages.len() < n {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            kept = arrived.wait_timeout(kept, left).expect("the sink's lock").0;
        }
        kept.messages.clone()
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One client's connection.
struct Session {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    options: Options,
    kept: Arc<(Mutex<Kept>, Condvar)>,
    from: Option<String>,
    to: Vec<String>,
    auth: Option<(String, String)>,
}

impl Session {
    fn new(stream: TcpStream, options: Options, kept: Arc<(Mutex<Kept>, Condvar)>) -> Session {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let writer = stream.try_clone().expect("cloning the stream");
        Session {
            reader: BufReader::new(stream),
            writer,
            options,
            kept,
            from: None,
            to: Vec::new(),
            auth: None,
        }
    }

    fn reply(&mut self, text: &str) -> std::io::Result<()> {
        self.writer.write_all(text.as_bytes())?;
        self.writer.write_all(b"\r\n")
    }

    /// A line without its line end; `None` when the client is gone.
    fn line(&mut self) -> std::io::Result<Option<String>> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        Ok(Some(line.trim_end_matches(['\r', '\n']).to_owned()))
    }

    fn run(mut self) -> std::io::Result<()> {
        self.reply("220 sink.test ESMTP testkit")?;
        while let Some(line) = self.line()? {
            let (verb, rest) = line.split_once(' ').unwrap_or((&line, ""));
            match verb.to_ascii_uppercase().as_str() {
                "EHLO" => {
                    let mut lines = vec![format!("250-sink.test greets {rest}")];
                    lines.push("250-8BITMIME".into());
                    if self.options.auth {
                        lines.push("250-AUTH PLAIN LOGIN".into());
                    }
                    lines.push("250 SIZE 10485760".into());
                    self.reply(&lines.join("\r\n"))?;
                }
                "HELO" => self.reply("250 sink.test")?,
                "NOOP" => self.reply("250 2.0.0 Ok")?,
                "RSET" => {
                    self.from = None;
                    self.to.clear();
                    self.reply("250 2.0.0 Ok")?;
                }
                "QUIT" => {
                    self.reply("221 2.0.0 Bye")?;
                    return Ok(());
                }
                "AUTH" if self.options.auth => self.authenticate(rest)?,
                "MAIL" => match path(rest, "FROM:") {
                    Some(from) => {
                        self.from = Some(from);
                        self.to.clear();
                        self.reply("250 2.1.0 Ok")?;
                    }
                    None => self.reply("501 5.5.4 Syntax: MAIL FROM:<address>")?,
                },
                "RCPT" => match (path(rest, "TO:"), &self.from, self.options.refuse_rcpt) {
                    (None, _, _) => self.reply("501 5.5.4 Syntax: RCPT TO:<address>")?,
                    (Some(_), None, _) => self.reply("503 5.5.1 Error: need MAIL command")?,
                    (Some(to), Some(_), Some(code)) => self.reply(&format!(
                        "{code} 5.1.1 <{to}>: Recipient address rejected: refused by the test sink"
                    ))?,
                    (Some(to), Some(_), None) => {
                        self.to.push(to);
                        self.reply("250 2.1.5 Ok")?;
                    }
                },
                "DATA" => {
                    if self.to.is_empty() {
                        self.reply("503 5.5.1 Error: need RCPT command")?;
                        continue;
                    }
                    self.reply("354 End data with <CR><LF>.<CR><LF>")?;
                    let mut data = String::new();
                    loop {
                        let Some(line) = self.line()? else {
                            return Ok(());
                        };
                        if line == "." {
                            break;
                        }
                        data.push_str(line.strip_prefix('.').unwrap_or(&line));
                        data.push_str("\r\n");
                    }
                    let received = Received {
                        from: self.from.take().unwrap_or_default(),
                        to: std::mem::take(&mut self.to),
                        data,
                        auth: self.auth.clone(),
                    };
                    let number = {
                        let (lock, arrived) = &*self.kept;
                        let mut kept = lock.lock().expect("the sink's lock");
                        kept.messages.push(received);
                        arrived.notify_all();
                        kept.messages.len()
                    };
                    self.reply(&format!("250 2.0.0 Ok: queued as TEST{number}"))?;
                }
                _ => self.reply("502 5.5.2 Error: command not recognized")?,
            }
        }
        Ok(())
    }

    /// AUTH PLAIN (with or without its initial response) or LOGIN: any user and password
    /// are accepted and kept.
    fn authenticate(&mut self, rest: &str) -> std::io::Result<()> {
        let (mechanism, initial) = rest.split_once(' ').unwrap_or((rest, ""));
        let decoded = |text: &str| {
            BASE64
                .decode(text.trim())
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
        };
        let credentials = match mechanism.to_ascii_uppercase().as_str() {
            "PLAIN" => {
                let response = match initial {
                    "" => {
                        self.reply("334 ")?;
                        self.line()?.unwrap_or_default()
                    }
                    given => given.to_owned(),
                };
                decoded(&response).and_then(|plain| {
                    let mut parts = plain.split('\0').skip(1);
                    Some((parts.next()?.to_owned(), parts.next()?.to_owned()))
                })
            }
            "LOGIN" => {
                let user = match initial {
                    "" => {
                        self.reply("334 VXNlcm5hbWU6")?;
                        self.line()?.unwrap_or_default()
                    }
                    given => given.to_owned(),
                };
                self.reply("334 UGFzc3dvcmQ6")?;
                let password = self.line()?.unwrap_or_default();
                decoded(&user).zip(decoded(&password))
            }
            _ => return self.reply("504 5.5.4 Unrecognized authentication type"),
        };
        match credentials {
            Some(credentials) => {
                self.auth = Some(credentials);
                self.reply("235 2.7.0 Authentication successful")
            }
            None => self.reply("501 5.5.2 Cannot decode response"),
        }
    }
}

/// The address of `MAIL FROM:<a@b> ...` or `RCPT TO:<a@b>` (`prefix` "FROM:" or "TO:").
fn path(rest: &str, prefix: &str) -> Option<String> {
    let rest = rest.trim_start();
    if rest.len() < prefix.len() || !rest[..prefix.len()].eq_ignore_ascii_case(prefix) {
        return None;
    }
    let rest = rest[prefix.len()..].trim_start();
    let inner = rest.strip_prefix('<')?;
    let end = inner.find('>')?;
    Some(inner[..end].to_owned())
}
