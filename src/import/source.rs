//! Where GeoNames files come from: a `.txt`, a `.zip` of them, a directory, or an http(s) URL.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// One postal-code file to read, on local disk (URLs are downloaded first).
#[derive(Debug)]
pub enum Input {
    Text(PathBuf),
    Zip(PathBuf),
}

impl Input {
    /// Calls `read` with a display name and a reader for each postal-code file of this
    /// input (every `.txt` entry of a zip but its `readme.txt`), in order.
    pub fn read_each(
        &self,
        progress: bool,
        mut read: impl FnMut(&str, &mut dyn Read) -> Result<()>,
    ) -> Result<()> {
        match self {
            Input::Text(path) => {
                let file =
                    File::open(path).with_context(|| format!("opening {}", path.display()))?;
                let len = file.metadata().map(|m| m.len()).unwrap_or(0);
                let bar = super::bar(progress, len, "reading {bytes}/{total_bytes}");
                let mut reader = BufReader::with_capacity(1 << 20, bar.wrap_read(file));
                read(&path.display().to_string(), &mut reader)?;
                bar.finish_and_clear();
            }
            Input::Zip(path) => {
                let file =
                    File::open(path).with_context(|| format!("opening {}", path.display()))?;
                let mut archive = zip::ZipArchive::new(BufReader::new(file))
                    .with_context(|| format!("reading zip {}", path.display()))?;
                for i in 0..archive.len() {
                    let entry = archive.by_index(i)?;
                    let entry_name = entry.name().context("zip entry name")?.to_string();
                    if !is_postal_file(&entry_name) {
                        continue;
                    }
                    let bar = super::bar(progress, entry.size(), "reading {bytes}/{total_bytes}");
                    let mut reader = BufReader::with_capacity(1 << 20, bar.wrap_read(entry));
                    read(&format!("{}:{entry_name}", path.display()), &mut reader)?;
                    bar.finish_and_clear();
                }
            }
        }
        Ok(())
    }
}

/// The postal-code files named by one SOURCE argument of `postal-import`.
pub fn resolve(source: &str, staging: &Path, progress: bool) -> Result<Vec<Input>> {
    let path = if is_url(source) {
        download(source, staging, progress)?
    } else {
        PathBuf::from(source)
    };
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
            .filter_map(|p| classify(&p).ok())
            .collect());
    }
    if !path.exists() {
        bail!("{source}: no such file or directory");
    }
    Ok(vec![classify(&path)?])
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
/// `.txt` itself, from a path or URL.
pub fn read_gazetteer(
    source: &str,
    staging: &Path,
    progress: bool,
    countries: &HashSet<String>,
) -> Result<super::gazetteer::Gazetteer> {
    let path = if is_url(source) {
        download(source, staging, progress)?
    } else {
        PathBuf::from(source)
    };
    if !path.is_file() {
        bail!("no such file");
    }
    let name = path.display().to_string();
    if !name.to_ascii_lowercase().ends_with(".zip") {
        let mut file = File::open(&path).with_context(|| format!("opening {name}"))?;
        return super::gazetteer::read(&name, &mut file, countries);
    }
    let file = File::open(&path).with_context(|| format!("opening {name}"))?;
    let mut archive = zip::ZipArchive::new(BufReader::new(file))
        .with_context(|| format!("reading zip {name}"))?;
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i)?;
        let entry_name = entry.name().context("zip entry name")?.to_string();
        if is_postal_file(&entry_name) || is_gazetteer_file(&entry_name) {
            return super::gazetteer::read(&format!("{name}:{entry_name}"), &mut entry, countries);
        }
    }
    bail!("the zip holds no .txt file")
}

/// A whole text file from a path or URL.
pub fn open_text(source: &str, staging: &Path, progress: bool) -> Result<Box<dyn Read>> {
    let path = if is_url(source) {
        download(source, staging, progress)?
    } else {
        PathBuf::from(source)
    };
    let file = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
    Ok(Box::new(BufReader::new(file)))
}

fn is_url(source: &str) -> bool {
    source.starts_with("http://") || source.starts_with("https://")
}

fn classify(path: &Path) -> Result<Input> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".zip") {
        Ok(Input::Zip(path.to_path_buf()))
    } else if is_postal_file(name) {
        Ok(Input::Text(path.to_path_buf()))
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

/// Downloads `url` into `staging`, with a byte progress bar.
fn download(url: &str, staging: &Path, progress: bool) -> Result<PathBuf> {
    let name = url
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or("download.txt");
    let target = staging.join(name);
    let mut response = ureq::get(url)
        .call()
        .with_context(|| format!("downloading {url}"))?;
    let len = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let bar = super::bar(progress, len, "downloading {bytes}/{total_bytes}");
    let mut out =
        File::create(&target).with_context(|| format!("creating {}", target.display()))?;
    let mut body = bar.wrap_read(response.body_mut().as_reader());
    std::io::copy(&mut body, &mut out).with_context(|| format!("downloading {url}"))?;
    bar.finish_and_clear();
    Ok(target)
}
