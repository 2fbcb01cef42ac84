//! `postal serve` as a process of its own: started on a free port, its output drained
//! (a full pipe would block it), ready once it answers, killed when dropped.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::Client;

/// How long a server may take to load its data and answer (a loaded 2-core machine
/// takes seconds for the sample).
const STARTUP: Duration = Duration::from_secs(120);

/// The arguments of `postal --db DB serve --listen 127.0.0.1:0 EXTRA...`.
pub fn args(db: &Path, extra: &[&str]) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["--db".into(), db.into(), "serve".into()];
    args.extend(["--listen".into(), "127.0.0.1:0".into()]);
    args.extend(extra.iter().map(OsString::from));
    args
}

/// `postal` (the binary at `postal`) with `args` and none of the environment that would
/// point it elsewhere.
pub fn command(postal: &str, args: &[OsString]) -> Command {
    let mut command = Command::new(postal);
    command
        .args(args)
        .env_remove("POSTAL_DB")
        .env_remove("POSTAL_LEDGER");
    command
}

/// A running `postal serve`.
pub struct Serve {
    child: Child,
    /// `http://127.0.0.1:port`.
    pub address: String,
    stdout: Arc<Mutex<String>>,
    log: Arc<Mutex<String>>,
}

impl Serve {
    /// `postal --db DB serve --listen 127.0.0.1:0 EXTRA...`, once it answers.
    pub fn start(postal: &str, db: &Path, extra: &[&str]) -> Serve {
        Serve::spawn(command(postal, &args(db, extra)))
    }

    /// Runs `command` (a `postal serve` on `--listen 127.0.0.1:0`, perhaps behind a
    /// wrapper such as `prlimit`), reads the address it says it listens on, and waits
    /// until `/healthz` answers (the port is bound before the data is loaded).
    pub fn spawn(mut command: Command) -> Serve {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running postal serve");
        let stdout = drain(child.stdout.take().expect("stdout"));
        let log = Arc::new(Mutex::new(String::new()));
        let (found, address) = std::sync::mpsc::channel();
        let sink = log.clone();
        let stderr = child.stderr.take().expect("stderr");
        thread::spawn(move || {
            let mut found = Some(found);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on http://").nth(1)
                    && let Some(tx) = found.take()
                {
                    let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
                }
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let mut server = Serve {
            child,
            address: String::new(),
            stdout,
            log,
        };
        match address.recv_timeout(STARTUP) {
            Ok(bound) => server.address = format!("http://{bound}"),
            Err(_) => panic!("postal serve did not listen: {}", server.log()),
        }
        let client = Client::new(&server.address, Some(Duration::from_secs(10)));
        let until = Instant::now() + STARTUP;
        while client.get("/healthz").0 != 200 {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("postal serve ended ({status}): {}", server.log());
            }
            assert!(
                Instant::now() < until,
                "postal serve did not answer: {}",
                server.log()
            );
            thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// A client of this server (calls give up after 10 s).
    pub fn client(&self) -> Client {
        Client::new(&self.address, Some(Duration::from_secs(10)))
    }

    /// `host:port`.
    pub fn host_port(&self) -> &str {
        self.address.trim_start_matches("http://")
    }

    /// What the server wrote to stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// What the server wrote to stdout so far.
    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    /// The API key `postal serve` printed for the account it created on a file that had
    /// none (waits for the line).
    pub fn created_key(&self) -> String {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let printed = self.stdout();
            let key = printed
                .split("with API key ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next());
            if let Some(key) = key {
                return key.to_string();
            }
            assert!(
                Instant::now() < until,
                "postal serve printed no API key: {printed}"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`STOP`, `CONT`, `HUP`) without waiting.
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("running kill");
        assert!(sent.success(), "kill -{signal}");
    }

    /// Sends `signal` (`TERM`, `KILL`) and waits for the process to end.
    pub fn stop(&mut self, signal: &str) -> ExitStatus {
        self.signal(signal);
        self.child.wait().expect("waiting for postal serve")
    }

    /// The process, for what the methods above do not cover.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads `from` to its end in a thread of its own, into the returned buffer.
fn drain(from: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let buffer = Arc::new(Mutex::new(String::new()));
    let sink = buffer.clone();
    thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            let mut buffer = sink.lock().unwrap();
            buffer.push_str(&line);
            buffer.push('\n');
        }
    });
    buffer
}
