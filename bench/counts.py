"""Counted, not timed (bench/counts.sh, issue 37): per request, the instructions the server
executes (valgrind's callgrind, counting only while the requests of one kind are served:
`--instr-atstart=no`, then `callgrind_control -i on`, `-d` (a dump zeroes the counters),
the requests, `-d`, `-i off`), its system calls (`strace -f -ttt`, by timestamp) and its
context switches (voluntary and not, /proc/PID/task/*/status, in a window without strace).
Every thread of the server counts: the billing writer, the log writer, the timers; the
instructions of the billing and log writers are also shown apart (`OTHER_THREAD_ROOTS`),
and the serving threads' are the rest.
System calls and switches are counted per thread, and an idle window as long as the
requests' (measured the same way, right after) is subtracted: what idle workers and timers
do meanwhile is not the requests'. The threads that read or write the client's socket
are the serving ones (tokio's workers; the connection may move between them); the rest
("other threads": billing writer, log writer) are those the requests wake.

validate-bulk's instructions are also split by phase, per record, from the callgrind dump
of its window: the inclusive cost of the functions that bound each phase (`PHASES`), the
rest of the request (HTTP, key, billing, envelope) being the difference.

One keep-alive connection, requests one after another, the same N of each kind; a warm-up
of each kind first (not counted).

Usage: python3 counts.py --postal BIN --bare BIN --db DB --key sk_... --pub pub_... [--n N]
       [--only bare,validate-bulk]  (only the rows whose names start so; default all)
"""

import argparse
import glob
import http.client
import json
import os
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

ORIGIN = "https://shop.example"
BULK = "validate-bulk, 1,000 records"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Client:
    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def send(self, request):
        method, path, headers, body = request
        try:
            self.conn.request(method, path, body, headers)
            reply = self.conn.getresponse()
        except (http.client.HTTPException, ConnectionError):
            # A server under valgrind may drop a connection it accepted while starting.
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
            self.conn.request(method, path, body, headers)
            reply = self.conn.getresponse()
        data = reply.read()
        if reply.status != 200:
            raise RuntimeError(f"{method} {path}: {reply.status} {data[:200]!r}")
        return data


def wait_ready(port, proc, probe, seconds=900):
    """Until `probe` is answered 200 (a server under valgrind takes seconds to start)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            client = Client(port)
            client.send(probe)
            client.conn.close()
            return
        except (OSError, http.client.HTTPException, RuntimeError):
            time.sleep(1)
    raise RuntimeError("server not ready")


def requests_of(db, key, pub, n, rng):
    """(kind, [requests]) for the postal server: N requests of each kind."""
    conn = sqlite3.connect(db)
    codes = [r for r in conn.execute(
        "SELECT country, postal_code FROM postal_codes WHERE country IN ('US', 'DE', 'GB', 'JP')")]
    places = [r for r in conn.execute(
        "SELECT DISTINCT country, place_name FROM postal_codes WHERE country IN ('US', 'DE', 'GB') "
        "AND admin_name1 IS NOT NULL")]
    points = [r for r in conn.execute(
        "SELECT latitude, longitude FROM postal_codes WHERE latitude IS NOT NULL")]
    us_codes = [c for cc, c in codes if cc == "US"]
    auth = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}

    def post(path, body):
        body = dict(body, apiKey=key)
        return ("POST", path, auth, json.dumps(body))

    kinds = []
    kinds.append(("lookup, POST, secret key", [
        post("/api/lookup", {"zipcode": c, "country": "US"}) for c in rng.choices(us_codes, k=n)]))
    kinds.append(("lookup, GET, publishable key + Origin", [
        ("GET", f"/api/lookup?zipcode={c}&country=US&key={pub}", {"Origin": ORIGIN}, None)
        for c in rng.choices(us_codes, k=n)]))
    records = [{"postalCode": c, "countryCode": cc} for cc, c in rng.choices(codes, k=1000)]
    kinds.append((BULK, [
        post("/api/validate-bulk", {"records": records}) for _ in range(max(1, n // 20))]))
    kinds.append(("city", [
        post("/api/city", {"city": name, "country": cc})
        for cc, name in rng.choices([p for p in places if p[0] != "US"], k=n)]))
    kinds.append(("nearest, 10 codes", [
        post("/api/nearest", {"latitude": lat, "longitude": lon, "limit": 10})
        for lat, lon in rng.choices(points, k=n)]))
    return kinds


def bare_requests(n):
    return [("POST", "/api/lookup", {"Content-Type": "application/json"}, "{}")] * n


# validate-bulk's phases: (name, functions whose inclusive costs sum to it). Names as
# callgrind writes them; a phase whose functions are all missing from the dump (renamed,
# inlined) stops the run rather than print a zero.
PHASES = [
    ("JSON parse", [
        # body text -> the fields and the records read for their codes
        "postal::api::contract::ContractJson<T>::from_bytes",
        # -> the checked records (Operation::parse)
        "postal::api::contract::ContractJson<T>::bulk_records",
        # the records freed
        "core::ptr::drop_in_place<core::option::Option<postal::api::code_records::CodeRecords>>",
    ]),
    ("work", [
        # each record against the index (Operation::work)
        "<postal::api::routes::validate_bulk::ValidateBulk as postal::api::billed::Operation>::work",
    ]),
    ("JSON write", [
        # the answer -> its bytes, and the answer freed (`Reply`'s into_response, which it
        # calls, is inlined in it)
        "<postal::api::once::Replayable<T> as poem::web::IntoResponse>::into_response",
    ]),
]


# The functions the threads other than the serving ones run in (a thread whose dump names
# one is another): the billing writer (its SQLite flushes depend on how many
# requests a timer tick gathers, so they move between runs) and the access log's writer.
# Each other thread by name, with the functions its callgrind file may start from: the
# log writer's loop is inlined into its thread's closure in some builds (then the root is
# the function it calls), the same source either way.
OTHER_THREAD_ROOTS = {
    "billing writer": ["postal::billing::writer::run_writer"],
    "log writer": ["postal::cli::log_writer::write_batches",
                   "postal::cli::log_writer::Shared<W>::write_batch"],
}


def inclusive_costs(path):
    """{function: inclusive Ir} of a callgrind dump: the costs of the calls made to each
    function by any other function (positions: line, events: Ir, compressed names)."""
    names = {}

    def name(kind, text):
        m = re.match(r"\((\d+)\)(?: (.*))?$", text)
        if not m:
            return text
        if m.group(2) is not None:
            names[kind, m.group(1)] = m.group(2)
        return names.get((kind, m.group(1)), text)

    inclusive = {}
    fn = cfn = called = None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("fn="):
                fn = name("fn", line[3:])
            elif line.startswith("cfn="):
                cfn = name("fn", line[4:])
            elif line.startswith(("fl=", "fi=", "fe=")):
                name("fl", line[3:])
            elif line.startswith(("cfi=", "cfl=")):
                name("fl", line[4:])
            elif line.startswith("calls="):
                called = cfn
            elif called is not None and line[:1] in "0123456789+-*" and line:
                if called != fn:
                    inclusive[called] = inclusive.get(called, 0) + int(line.split()[1])
                called = None
    return inclusive


def phases_of(paths, total, records):
    """[(phase, Ir per record)] of validate-bulk's window (its dumps, one a thread), the
    rest last."""
    inclusive = {}
    for path in paths:
        for function, cost in inclusive_costs(path).items():
            inclusive[function] = inclusive.get(function, 0) + cost
    split = []
    for phase, functions in PHASES:
        found = [inclusive[f] for f in functions if f in inclusive]
        if not found:
            raise RuntimeError(f"{phase}: none of {functions} in {paths}")
        split.append((phase, sum(found) / records))
    split.append(("rest of the request", total / records - sum(c for _, c in split)))
    return split


def thread_switches(pid):
    """{thread id: voluntary + involuntary context switches so far} of every thread."""
    counts = {}
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        tid = int(status.split("/")[4])
        try:
            with open(status) as f:
                counts[tid] = sum(int(line.split()[1]) for line in f if line.startswith(
                    ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")))
        except FileNotFoundError:
            pass
    return counts


def thread_names(pid):
    names = {}
    for comm in glob.glob(f"/proc/{pid}/task/*/comm"):
        try:
            with open(comm) as f:
                names[int(comm.split("/")[4])] = f.read().strip()
        except FileNotFoundError:
            pass
    return names


def diff(after, before):
    return {t: after[t] - before.get(t, 0) for t in after if after[t] != before.get(t, 0)}


def switches_window(pid, client, reqs):
    """Context switches per thread while `reqs` are served, less those of an idle window
    as long right after (idle workers' and timers' wakeups), without strace."""
    before = thread_switches(pid)
    start = time.monotonic()
    for r in reqs:
        client.send(r)
    took = time.monotonic() - start
    served = thread_switches(pid)
    time.sleep(took)
    idle = diff(thread_switches(pid), served)
    served = diff(served, before)
    return {t: served.get(t, 0) - idle.get(t, 0) for t in set(served) | set(idle)}


def callgrind_window(pid, client, reqs, out_dir):
    """Instructions of the requests: instrumentation on, a dump (which zeroes the counters),
    the requests, a dump whose totals are theirs, instrumentation off. A dump is a file a
    thread (`--separate-threads=yes`): (all threads' Ir, the other threads' Ir, the files);
    a thread is another when its file names one of `OTHER_THREAD_ROOTS`."""
    control = lambda *a: subprocess.run(["callgrind_control", *a, str(pid)], check=True,
                                        capture_output=True)

    def dump():
        before = set(glob.glob(f"{out_dir}/cg.out*"))
        control("-d")
        # A file a thread: wait until none has come for half a second.
        new, quiet = set(), 0
        for _ in range(600):
            now = set(glob.glob(f"{out_dir}/cg.out*")) - before
            quiet = quiet + 1 if now and now == new else 0
            new = now
            if quiet >= 5:
                break
            time.sleep(0.1)
        return sorted(new)

    control("-i", "on")
    dump()
    for r in reqs:
        client.send(r)
    paths = dump()
    control("-i", "off")
    total = other = 0
    found = set()
    for path in paths:
        ir, text = None, open(path).read()
        for line in text.splitlines():
            if line.startswith(("summary:", "totals:")):
                ir = int(line.split()[1])
        if ir is None:
            raise RuntimeError(f"no totals in {path}")
        total += ir
        # `'2`: callgrind's mark of a function entered again.
        roots = {name for name, functions in OTHER_THREAD_ROOTS.items()
                 if any(re.search(rf" {re.escape(f)}('\d+)?$", text, re.M) for f in functions)}
        if roots:
            other += ir
            found |= roots
    return total, other, paths, found


def strace_window(pid, client, reqs, out_dir):
    """System calls per thread while `reqs` are served, less those of an idle window as
    long right after, both within one attachment of `strace -f -ttt` (an attachment
    interrupts each thread's blocking call once; it settles before the first window)."""
    out = f"{out_dir}/strace-{pid}-{len(glob.glob(f'{out_dir}/strace-{pid}-*'))}.txt"
    tracer = subprocess.Popen(["strace", "-f", "-ttt", "-p", str(pid), "-o", out],
                              stderr=subprocess.PIPE, text=True)
    # strace says it is attached on stderr, once per thread.
    line = tracer.stderr.readline()
    if "attached" not in line:
        raise RuntimeError(f"strace: {line}")
    time.sleep(1)
    start = time.time()
    for r in reqs:
        client.send(r)
    end = time.time()
    time.sleep(end - start + 0.5)
    tracer.send_signal(signal.SIGINT)
    tracer.wait()
    served, idle, serving = {}, {}, set()
    with open(out) as f:
        for line in f:
            # "TID SECONDS.MICROS name(args..." or "TID SECONDS.MICROS <... name resumed>..."
            parts = line.split(None, 2)
            if len(parts) < 3 or parts[2].startswith(("<...", "---", "+++")):
                continue
            tid, at = int(parts[0]), float(parts[1])
            if start <= at < end:
                served[tid] = served.get(tid, 0) + 1
                # The threads that read or write the client's socket serve it.
                if parts[2].startswith(("recvfrom(", "sendto(", "recvmsg(", "sendmsg(")):
                    serving.add(tid)
            elif end + 0.25 <= at < 2 * end - start + 0.25:
                idle[tid] = idle.get(tid, 0) + 1
    calls = {t: served.get(t, 0) - idle.get(t, 0) for t in set(served) | set(idle)}
    return calls, serving


def per_request(by_thread, serving, n):
    """(all threads, threads other than the serving ones) per request."""
    total = sum(by_thread.values()) / n
    others = sum(c for t, c in by_thread.items() if t not in serving) / n
    return total, others


def serve(cmd, port, valgrind, out_dir, probe):
    if valgrind:
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
               f"--callgrind-out-file={out_dir}/cg.out.%p"] + cmd
    log = open(f"{out_dir}/server-{'vg' if valgrind else 'native'}-{port}.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    wait_ready(port, proc, probe)
    return proc


def measure(name, cmd_of, kinds, out_dir, warm, dumps, others):
    """{kind: (instructions, (syscalls, of other threads), (switches, of other threads))
    per request} for one server; `dumps` gets each kind's callgrind dump (path, total Ir,
    requests), `others` the other threads' system calls per request by thread name."""
    results = {}
    port = free_port()
    probe = kinds[0][1][0]
    proc = serve(cmd_of(port), port, True, out_dir, probe)
    try:
        client = Client(port)
        for kind, reqs in kinds:
            for r in reqs[:warm]:
                client.send(r)
            total, other, paths, found = callgrind_window(proc.pid, client, reqs, out_dir)
            # postal's writers run in every window of its requests (each request is
            # logged and charged): a root not found is a renamed or inlined function,
            # whose thread would silently count as a serving one.
            if name == "postal" and found != set(OTHER_THREAD_ROOTS):
                raise RuntimeError(f"{kind}: no thread ran {set(OTHER_THREAD_ROOTS) - found}")
            results[kind] = [(total / len(reqs), other / len(reqs))]
            dumps[kind] = (paths, total, len(reqs))
    finally:
        # SIGTERM, not SIGINT: a shell that starts the bench in the background leaves
        # SIGINT ignored in its children, and the bare handler has no handler of its own
        # (postal stops the same way on both).
        proc.send_signal(signal.SIGTERM)
        proc.wait()
    port = free_port()
    proc = serve(cmd_of(port), port, False, out_dir, probe)
    try:
        client = Client(port)
        for kind, reqs in kinds:
            for r in reqs[:warm]:
                client.send(r)
            time.sleep(1)
            switches = switches_window(proc.pid, client, reqs)
            calls, serving = strace_window(proc.pid, client, reqs, out_dir)
            results[kind] += [per_request(calls, serving, len(reqs)),
                              per_request(switches, serving, len(reqs))]
            names = thread_names(proc.pid)
            others[kind] = sorted(
                (names.get(t, "?"), c / len(reqs), switches.get(t, 0) / len(reqs))
                for t, c in calls.items() if t not in serving and abs(c) / len(reqs) >= 0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
    print(f"  measured {name}", file=sys.stderr)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--postal", required=True)
    ap.add_argument("--bare", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--pub", required=True)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="",
                    help="comma-separated starts of row names (bare, lookup, validate-bulk, ...)")
    args = ap.parse_args()
    only = [w.strip() for w in args.only.split(",") if w.strip()]
    wanted = lambda kind: not only or any(kind.startswith(w) for w in only)
    rng = random.Random(37)
    others = {}
    warm = max(1, args.n // 10)
    bare = {}
    if wanted("bare poem handler"):
        bare = measure("bare", lambda port: [args.bare, f"127.0.0.1:{port}"],
                       [("bare poem handler", bare_requests(args.n))], args.out, warm, {},
                       others)
    # The same requests whatever rows are kept (one generator, drawn in order).
    kinds = [k for k in requests_of(args.db, args.key, args.pub, args.n, rng) if wanted(k[0])]
    dumps = {}
    postal = {}
    if kinds:
        postal = measure("postal", lambda port: [args.postal, "--db", args.db, "serve",
                                                 "--listen", f"127.0.0.1:{port}"],
                         kinds, args.out, warm, dumps, others)
    base = bare.get("bare poem handler", [(0, 0), (0, 0), (0, 0)])
    print()
    print("| request | instructions | x bare | of other threads | serving threads' | x bare "
          "| system calls | x bare | of other threads "
          "| context switches | x bare | of other threads |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratio = lambda a, b: f"{a / b:.2f}" if b else "-"
    for kind, (ins, calls, switches) in list(bare.items()) + list(postal.items()):
        serving = ins[0] - ins[1]
        print(f"| {kind} | {ins[0]:,.0f} | {ratio(ins[0], base[0][0])} | {ins[1]:,.0f} "
              f"| {serving:,.0f} | {ratio(serving, base[0][0] - base[0][1])} | {calls[0]:.2f} "
              f"| {ratio(calls[0], base[1][0])} | {calls[1]:.2f} | {switches[0]:.2f} "
              f"| {ratio(switches[0], base[2][0])} | {switches[1]:.2f} |")
    print()
    print("Threads other than the serving ones, by name: system calls / context switches "
          "a request (0.05 calls or more):")
    for kind, threads in others.items():
        print(f"- {kind}: " + (", ".join(f"{name} {c:.2f} / {w:.2f}" for name, c, w in threads)
                               or "none"))
    if BULK not in dumps:
        return
    paths, total, requests = dumps[BULK]
    print()
    print(f"{BULK}, instructions per record by phase (callgrind, inclusive):")
    print()
    print("| phase | instructions a record |")
    print("|---|---|")
    for phase, cost in phases_of(paths, total, requests * 1000):
        print(f"| {phase} | {cost:,.0f} |")
    print(f"| all | {total / requests / 1000:,.0f} |")
    print()
    print(f"Per request: {args.n} requests of each kind on one keep-alive connection "
          f"(validate-bulk: {max(1, args.n // 20)}), after {warm} not counted.")


if __name__ == "__main__":
    main()
