//! Where `postal serve` writes its log lines: a buffer that a thread of its own writes to
//! stderr in batches.
//!
//! Why not `tracing-appender`'s non-blocking writer: it hands every line to its thread
//! through a channel, so each access line (one per request) woke that thread, which then
//! spun (`sched_yield`) and made one write(2) per line. Under `bench/api.sh` that thread
//! took 5% of the CPU and the wake-ups more (perf, docs/money.md). Here a line is appended
//! to a buffer under a mutex; the thread is woken only when the buffer goes from empty
//! to not empty while it sleeps, then waits [`BATCH`] to gather more and writes them all
//! with one write(2).
//!
//! A batch is written under a lock of its own, not the buffer's, so a request appending a
//! line never waits for a write(2). Nothing is dropped: past [`HIGH_WATER`] bytes (the
//! thread is behind, e.g. stderr is a slow pipe) the line's writer writes the buffer
//! itself, waiting for the write in progress. Lines keep their order (a batch is taken
//! from the buffer while the output's lock is held). A clean exit writes what is left (the
//! [`Flusher`] guard); a crash loses at most the last [`BATCH`] of lines.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// How long the thread gathers lines before writing them.
pub const BATCH: Duration = Duration::from_millis(5);
/// Bytes buffered before a line's writer writes them itself.
pub const HIGH_WATER: usize = 1 << 20;

struct Pending {
    lines: Vec<u8>,
    /// The thread waits on `wake` (only then does a new line notify it).
    asleep: bool,
    stopping: bool,
}

/// The buffer and the output have a lock each: a line is appended under `pending` only,
/// and the write(2) of a batch happens under `out` only, so no request waits for it
/// (unless the buffer is past `HIGH_WATER`). Lock order: `out`, then `pending`.
struct Shared<W> {
    pending: Mutex<Pending>,
    wake: Condvar,
    out: Mutex<W>,
}

impl<W: Write> Shared<W> {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A panic while holding the lock leaves plain bytes behind: keep logging.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes everything buffered so far; `spare` (empty) takes the buffer's place, and
    /// comes back empty with the written allocation. Taking `out` first keeps batches in
    /// order.
    fn write_batch(&self, spare: &mut Vec<u8>) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::swap(&mut self.lock().lines, spare);
        if !spare.is_empty() {
            // Nowhere to report a failed write to stderr; the lines are gone either way.
            let _ = out.write_all(spare);
            let _ = out.flush();
            spare.clear();
        }
    }
}

/// The `MakeWriter` handed to the subscriber.
pub struct Batched<W> {
    shared: Arc<Shared<W>>,
}

impl<W> Clone for Batched<W> {
    fn clone(&self) -> Self {
        Batched {
            shared: self.shared.clone(),
        }
    }
}

/// Writes what is left and stops the thread when dropped.
pub struct Flusher<W: Write> {
    shared: Arc<Shared<W>>,
    thread: Option<JoinHandle<()>>,
}

/// A writer to `out` and the guard of its thread (named `postal-log`).
pub fn batched<W: Write + Send + 'static>(out: W) -> std::io::Result<(Batched<W>, Flusher<W>)> {
    let shared = Arc::new(Shared {
        pending: Mutex::new(Pending {
            lines: Vec::with_capacity(64 * 1024),
            asleep: false,
            stopping: false,
        }),
        wake: Condvar::new(),
        out: Mutex::new(out),
    });
    let worker = shared.clone();
    let thread = std::thread::Builder::new()
        .name("postal-log".into())
        .spawn(move || write_batches(&worker))?;
    Ok((
        Batched {
            shared: shared.clone(),
        },
        Flusher {
            shared,
            thread: Some(thread),
        },
    ))
}

fn write_batches<W: Write>(shared: &Shared<W>) {
    let mut spare = Vec::with_capacity(64 * 1024);
    loop {
        let mut pending = shared.lock();
        while pending.lines.is_empty() && !pending.stopping {
            pending.asleep = true;
            pending = shared.wake.wait(pending).unwrap_or_else(|e| e.into_inner());
            pending.asleep = false;
        }
        let stopping = pending.stopping;
        drop(pending);
        if !stopping {
            std::thread::sleep(BATCH);
        }
        shared.write_batch(&mut spare);
        if stopping {
            return;
        }
    }
}

impl<W: Write> Drop for Flusher<W> {
    fn drop(&mut self) {
        self.shared.lock().stopping = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // What is left if the thread could not write it (it panicked).
        self.shared.write_batch(&mut Vec::new());
    }
}

/// One line (the subscriber writes each event with one `write_all`).
pub struct Line<'a, W> {
    shared: &'a Shared<W>,
}

impl<W: Write> Write for Line<'_, W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let mut pending = self.shared.lock();
        pending.lines.extend_from_slice(bytes);
        if pending.lines.len() >= HIGH_WATER || pending.stopping {
            drop(pending);
            self.shared.write_batch(&mut Vec::new());
        } else if pending.asleep {
            pending.asleep = false;
            drop(pending);
            self.shared.wake.notify_one();
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a, W: Write + 'a> MakeWriter<'a> for Batched<W> {
    type Writer = Line<'a, W>;

    fn make_writer(&'a self) -> Self::Writer {
        Line {
            shared: &self.shared,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Write` whose bytes and write calls the test can read.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<(Vec<u8>, usize)>>);

    impl Write for Recorder {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let mut r = self.0.lock().unwrap();
            r.0.extend_from_slice(bytes);
            r.1 += 1;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn line(writer: &Batched<Recorder>, text: &str) {
        writer.make_writer().write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn lines_arrive_in_order_in_few_writes_and_all_by_exit() {
        let out = Recorder::default();
        let (writer, flusher) = batched(out.clone()).unwrap();
        let expected: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        for i in 0..10_000 {
            line(&writer, &format!("line {i}\n"));
        }
        drop(flusher);
        let (bytes, writes) = out.0.lock().unwrap().clone();
        assert_eq!(String::from_utf8(bytes).unwrap(), expected);
        // Batched: a write per 5 ms, not per line (generous for a slow, loaded machine).
        assert!(writes < 1_000, "{writes} writes for 10,000 lines");
    }

    #[test]
    fn a_lone_line_is_written_within_the_batch_delay() {
        let out = Recorder::default();
        let (writer, _flusher) = batched(out.clone()).unwrap();
        line(&writer, "one\n");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while out.0.lock().unwrap().0.is_empty() {
            assert!(std::time::Instant::now() < deadline, "never written");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(out.0.lock().unwrap().0, b"one\n");
    }

    #[test]
    fn a_full_buffer_is_written_by_the_line_that_fills_it() {
        let out = Recorder::default();
        let (writer, flusher) = batched(out.clone()).unwrap();
        let big = "x".repeat(HIGH_WATER);
        line(&writer, &big);
        // Written at once, not after the batch delay.
        assert_eq!(out.0.lock().unwrap().0.len(), HIGH_WATER);
        drop(flusher);
        assert_eq!(out.0.lock().unwrap().0.len(), HIGH_WATER);
    }

    #[test]
    fn lines_after_the_stop_are_still_written() {
        let out = Recorder::default();
        let (writer, flusher) = batched(out.clone()).unwrap();
        drop(flusher);
        line(&writer, "late\n");
        assert_eq!(out.0.lock().unwrap().0, b"late\n");
    }
}
