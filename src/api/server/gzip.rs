//! gzip on the way out, for every answer of the server (docs/http.md, "Compression").
//!
//! One place, after the application, so that no operation compresses on its own: an
//! answer whose body is over [`MIN_BYTES`] is gzip-encoded when the request's
//! `Accept-Encoding` admits gzip, with `Content-Encoding: gzip` and the new length.
//! Every answer that could have been (a body over `MIN_BYTES` of a status that has one,
//! not already encoded) carries `Vary: Accept-Encoding`, encoded or not, so a cache never
//! hands one client's encoding to another. A body of unknown length (a stream: the audit
//! log's CSV of more than a page) counts as over the bound and is compressed as it goes.
//!
//! The hot path pays a header lookup: a lookup's answer (about 150 bytes) is under the
//! bound, known from the body's exact size without reading it. Level 1 (fastest) of
//! zlib-rs: on a 1,000-record bulk answer it keeps most of level 6's saving for a
//! fraction of its CPU (docs/http.md has the figures).

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use futures_util::StreamExt;
use poem::http::header::{self, HeaderMap, HeaderValue};
use poem::http::{Response, StatusCode};

/// Bodies up to this many bytes are sent as they are: gzip's 18-byte frame and a
/// compressor's start-up cost more than they save, and the hot path stays untouched.
pub const MIN_BYTES: u64 = 1024;

/// The gzip level: 1, the fastest (module doc).
const LEVEL: u32 = 1;

/// Whether `Accept-Encoding` admits gzip (RFC 9110, 12.5.3): `gzip` (or `x-gzip`) with a
/// weight above 0, or else `*` with a weight above 0. Absent, or `gzip;q=0`: no. An
/// element whose weight does not parse is ignored (the body is then sent as it is, which
/// every client accepts).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut gzip = None;
    let mut any = None;
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for element in value.split(',') {
            let mut parts = element.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let Some(weight) = weight(parts) else {
                continue;
            };
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                gzip = Some(gzip.map_or(weight, |w: bool| w || weight));
            } else if coding == "*" {
                any = Some(weight);
            }
        }
    }
    gzip.or(any).unwrap_or(false)
}

/// Whether an element's parameters give it a weight above 0 (`q=0`, `q=0.0`, `q=0.000`
/// refuse; no `q` accepts); `None` when the weight is not a qvalue.
fn weight<'a>(parameters: impl Iterator<Item = &'a str>) -> Option<bool> {
    let mut positive = true;
    for parameter in parameters {
        let Some((name, value)) = parameter.split_once('=') else {
            continue;
        };
        if !name.trim().eq_ignore_ascii_case("q") {
            continue;
        }
        let value = value.trim();
        let (whole, fraction) = value.split_once('.').unwrap_or((value, ""));
        let qvalue = matches!(whole, "0" | "1")
            && fraction.len() <= 3
            && fraction.bytes().all(|b| b.is_ascii_digit())
            && (whole == "0" || fraction.bytes().all(|b| b == b'0'));
        if !qvalue {
            return None;
        }
        positive = whole == "1" || fraction.bytes().any(|b| b != b'0');
    }
    Some(positive)
}

/// `response` gzip-encoded when `accepts` (the request's [`accepts_gzip`]) and its body
/// is over [`MIN_BYTES`]; `Vary: Accept-Encoding` on every answer that could have been.
pub async fn encode<B>(response: Response<B>, accepts: bool) -> Response<B>
where
    B: hyper::body::Body + From<poem::Body> + Into<poem::Body>,
{
    let status = response.status();
    let size = hyper::body::Body::size_hint(response.body()).exact();
    // A body of unknown length is a stream (the audit log's CSV of more than a page, far
    // over the bound): compressed as it goes.
    let eligible = size.is_none_or(|n| n > MIN_BYTES)
        && !(status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED)
        && !response.headers().contains_key(header::CONTENT_ENCODING);
    if !eligible {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    parts
        .headers
        .append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if !accepts {
        return Response::from_parts(parts, body);
    }
    let body: poem::Body = body.into();
    if size.is_none() {
        parts
            .headers
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        return Response::from_parts(parts, B::from(gzip_stream(body)));
    }
    let plain = match body.into_bytes().await {
        Ok(plain) => plain,
        Err(e) => {
            // A body in memory cannot fail to be read; a stream would not have come here.
            tracing::error!("reading an answer to compress it: {e}");
            let mut response = Response::from_parts(
                parts,
                B::from(poem::Body::from_vec(
                    br#"{"error":"Internal server error"}"#.to_vec(),
                )),
            );
            *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            response.headers_mut().remove(header::CONTENT_LENGTH);
            return response;
        }
    };
    let Some(compressed) = gzip(&plain) else {
        return Response::from_parts(parts, B::from(poem::Body::from_bytes(plain)));
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    Response::from_parts(parts, B::from(poem::Body::from_vec(compressed)))
}

/// The stream `plain` as a gzip member, at [`LEVEL`], compressed a chunk at a time as it
/// is read: what the compressor has written goes out after each chunk, without a flush
/// (which would cost ratio), so a chunk's tail may wait for the next. An error of `plain`
/// ends the stream with it, the member unfinished (the client sees a broken answer).
fn gzip_stream(plain: poem::Body) -> poem::Body {
    let encoder = GzEncoder::new(Vec::new(), Compression::new(LEVEL));
    let chunks = plain.into_bytes_stream();
    let compressed = futures_util::stream::unfold(
        (Box::pin(chunks), Some(encoder)),
        |(mut chunks, encoder)| async move {
            let mut encoder = encoder?;
            loop {
                let written = match chunks.next().await {
                    Some(Ok(chunk)) => encoder
                        .write_all(&chunk)
                        .map(|()| std::mem::take(encoder.get_mut())),
                    Some(Err(e)) => Err(e),
                    None => {
                        return Some((encoder.finish().map(bytes::Bytes::from), (chunks, None)));
                    }
                };
                match written {
                    Ok(out) if out.is_empty() => continue,
                    Ok(out) => return Some((Ok(bytes::Bytes::from(out)), (chunks, Some(encoder)))),
                    Err(e) => return Some((Err(e), (chunks, None))),
                }
            }
        },
    );
    poem::Body::from_bytes_stream(compressed)
}

/// `plain` as a gzip member, at [`LEVEL`] (`None` cannot happen: writing into a `Vec`
/// does not fail).
pub fn gzip(plain: &[u8]) -> Option<Vec<u8>> {
    // About a sixth of a JSON answer, in practice; grows if need be.
    let mut encoder = GzEncoder::new(
        Vec::with_capacity(plain.len() / 6 + 64),
        Compression::new(LEVEL),
    );
    encoder
        .write_all(plain)
        .and_then(|()| encoder.finish())
        .ok()
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn accepts(values: &[&str]) -> bool {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(
                header::ACCEPT_ENCODING,
                HeaderValue::from_str(value).unwrap(),
            );
        }
        accepts_gzip(&headers)
    }

    #[test]
    fn gzip_is_accepted_when_named_or_starred_with_a_weight_above_zero() {
        for yes in [
            &["gzip"][..],
            &["GZip"],
            &["x-gzip"],
            &["deflate, gzip;q=0.5, br"],
            &["gzip;q=1.000"],
            &["gzip ; q=0.001"],
            &["*"],
            &["br;q=1, *;q=0.1"],
            &["br", "gzip"],
            &["gzip;level=9"],
        ] {
            assert!(accepts(yes), "{yes:?}");
        }
    }

    #[test]
    fn gzip_is_refused_when_absent_weighted_zero_or_unparsable() {
        for no in [
            &[][..],
            &[""],
            &["identity"],
            &["br, deflate"],
            &["gzip;q=0"],
            &["gzip;Q=0.000"],
            &["gzip;q=0, *"],
            &["*;q=0"],
            &["gzip;q=2"],
            &["gzip;q=0.5x"],
            &["gzip;q=0.1234"],
        ] {
            assert!(!accepts(no), "{no:?}");
        }
    }

    /// An answer as the server hands it to hyper.
    fn response(
        status: StatusCode,
        body: Vec<u8>,
    ) -> Response<impl hyper::body::Body + From<poem::Body> + Into<poem::Body>> {
        let mut response = poem::Response::from(body);
        response.set_status(status);
        Response::from(response)
    }

    async fn bytes(response: Response<impl Into<poem::Body>>) -> Vec<u8> {
        response.into_body().into().into_vec().await.unwrap()
    }

    fn gunzip(compressed: &[u8]) -> Vec<u8> {
        let mut decoded = Vec::new();
        flate2::read::GzDecoder::new(compressed)
            .read_to_end(&mut decoded)
            .unwrap();
        decoded
    }

    #[tokio::test]
    async fn a_body_over_1_kib_is_gzipped_when_accepted_and_decodes_to_itself() {
        let plain: Vec<u8> = (0..5000).map(|i| b"{\"a\":1}"[i % 7]).collect();
        let encoded = encode(response(StatusCode::OK, plain.clone()), true).await;
        assert_eq!(encoded.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(encoded.headers()[header::VARY], "Accept-Encoding");
        let compressed = bytes(encoded).await;
        assert!(compressed.len() < plain.len() / 10, "{}", compressed.len());
        assert_eq!(gunzip(&compressed), plain);
    }

    #[tokio::test]
    async fn a_stream_is_gzipped_as_it_goes_when_accepted_and_decodes_to_itself() {
        let chunks: Vec<Vec<u8>> = (0..40u8)
            .map(|n| format!("line {n},\"quoted\"\n").repeat(50).into_bytes())
            .collect();
        let plain = chunks.concat();
        let streamed = || {
            let chunks = chunks.clone().into_iter().map(Ok::<_, std::io::Error>);
            Response::from(
                poem::Response::builder().body(poem::Body::from_bytes_stream(
                    futures_util::stream::iter(chunks),
                )),
            )
        };
        let encoded = encode(streamed(), true).await;
        assert_eq!(encoded.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(encoded.headers()[header::VARY], "Accept-Encoding");
        assert!(!encoded.headers().contains_key(header::CONTENT_LENGTH));
        let compressed = bytes(encoded).await;
        assert!(compressed.len() < plain.len() / 10, "{}", compressed.len());
        assert_eq!(gunzip(&compressed), plain);
        let refused = encode(streamed(), false).await;
        assert_eq!(refused.headers()[header::VARY], "Accept-Encoding");
        assert!(!refused.headers().contains_key(header::CONTENT_ENCODING));
        assert_eq!(bytes(refused).await, plain);
    }

    #[tokio::test]
    async fn small_bodies_refused_encodings_and_bodiless_statuses_are_sent_as_they_are() {
        let small = encode(response(StatusCode::OK, vec![b'x'; 1024]), true).await;
        assert!(small.headers().is_empty());
        assert_eq!(bytes(small).await.len(), 1024);
        // Could have been compressed: Vary says so.
        let refused = encode(response(StatusCode::OK, vec![b'x'; 1025]), false).await;
        assert_eq!(refused.headers()[header::VARY], "Accept-Encoding");
        assert!(!refused.headers().contains_key(header::CONTENT_ENCODING));
        assert_eq!(bytes(refused).await.len(), 1025);
        let mut encoded = response(StatusCode::OK, vec![b'x'; 2000]);
        encoded
            .headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static("br"));
        let encoded = encode(encoded, true).await;
        assert_eq!(encoded.headers()[header::CONTENT_ENCODING], "br");
        assert!(!encoded.headers().contains_key(header::VARY));
        let not_modified = encode(response(StatusCode::NOT_MODIFIED, vec![b'x'; 2000]), true).await;
        assert!(not_modified.headers().is_empty());
    }
}
