//! Billed load: clients looking up 90210 with one key until told to stop, each answer
//! counted by its status and each 200 kept with its instant (the money tests compare
//! what was answered with what was charged, and when).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::Client;

/// What the load clients saw.
#[derive(Default, Debug, Clone)]
pub struct Seen {
    /// The instants of the 200s.
    pub ok: Vec<Instant>,
    /// The same per server (the index of its client in `load`'s list), once joined.
    pub ok_per_node: Vec<Vec<Instant>>,
    pub payment: u64,
    pub unavailable: u64,
    pub other: Vec<u16>,
    /// Requests that got no answer (the server gone or restarting).
    pub failed: u64,
}

/// The running clients: `stop` ends them, `join` gathers what they saw.
pub type Threads = Vec<thread::JoinHandle<(usize, Seen)>>;

/// `per_server` clients per server of `servers` looking up with `key` until `stop`.
pub fn load(servers: &[Client], key: &str, per_server: usize) -> (Arc<AtomicBool>, Threads) {
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for (i, server) in servers.iter().enumerate() {
        for _ in 0..per_server {
            let (client, key, stop) = (server.clone(), key.to_owned(), stop.clone());
            threads.push(thread::spawn(move || {
                let mut seen = Seen::default();
                while !stop.load(Ordering::Relaxed) {
                    match client.lookup(&key).0 {
                        200 => seen.ok.push(Instant::now()),
                        402 => seen.payment += 1,
                        503 => seen.unavailable += 1,
                        0 => {
                            seen.failed += 1;
                            thread::sleep(Duration::from_millis(20));
                        }
                        s => seen.other.push(s),
                    }
                }
                (i, seen)
            }));
        }
    }
    (stop, threads)
}

/// Every client's counts together, the 200s also per server (`servers` of them).
pub fn join(threads: Threads, servers: usize) -> Seen {
    let mut total = Seen {
        ok_per_node: vec![Vec::new(); servers],
        ..Seen::default()
    };
    for t in threads {
        let (i, seen) = t.join().expect("a load client");
        total.ok.extend(&seen.ok);
        total.ok_per_node[i].extend(seen.ok);
        total.payment += seen.payment;
        total.unavailable += seen.unavailable;
        total.failed += seen.failed;
        total.other.extend(seen.other);
    }
    total
}
