//! Where GeoNames files come from: a `.txt`, a `.zip` of them, a directory, or an http(s) URL.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Where a file came from (the import's provenance, docs/dataset.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// The path or URL as given.
    pub location: String,
    /// Upstream's `Last-Modified` and `ETag`, when downloaded.
    pub last_modified: Option<String>,
    pub etag: Option<String>,
}

/// What an earlier import recorded of a download, to ask upstream whether it changed.
#[derive(Debug, Clone, Default)]
pub struct Validators {
    pub last_modified: Option<String>,
    pub etag: Option<String>,
}

/// A file on local disk (URLs are downloaded first) and where it came from.
#[derive(Debug)]
pub struct Fetched {
    pub path: PathBuf,
    pub origin: Origin,
}

/// One postal-code file to read, on local disk.
#[derive(Debug)]
pub struct Input {
    pub path: PathBuf,
    zip: bool,
    pub origin: Origin,
}

/// The longest line a GeoNames file may have: theirs are at most 3.6 KB (cities500.txt,
/// with its alternate names; allCountries.txt 248 bytes). A longer one is refused before
/// it is held in memory.
pub const MAX_LINE_BYTES: usize = 64 * 1024;
/// The most a file may hold, read from disk, decompressed from a zip or downloaded: 8
/// times allCountries.txt (123 MB).
pub const MAX_FILE_BYTES: u64 = 1 << 30;
/// Redirects a download follows, each to https (never from https down to http).
const MAX_REDIRECTS: usize = 5;

/// A reader of a GeoNames file that fails, with the file's name, on a line longer than
/// [`MAX_LINE_BYTES`] or beyond [`MAX_FILE_BYTES`] in all: a zip bomb or a file of one
/// endless line costs a bounded buffer, not the machine's memory.
pub struct Bounded<R> {
    inner: R,
    name: String,
    line: u64,
    in_line: usize,
    total: u64,
    max_total: u64,
}

/// The most a file read whole into memory may hold: the gazetteer (cities500.txt is
/// 33 MB) and countryInfo.txt (31 KB).
pub const MAX_WHOLE_FILE_BYTES: u64 = 256 << 20;

impl<R: Read> Bounded<R> {
    pub fn new(inner: R, name: &str) -> Bounded<R> {
        Bounded::at_most(inner, name, MAX_FILE_BYTES)
    }

    /// As `new`, at most `max_total` bytes in all.
    pub fn at_most(inner: R, name: &str, max_total: u64) -> Bounded<R> {
        Bounded {
            inner,
            name: name.to_owned(),
            line: 1,
            in_line: 0,
            total: 0,
            max_total,
        }
    }

    fn refuse(&self, why: String) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {why}: not a GeoNames file", self.name),
        )
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.total += n as u64;
        if self.total > self.max_total {
            return Err(self.refuse(format!("more than {} bytes", self.max_total)));
        }
        let mut rest = &buf[..n];
        loop {
            match rest.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    if self.in_line + end > MAX_LINE_BYTES {
                        break;
                    }
                    self.in_line = 0;
                    self.line += 1;
                    rest = &rest[end + 1..];
                }
                None => {
                    self.in_line += rest.len();
                    if self.in_line <= MAX_LINE_BYTES {
                        return Ok(n);
                    }
                    break;
                }
            }
        }
        Err(self.refuse(format!(
            "line {} is longer than {MAX_LINE_BYTES} bytes",
            self.line
        )))
    }
}

/// A zip entry read: its name and its time as the zip stores it (`2026-03-01T03:14:00`,
/// no zone).
pub type EntryRead = (String, Option<String>);

impl Input {
    /// Calls `read` with a display name and a reader for each postal-code file of this
    /// input (every `.txt` entry of a zip but its `readme.txt`), in order; answers the zip
    /// entries read (none for a `.txt`).
    pub fn read_each(
        &self,
        progress: bool,
        mut read: impl FnMut(&str, &mut dyn Read) -> Result<()>,
    ) -> Result<Vec<EntryRead>> {
        let path = &self.path;
        let mut entries = Vec::new();
        if !self.zip {
            let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            let bar = super::bar(progress, len, "reading {bytes}/{total_bytes}");
            let name = path.display().to_string();
            let mut reader = Bounded::new(
                BufReader::with_capacity(1 << 20, bar.wrap_read(file)),
                &name,
            );
            read(&name, &mut reader)?;
            bar.finish_and_clear();
            return Ok(entries);
        }
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut archive = zip::ZipArchive::new(BufReader::new(file))
            .with_context(|| format!("reading zip {}", path.display()))?;
        for i in 0..archive.len() {
            let entry = archive.by_index(i)?;
            let entry_name = entry.name().context("zip entry name")?.to_string();
            if !is_postal_file(&entry_name) {
                continue;
            }
            entries.push((entry_name.clone(), entry.last_modified().map(zip_time)));
            let bar = super::bar(progress, entry.size(), "reading {bytes}/{total_bytes}");
            let name = format!("{}:{entry_name}", path.display());
            let mut reader = Bounded::new(
                BufReader::with_capacity(1 << 20, bar.wrap_read(entry)),
                &name,
            );
            read(&name, &mut reader)?;
            bar.finish_and_clear();
        }
        Ok(entries)
    }
}

/// A zip entry's time, as stored (local time of whoever zipped it; the format has no zone).
fn zip_time(t: zip::DateTime) -> String {
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// The size and lower-case hex SHA-256 of a file.
pub fn digest(path: &Path) -> Result<(i64, String)> {
    use sha2::Digest;
    let mut file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hasher = sha2::Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut bytes = 0i64;
    loop {
        let n = file
            .read(&mut buffer)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        bytes += n as i64;
    }
    Ok((bytes, hex::encode(hasher.finalize())))
}

/// How the provenance names a source: a URL as given, a local path made absolute.
pub fn location(source: &str) -> String {
    if is_url(source) {
        return source.to_string();
    }
    std::fs::canonicalize(source).map_or_else(|_| source.to_string(), |p| p.display().to_string())
}

/// `source` on local disk: the path itself, or the URL downloaded into `staging`; `None`
/// when `conditional` is given and upstream answers that the file has not changed.
pub fn fetch(
    source: &str,
    staging: &Path,
    progress: bool,
    conditional: Option<&Validators>,
) -> Result<Option<Fetched>> {
    if !is_url(source) {
        return Ok(Some(Fetched {
            path: PathBuf::from(source),
            origin: Origin {
                location: location(source),
                ..Origin::default()
            },
        }));
    }
    download(source, staging, progress, conditional)
}

/// The postal-code files named by one SOURCE argument of `postal-import`, once
/// [fetched](fetch).
pub fn resolve(source: &str, fetched: Fetched) -> Result<Vec<Input>> {
    let path = fetched.path;
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&path)
            .with_context(|| format!("listing {}", path.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?;
        entries.sort();
        return Ok(entries
            .into_iter()
            .filter(|p| p.is_file())
            .filter(|p| !p.to_str().is_some_and(is_gazetteer_file))
            .filter_map(|p| {
                let origin = Origin {
                    location: location(&p.display().to_string()),
                    ..Origin::default()
                };
                classify(&p, origin).ok()
            })
            .collect());
    }
    if !path.exists() {
        bail!("{source}: no such file or directory");
    }
    Ok(vec![classify(&path, fetched.origin)?])
}

/// `countryInfo.txt` in the directory of a local source (or in the directory itself).
pub fn country_info_beside(source: &str) -> Option<String> {
    if is_url(source) {
        return None;
    }
    let path = Path::new(source);
    let dir = if path.is_dir() { path } else { path.parent()? };
    let candidate = dir.join("countryInfo.txt");
    candidate.is_file().then(|| candidate.display().to_string())
}

/// The gazetteer's file name, upstream and in `../shared/geonames`.
pub const GAZETTEER_FILE: &str = "cities500.zip";

/// `cities500.zip` in the directory of a local source (or in the directory itself).
pub fn gazetteer_beside(source: &str) -> Option<String> {
    if is_url(source) {
        return None;
    }
    let path = Path::new(source);
    let dir = if path.is_dir() { path } else { path.parent()? };
    let candidate = dir.join(GAZETTEER_FILE);
    candidate.is_file().then(|| candidate.display().to_string())
}

/// Reads a gazetteer: a `.zip` holding one `.txt` (upstream's `cities500.zip`), or the
/// `.txt` itself, from a path or URL; and the file it read.
pub fn read_gazetteer(
    source: &str,
    staging: &Path,
    progress: bool,
    countries: &HashSet<String>,
) -> Result<(super::gazetteer::Gazetteer, Fetched)> {
    let fetched = fetch(source, staging, progress, None)?.context("not downloaded")?;
    let gazetteer = read_gazetteer_file(&fetched.path, countries)?;
    Ok((gazetteer, fetched))
}

fn read_gazetteer_file(
    path: &Path,
    countries: &HashSet<String>,
) -> Result<super::gazetteer::Gazetteer> {
    if !path.is_file() {
        bail!("no such file");
    }
    let name = path.display().to_string();
    if !name.to_ascii_lowercase().ends_with(".zip") {
        let file = File::open(path).with_context(|| format!("opening {name}"))?;
        let mut bounded = Bounded::at_most(file, &name, MAX_WHOLE_FILE_BYTES);
        return super::gazetteer::read(&name, &mut bounded, countries);
    }
    let file = File::open(path).with_context(|| format!("opening {name}"))?;
    let mut archive = zip::ZipArchive::new(BufReader::new(file))
        .with_context(|| format!("reading zip {name}"))?;
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i)?;
        let entry_name = entry.name().context("zip entry name")?.to_string();
        if is_postal_file(&entry_name) || is_gazetteer_file(&entry_name) {
            let name = format!("{name}:{entry_name}");
            let mut bounded = Bounded::at_most(&mut entry, &name, MAX_WHOLE_FILE_BYTES);
            return super::gazetteer::read(&name, &mut bounded, countries);
        }
    }
    bail!("the zip holds no .txt file")
}

/// A whole text file from a path or URL, and the file it is.
pub fn open_text(source: &str, staging: &Path, progress: bool) -> Result<(Box<dyn Read>, Fetched)> {
    let fetched = fetch(source, staging, progress, None)?.context("not downloaded")?;
    let path = &fetched.path;
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let name = path.display().to_string();
    Ok((
        Box::new(Bounded::at_most(
            BufReader::new(file),
            &name,
            MAX_WHOLE_FILE_BYTES,
        )),
        fetched,
    ))
}

pub fn is_url(source: &str) -> bool {
    source.starts_with("http://") || source.starts_with("https://")
}

fn classify(path: &Path, origin: Origin) -> Result<Input> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let lower = name.to_ascii_lowercase();
    let input = |zip| Input {
        path: path.to_path_buf(),
        zip,
        origin,
    };
    if lower.ends_with(".zip") {
        Ok(input(true))
    } else if is_postal_file(name) {
        Ok(input(false))
    } else {
        bail!("{}: not a postal-code file (.txt or .zip)", path.display())
    }
}

/// A `.txt` that is not the country table, a readme or a gazetteer.
fn is_postal_file(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    base.ends_with(".txt")
        && base != "readme.txt"
        && base != "countryinfo.txt"
        && !is_gazetteer_file(&base)
}

/// GeoNames' gazetteer files (`cities500.zip`, `cities1000.txt`, ...): not postal codes.
fn is_gazetteer_file(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    base.strip_prefix("cities").is_some_and(|rest| {
        rest.strip_suffix(".txt")
            .or_else(|| rest.strip_suffix(".zip"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Where a redirect of the download of `url`, now at `from`, to `location` goes (resolved
/// as a browser does: absolute, scheme-relative, host-relative or relative); refused when
/// it would leave https for http, or for anything but http(s).
fn redirected(url: &str, from: &str, location: &str) -> Result<String> {
    let refused = |next: &str| {
        anyhow::anyhow!(
            "downloading {url}: redirected to {next}, refused (an https download stays https)"
        )
    };
    let next = url::Url::parse(from)
        .and_then(|base| base.join(location))
        .map_err(|_| refused(location))?;
    let secure = from.starts_with("https://");
    match next.scheme() {
        "https" => Ok(next.to_string()),
        "http" if !secure => Ok(next.to_string()),
        _ => Err(refused(next.as_str())),
    }
}

/// Downloads `url` into `staging`, with a byte progress bar; with `conditional`, asks
/// with `If-None-Match` / `If-Modified-Since` and answers `None` on 304 Not Modified.
fn download(
    url: &str,
    staging: &Path,
    progress: bool,
    conditional: Option<&Validators>,
) -> Result<Option<Fetched>> {
    let name = url
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or("download.txt");
    let target = staging.join(name);
    // Bounded in time (a server that stalls fails the import, not hangs it), redirects
    // followed here: each to https, or http only when the URL given was http.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_resolve(Some(std::time::Duration::from_secs(30)))
        .timeout_connect(Some(std::time::Duration::from_secs(30)))
        .timeout_send_request(Some(std::time::Duration::from_secs(60)))
        .timeout_recv_response(Some(std::time::Duration::from_secs(60)))
        .timeout_recv_body(Some(std::time::Duration::from_secs(3600)))
        .build()
        .into();
    let mut at = url.to_owned();
    let mut redirects = 0;
    let mut response = loop {
        let mut request = agent.get(&at);
        if let Some(v) = conditional {
            if let Some(etag) = &v.etag {
                request = request.header("If-None-Match", etag);
            }
            if let Some(date) = &v.last_modified {
                request = request.header("If-Modified-Since", date);
            }
        }
        let response = request
            .call()
            .with_context(|| format!("downloading {at}"))?;
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .filter(|_| response.status().is_redirection() && response.status() != 304);
        let Some(location) = location else {
            break response;
        };
        let next = redirected(url, &at, location)?;
        redirects += 1;
        if redirects > MAX_REDIRECTS {
            bail!("downloading {url}: more than {MAX_REDIRECTS} redirects");
        }
        at = next;
    };
    let status = response.status().as_u16();
    if status == 304 && conditional.is_some() {
        return Ok(None);
    }
    if !(200..300).contains(&status) {
        bail!("downloading {url}: HTTP {status}");
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let origin = Origin {
        location: url.to_string(),
        last_modified: header("last-modified"),
        etag: header("etag"),
    };
    let len = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let bar = super::bar(progress, len, "downloading {bytes}/{total_bytes}");
    let mut out =
        File::create(&target).with_context(|| format!("creating {}", target.display()))?;
    let mut body = bar.wrap_read(
        response
            .body_mut()
            .with_config()
            .limit(MAX_FILE_BYTES)
            .reader(),
    );
    std::io::copy(&mut body, &mut out)
        .with_context(|| format!("downloading {url} (at most {MAX_FILE_BYTES} bytes)"))?;
    bar.finish_and_clear();
    Ok(Some(Fetched {
        path: target,
        origin,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirect_stays_on_https_and_a_path_stays_on_its_server() {
        let https = "https://download.geonames.org/export/zip/allCountries.zip";
        for (location, followed) in [
            (
                "https://mirror.example/a.zip",
                "https://mirror.example/a.zip",
            ),
            ("/other/a.zip", "https://download.geonames.org/other/a.zip"),
            ("b.zip", "https://download.geonames.org/export/zip/b.zip"),
            ("//cdn.example/a.zip", "https://cdn.example/a.zip"),
            (
                "/dl?u=http://x",
                "https://download.geonames.org/dl?u=http://x",
            ),
        ] {
            assert_eq!(redirected(https, https, location).unwrap(), followed);
        }
        for location in ["http://mirror.example/a.zip", "ftp://mirror.example/a.zip"] {
            assert_eq!(
                redirected(https, https, location).unwrap_err().to_string(),
                format!(
                    "downloading {https}: redirected to {location}, refused (an https download \
                     stays https)"
                )
            );
        }
        // A download given as http may be redirected to http or https; once on https, it
        // stays there.
        let http = "http://127.0.0.1:8000/US.txt";
        assert_eq!(
            redirected(http, http, "http://127.0.0.1:8000/v2/US.txt").unwrap(),
            "http://127.0.0.1:8000/v2/US.txt"
        );
        assert!(redirected(http, "https://mirror.example/US.txt", "http://x/US.txt").is_err());
    }

    #[test]
    fn a_line_longer_than_the_bound_or_a_file_without_newlines_is_refused() {
        let read = |bytes: Vec<u8>| -> std::io::Result<usize> {
            let mut out = Vec::new();
            Bounded::new(&bytes[..], "f.txt").read_to_end(&mut out)
        };
        let mut fine = vec![b'a'; MAX_LINE_BYTES];
        fine.push(b'\n');
        fine.extend(vec![b'b'; MAX_LINE_BYTES]);
        assert_eq!(read(fine).unwrap(), 2 * MAX_LINE_BYTES + 1);
        let mut long = b"US\t90210\n".to_vec();
        long.extend(vec![b'\t'; MAX_LINE_BYTES + 1]);
        assert_eq!(
            read(long).unwrap_err().to_string(),
            "f.txt: line 2 is longer than 65536 bytes: not a GeoNames file"
        );
    }
}
