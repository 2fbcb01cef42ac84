//! A customer's webhook receiver for the alerts' tests: an HTTP/1.1 server on
//! 127.0.0.1 that records every request and answers from a script of statuses, and the
//! check of what it received with the official `standardwebhooks` Python package.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// The largest request head or body the receiver reads: anything larger is a bug.
const MAX_REQUEST_BYTES: usize = 1 << 20;

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// In arrival order, names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: SystemTime,
}

impl Received {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Log {
    requests: Vec<Received>,
    connections: usize,
}

struct Shared {
    log: Mutex<Log>,
    arrived: Condvar,
    statuses: Mutex<VecDeque<u16>>,
    delay: Duration,
    stop: AtomicBool,
}

/// The receiver, serving until dropped.
pub struct Receiver {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl Receiver {
    /// A receiver answering the first requests with `statuses` in turn (`[500, 500]`),
    /// then 200. A 3xx carries `location: /moved`.
    pub fn start(statuses: &[u16]) -> Receiver {
        Receiver::start_slow(statuses, Duration::ZERO)
    }

    /// As [`Receiver::start`], each answer sent `delay` after its request arrived (the
    /// request is recorded at once).
    pub fn start_slow(statuses: &[u16], delay: Duration) -> Receiver {
        Receiver::serve(
            TcpListener::bind("127.0.0.1:0").expect("binding the receiver"),
            statuses,
            delay,
        )
    }

    /// As [`Receiver::start`], on a port of 127.0.0.1 a receiver had before (a server
    /// sends to it again once it is back).
    pub fn start_on(port: u16, statuses: &[u16]) -> Receiver {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match TcpListener::bind(("127.0.0.1", port)) {
                Ok(listener) => return Receiver::serve(listener, statuses, Duration::ZERO),
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("binding the receiver to port {port} again: {e}"),
            }
        }
    }

    fn serve(listener: TcpListener, statuses: &[u16], delay: Duration) -> Receiver {
        let addr = listener.local_addr().expect("the receiver's address");
        let shared = Arc::new(Shared {
            log: Mutex::default(),
            arrived: Condvar::new(),
            statuses: Mutex::new(statuses.iter().copied().collect()),
            delay,
            stop: AtomicBool::new(false),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if shared.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    shared.log.lock().unwrap().connections += 1;
                    let shared = Arc::clone(&shared);
                    // One thread a connection: a slow answer holds up no other.
                    std::thread::spawn(move || {
                        let _ = serve(stream, &shared);
                    });
                }
            })
        };
        Receiver {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// `http://127.0.0.1:PORT/hook`.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Received> {
        self.shared.log.lock().unwrap().requests.clone()
    }

    /// TCP connections accepted so far (a refused delivery opens none).
    pub fn connections(&self) -> usize {
        self.shared.log.lock().unwrap().connections
    }

    /// The requests once at least `n` have arrived; panics after `timeout` without them.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        let mut log = self.shared.log.lock().unwrap();
        while log.requests.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "only {} of {n} requests reached the receiver within {timeout:?}",
                log.requests.len()
            );
            log = self.shared.arrived.wait_timeout(log, left).unwrap().0;
        }
        log.requests.clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// Reads one request, records it, answers it and closes the connection.
fn serve(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    if line.is_empty() {
        return Ok(()); // the wake-up of Drop, or a client that gave up
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    let mut head_bytes = line.len();
    loop {
        let mut header = String::new();
        head_bytes += reader.read_line(&mut header)?;
        let header = header.trim_end_matches(['\r', '\n']);
        if header.is_empty() || head_bytes > MAX_REQUEST_BYTES {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_REQUEST_BYTES);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    {
        let mut log = shared.log.lock().unwrap();
        log.requests.push(Received {
            method,
            path,
            headers,
            body,
            at: SystemTime::now(),
        });
        shared.arrived.notify_all();
    }
    let status = shared.statuses.lock().unwrap().pop_front().unwrap_or(200);
    std::thread::sleep(shared.delay);
    let location = if (300..400).contains(&status) {
        "location: /moved\r\n"
    } else {
        ""
    };
    let body = format!("{{\"received\":true,\"status\":{status}}}");
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n{location}connection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

/// Checks every request's signature with the official `standardwebhooks` package
/// (`Webhook(secret).verify(body, headers)`), in a venv under `target/webhooks-venv` made
/// once, through `tests/alerts/verify.py`. The package refuses a timestamp more than 5
/// minutes from now: pass requests as they arrive. Without python3 the check is skipped
/// (one line says so; `POSTAL_REQUIRE_TOOLS` makes it fail) and answers `Ok`.
pub fn verify_with_standardwebhooks(secret: &str, requests: &[Received]) -> Result<(), String> {
    let Some(python) = python() else {
        return Ok(());
    };
    let lines: String = requests
        .iter()
        .map(|r| {
            let headers: serde_json::Map<String, serde_json::Value> = r
                .headers
                .iter()
                .map(|(n, v)| (n.clone(), serde_json::Value::from(v.as_str())))
                .collect();
            let body = String::from_utf8_lossy(&r.body);
            format!(
                "{}\n",
                serde_json::json!({ "headers": headers, "body": body })
            )
        })
        .collect();
    let mut child = Command::new(python)
        .arg(crate::repo().join("tests/alerts/verify.py"))
        .env("WEBHOOK_SECRET", secret)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting verify.py: {e}"))?;
    let mut stdin = child.stdin.take().expect("verify.py's stdin");
    stdin
        .write_all(lines.as_bytes())
        .map_err(|e| format!("writing to verify.py: {e}"))?;
    drop(stdin);
    let output = child
        .wait_with_output()
        .map_err(|e| format!("verify.py: {e}"))?;
    let said = String::from_utf8_lossy(&output.stdout);
    let verdicts: Vec<&str> = said.lines().collect();
    if !output.status.success() || verdicts.len() != requests.len() {
        return Err(format!(
            "verify.py ({}) said {said:?}, {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let failed: Vec<String> = verdicts
        .iter()
        .enumerate()
        .filter(|(_, verdict)| **verdict != "ok")
        .map(|(i, verdict)| format!("request {i}: {verdict}"))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

/// Python with `standardwebhooks` (`crate::python`).
fn python() -> Option<PathBuf> {
    crate::python::with_package("webhooks-venv", "standardwebhooks", "1.1.0")
}
