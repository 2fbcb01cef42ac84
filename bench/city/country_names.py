#!/usr/bin/env python3
"""Writes src/index/city/country_names.tsv: each country's names in its own languages and
in English, which a city query may end with (`Roma, Italia`, `Kraków, Polska`, `Genève,
Suisse`; docs/city.md, step 2). The names are ISO 3166's, translated by the iso-codes
project as the `pycountry` package ships them (installed into target/official-venv); the
languages are those countryInfo.txt gives each country.

Usage: bench/city/country_names.py  (from the repository root; rerun when a country or
language is added: the table is committed, the server reads no network)."""
import gettext
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV = os.path.join(ROOT, "target", "official-venv")
PYCOUNTRY = "pycountry==24.6.1"
# Short forms people write that ISO 3166 does not list (folded the same way at load).
EXTRA = {
    "GB": ["UK", "U.K.", "Great Britain", "Britain", "England", "Scotland", "Wales", "Northern Ireland"],
    "US": ["USA", "U.S.A.", "U.S.", "US"],
    "RU": ["Россия"],
    "AE": ["UAE"],
    "NL": ["Holland"],
}


def ensure_pycountry():
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", PYCOUNTRY], check=True)
    return python


def main():
    if os.environ.get("COUNTRY_NAMES_INNER") != "1":
        python = ensure_pycountry()
        env = dict(os.environ, COUNTRY_NAMES_INNER="1")
        sys.exit(subprocess.run([python, __file__], env=env).returncode)
    import pycountry

    info = os.path.join(ROOT, "..", "shared", "geonames", "countryInfo.txt")
    rows = []
    with open(info, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                continue
            cols = line.rstrip("\n").split("\t")
            if len(cols) < 16:
                continue
            code, name, languages = cols[0], cols[4], cols[15]
            country = pycountry.countries.get(alpha_2=code)
            english = [name]
            if country is not None:
                for attr in ("name", "common_name", "official_name"):
                    value = getattr(country, attr, None)
                    if value:
                        english.append(value)
            names = list(english)
            langs = []
            for lang in languages.split(","):
                base = lang.split("-")[0].strip()
                if base and base not in langs:
                    langs.append(base)
            for lang in langs:
                try:
                    t = gettext.translation("iso3166-1", pycountry.LOCALES_DIR, languages=[lang])
                except OSError:
                    continue
                for value in english[1:]:
                    translated = t.gettext(value)
                    if translated != value:
                        names.append(translated)
            names.extend(EXTRA.get(code, []))
            seen = []
            for n in names:
                n = n.strip()
                if n and n not in seen and "\t" not in n and "," not in n:
                    seen.append(n)
            rows.append((code, seen))
    out = os.path.join(ROOT, "src", "index", "city", "country_names.tsv")
    with open(out, "w", encoding="utf-8") as f:
        for code, names in sorted(rows):
            f.write(code + "\t" + ",".join(names) + "\n")
    print(f"{out}: {len(rows)} countries, {sum(len(n) for _, n in rows)} names")


if __name__ == "__main__":
    main()
