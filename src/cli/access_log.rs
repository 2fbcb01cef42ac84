//! `postal serve`'s access lines, formatted here and appended to the log writer's buffer.
//!
//! Why not a `tracing` event per request: the subscriber's formatting of it (its
//! timestamp, a visitor per field, `fmt::write`) cost about 5% of the lookup throughput
//! (perf under `bench/api.sh`, docs/money.md). The lines keep the shape the subscriber
//! gives every other line, so a reader or a collector sees one format:
//!
//! ```text
//! 2026-11-22T18:58:37.123456Z  INFO access request_id=… method=POST path=/api/lookup status=200 micros=41
//! {"timestamp":"2026-11-22T18:58:37.123456Z","level":"INFO","message":"access","request_id":"…","method":"POST","path":"/api/lookup","status":200,"micros":41}
//! ```

use std::cell::RefCell;
use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::api::telemetry::{AccessLine, AccessLog};
use tracing_subscriber::fmt::MakeWriter;

use super::log_writer::Batched;

/// Text for a person, one JSON object a line for a collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// The access log of `postal serve`: lines into the batched stderr writer.
pub struct Lines<W> {
    format: Format,
    writer: Batched<W>,
}

impl<W> Lines<W> {
    pub fn new(format: Format, writer: Batched<W>) -> Lines<W> {
        Lines { format, writer }
    }
}

impl<W> std::fmt::Debug for Lines<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lines")
            .field("format", &self.format)
            .finish()
    }
}

impl<W: std::io::Write + Send + 'static> AccessLog for Lines<W> {
    fn record(&self, line: &AccessLine<'_>) {
        thread_local! {
            static BUFFER: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(256));
        }
        BUFFER.with(|buffer| {
            let mut buffer = buffer.borrow_mut();
            buffer.clear();
            format_line(&mut buffer, self.format, SystemTime::now(), line);
            // The writer only appends to its buffer (it never fails).
            let _ = self.writer.make_writer().write_all(&buffer);
        });
    }
}

/// Appends `line` (with its newline) as `format` wants it, stamped `at`.
fn format_line(out: &mut Vec<u8>, format: Format, at: SystemTime, line: &AccessLine<'_>) {
    match format {
        Format::Text => {
            timestamp(out, at);
            out.extend_from_slice(b"  INFO access request_id=");
            out.extend_from_slice(line.request_id.as_bytes());
            out.extend_from_slice(b" method=");
            out.extend_from_slice(line.method.as_bytes());
            out.extend_from_slice(b" path=");
            out.extend_from_slice(line.path.as_bytes());
            out.extend_from_slice(b" status=");
            number(out, line.status.into());
            out.extend_from_slice(b" micros=");
            number(out, line.micros);
        }
        Format::Json => {
            out.extend_from_slice(b"{\"timestamp\":\"");
            timestamp(out, at);
            out.extend_from_slice(b"\",\"level\":\"INFO\",\"message\":\"access\",\"request_id\":");
            json_string(out, line.request_id);
            out.extend_from_slice(b",\"method\":");
            json_string(out, line.method);
            out.extend_from_slice(b",\"path\":");
            json_string(out, line.path);
            out.extend_from_slice(b",\"status\":");
            number(out, line.status.into());
            out.extend_from_slice(b",\"micros\":");
            number(out, line.micros);
            out.push(b'}');
        }
    }
    out.push(b'\n');
}

/// `2026-11-22T18:58:37.123456Z`, as the subscriber stamps its lines (RFC 3339, UTC,
/// microseconds). The date and time of day are worked out once a second per thread.
fn timestamp(out: &mut Vec<u8>, at: SystemTime) {
    thread_local! {
        static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = since.as_secs();
    SECOND.with(|second| {
        let mut second = second.borrow_mut();
        if second.0 != seconds {
            let days = (seconds / 86_400) as i64;
            let (year, month, day) = crate::domain::date::civil_from_days(days);
            let of_day = seconds % 86_400;
            second.1 = format!(
                "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
                of_day / 3600,
                of_day / 60 % 60,
                of_day % 60
            );
            second.0 = seconds;
        }
        out.extend_from_slice(second.1.as_bytes());
    });
    // `.{:06}Z` without the formatting machinery (with `write!`, the line's three numbers
    // were most of its cost, issue 37).
    let micros = since.subsec_micros();
    out.push(b'.');
    for power in [100_000, 10_000, 1_000, 100, 10, 1] {
        out.push(b'0' + (micros / power % 10) as u8);
    }
    out.push(b'Z');
}

/// `n` in decimal.
fn number(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// `text` as a JSON string (the API's writer: as it is unless it needs an escape).
fn json_string(out: &mut Vec<u8>, text: &str) {
    // Writing to a Vec cannot fail, and a str always serializes.
    let _ = crate::api::json_string(out, text);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn line(path: &str) -> AccessLine<'_> {
        AccessLine {
            request_id: "r\"1\\",
            method: "POST",
            path,
            status: 200,
            micros: 41,
        }
    }

    fn at(seconds: u64, micros: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(seconds, micros * 1000)
    }

    #[test]
    fn a_text_line_has_the_subscribers_shape() {
        let mut out = Vec::new();
        // 2026-11-22T18:58:37Z
        format_line(
            &mut out,
            Format::Text,
            at(1_795_373_917, 1_234),
            &line("/api/lookup"),
        );
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out,
            "2026-11-22T18:58:37.001234Z  INFO access request_id=r\"1\\ method=POST \
             path=/api/lookup status=200 micros=41\n"
        );
    }

    #[test]
    fn a_json_line_is_one_object_with_the_fields_escaped() {
        let mut out = Vec::new();
        format_line(
            &mut out,
            Format::Json,
            at(951_782_400, 999_999),
            &line("/a\u{1}\n"),
        );
        let out = String::from_utf8(out).unwrap();
        assert!(out.ends_with('\n'));
        let value: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "timestamp": "2000-02-29T00:00:00.999999Z",
                "level": "INFO",
                "message": "access",
                "request_id": "r\"1\\",
                "method": "POST",
                "path": "/a\u{1}\n",
                "status": 200,
                "micros": 41,
            })
        );
    }

    #[test]
    fn the_stamp_follows_the_clock_across_seconds_and_days() {
        let mut out = Vec::new();
        timestamp(&mut out, at(86_399, 5));
        out.push(b' ');
        timestamp(&mut out, at(86_400, 0));
        out.push(b' ');
        timestamp(&mut out, at(86_399, 6));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "1970-01-01T23:59:59.000005Z 1970-01-02T00:00:00.000000Z 1970-01-01T23:59:59.000006Z"
        );
    }
}
