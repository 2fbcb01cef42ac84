//! Slow and half-open connections against the real `postal serve` binary under a
//! 1,024-descriptor limit (`prlimit`): real requests keep being answered, and every slow
//! connection is closed within its timeout.
//!
//! Three kinds of slow clients, each reconnecting when the server closes it (so the count
//! stays up): half-open (connects, sends nothing: the 5 s idle timeout), slow head (a
//! header byte a second: the 10 s head timeout) and slow body (a whole head, then 10 of
//! 100 body bytes: the 10 s body timeout). Timing bounds are generous (the machine is
//! shared); the measured figures are printed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::helpers::{ServeProcess, spawn_postal_serve};

/// The server's timeouts (`postal::api::server::Limits::default()`).
const IDLE: Duration = Duration::from_secs(5);
const HEAD: Duration = Duration::from_secs(10);
const BODY: Duration = Duration::from_secs(10);
/// Room for a loaded machine on top of a timeout.
const SLACK: Duration = Duration::from_secs(3);

/// `prlimit --nofile=1024:1024 postal serve` on a copy of the tiny fixture (it looks up 90210).
fn spawn_limited_server() -> ServeProcess {
    spawn_postal_serve(&["prlimit", "--nofile=1024:1024"])
}

#[derive(Clone, Copy, Debug)]
enum Slowness {
    HalfOpen,
    SlowHead,
    SlowBody,
}

impl Slowness {
    fn timeout(self) -> Duration {
        match self {
            Slowness::HalfOpen => IDLE,
            Slowness::SlowHead => HEAD,
            Slowness::SlowBody => BODY,
        }
    }
}

/// How long each slow connection lived, from connect to the server's close, and whether it
/// was opened past the cap (it may then wait in the kernel's backlog before the server
/// accepts it and starts its timeout).
#[derive(Default)]
struct Lifetimes {
    past_cap: AtomicBool,
    lived: Mutex<Vec<(Slowness, bool, Duration)>>,
}

/// A slow client: one connection after another until `stop`.
fn slow_client(address: String, kind: Slowness, stop: Arc<AtomicBool>, lifetimes: Arc<Lifetimes>) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut stream) = TcpStream::connect(&address) else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        let opened = Instant::now();
        let past_cap = lifetimes.past_cap.load(Ordering::Relaxed);
        let _ = stream.set_read_timeout(Some(Duration::from_millis(1000)));
        let head = b"POST /api/lookup HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
        let mut sent = 0;
        match kind {
            Slowness::HalfOpen => {}
            Slowness::SlowHead => {}
            Slowness::SlowBody => {
                let _ = stream.write_all(head);
                let _ = stream.write_all(b"Content-Length: 100\r\n\r\n{\"apiKey\":");
            }
        }
        let closed = loop {
            if stop.load(Ordering::Relaxed) {
                break false;
            }
            if let Slowness::SlowHead = kind {
                let byte = head.get(sent).copied().unwrap_or(b'x');
                sent += 1;
                if stream.write_all(&[byte]).is_err() {
                    break true;
                }
            }
            let mut buf = [0u8; 1024];
            match stream.read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => {} // the 408 of a slow body; its close follows
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break true,
            }
        };
        if closed {
            lifetimes
                .lived
                .lock()
                .expect("lifetimes")
                .push((kind, past_cap, opened.elapsed()));
        }
    }
}

/// A billed lookup on a fresh connection; its status and how long it took.
fn real_request(address: &str, api_key: &str, limit: Duration) -> (u16, Duration) {
    let started = Instant::now();
    let body = format!(r#"{{"apiKey":"{api_key}","zipcode":"90210"}}"#);
    let request = format!(
        "POST /api/lookup HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let reply = crate::helpers::raw_request(address, request.as_bytes(), limit);
    (reply.status, started.elapsed())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Starts `count` slow clients of the three kinds, in equal parts.
fn start_slow_clients(
    server: &ServeProcess,
    count: usize,
    stop: &Arc<AtomicBool>,
    lifetimes: &Arc<Lifetimes>,
) -> Vec<std::thread::JoinHandle<()>> {
    let kinds = [Slowness::HalfOpen, Slowness::SlowHead, Slowness::SlowBody];
    (0..count)
        .map(|i| {
            let (address, stop, lifetimes) =
                (server.address.clone(), stop.clone(), lifetimes.clone());
            let kind = kinds[i % kinds.len()];
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || slow_client(address, kind, stop, lifetimes))
                .expect("a slow client thread")
        })
        .collect()
}

#[test]
fn real_requests_are_answered_beside_500_and_then_1100_slow_connections() {
    let _alone = crate::helpers::timing_sensitive();
    let server = spawn_limited_server();
    let stop = Arc::new(AtomicBool::new(false));
    let lifetimes: Arc<Lifetimes> = Arc::default();

    // 500 slow connections: well under the cap (880 under 1,024 descriptors on two cores).
    let mut clients = start_slow_clients(&server, 500, &stop, &lifetimes);
    std::thread::sleep(Duration::from_secs(1));
    let mut latencies = Vec::new();
    for _ in 0..200 {
        let (status, took) = real_request(&server.address, &server.api_key, HEAD + SLACK);
        assert_eq!(status, 200);
        latencies.push(took);
    }
    latencies.sort();
    let (p50, p99, max) = (
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies[latencies.len() - 1],
    );
    eprintln!("500 slow connections: 200 real requests, p50 {p50:?}, p99 {p99:?}, max {max:?}");
    assert!(p99 < Duration::from_millis(500), "p99 {p99:?}");

    // 1,100: past the cap. Real requests wait in the backlog for a slot at worst: the
    // slow connections holding the slots time out within HEAD, then the server closes
    // 880 of them and accepts what waits. On two cores beside the other lanes' tests (a
    // fresh clone's .ci/run imports the whole dataset then), that took up to 4 s past HEAD
    // (13.96 s, issue 53): the bound is two slacks, the request's own limit three.
    lifetimes.past_cap.store(true, Ordering::Relaxed);
    clients.extend(start_slow_clients(&server, 600, &stop, &lifetimes));
    std::thread::sleep(Duration::from_secs(2));
    let mut waits = Vec::new();
    for _ in 0..10 {
        let (status, took) = real_request(&server.address, &server.api_key, HEAD + SLACK * 3);
        assert_eq!(status, 200);
        waits.push(took);
    }
    waits.sort();
    eprintln!(
        "1,100 slow connections: 10 real requests, median {:?}, max {:?}",
        percentile(&waits, 0.5),
        waits[waits.len() - 1]
    );
    assert!(waits[waits.len() - 1] <= HEAD + SLACK * 2, "{waits:?}");

    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().expect("slow client");
    }
    let lived = lifetimes.lived.lock().expect("lifetimes");
    for kind in [Slowness::HalfOpen, Slowness::SlowHead, Slowness::SlowBody] {
        let of_kind = |past_cap: Option<bool>| {
            let mut of_kind: Vec<Duration> = lived
                .iter()
                .filter(|(k, past, _)| {
                    std::mem::discriminant(k) == std::mem::discriminant(&kind)
                        && past_cap.is_none_or(|p| p == *past)
                })
                .map(|(_, _, d)| *d)
                .collect();
            of_kind.sort();
            of_kind
        };
        let (all, at_once, past_cap) = (of_kind(None), of_kind(Some(false)), of_kind(Some(true)));
        assert!(
            !at_once.is_empty(),
            "no {kind:?} connection opened under the cap was closed"
        );
        assert!(
            !past_cap.is_empty(),
            "no {kind:?} connection opened past the cap was closed"
        );
        eprintln!(
            "{kind:?}: {} closed by the server, median lifetime {:?}; opened under the cap: max {:?}; past it: max {:?}",
            all.len(),
            percentile(&all, 0.5),
            at_once[at_once.len() - 1],
            past_cap[past_cap.len() - 1],
        );
        // Most closed within their own timeout.
        assert!(
            percentile(&all, 0.5) <= kind.timeout() + SLACK,
            "{kind:?}: {all:?}"
        );
        // Opened under the cap: accepted at once but for the kernel's handshake under a burst
        // of connects (a real request took 3 s in that phase, SYN retransmits), so as before:
        // the timeout, plus at most the longest timeout, plus slack.
        assert!(
            at_once[at_once.len() - 1] <= kind.timeout() + HEAD + SLACK,
            "{kind:?} under the cap: {at_once:?}"
        );
        // Past the cap a connection first waits in the backlog (FIFO) until a slot frees:
        // every slot frees within the longest timeout (HEAD), but clients that reconnect
        // queue again, and on two shared cores under 1,100 client threads that wait was seen
        // at 15 s (CI, 2026-11-25). Bounded still, by one more HEAD.
        assert!(
            past_cap[past_cap.len() - 1] <= kind.timeout() + 2 * HEAD + SLACK,
            "{kind:?} past the cap: {past_cap:?}"
        );
    }
}
