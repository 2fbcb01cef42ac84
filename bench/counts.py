"""Counted, not timed (bench/counts.sh, issue 37): per request, the instructions the server
executes (valgrind's callgrind, counting only while the requests of one kind are served:
`--instr-atstart=no`, then `callgrind_control -i on`, `-d` (a dump zeroes the counters),
the requests, `-d`, `-i off`), its system calls (`strace -f -c` attached for the window) and its context switches
(voluntary and not, summed over /proc/PID/task/*/status, in a window without strace).
Every thread of the server counts: the billing writer, the log writer, the timers.

One keep-alive connection, requests one after another, the same N of each kind; a warm-up
of each kind first (not counted).

Usage: python3 counts.py --postal BIN --bare BIN --db DB --key sk_... --pub pub_... [--n N]
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
    kinds.append(("validate-bulk, 1,000 records", [
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


def ctx_switches(pid):
    total = 0
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            with open(status) as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def callgrind_window(pid, client, reqs, out_dir):
    """Instructions of the requests: instrumentation on, a dump (which zeroes the counters),
    the requests, a dump whose totals are theirs, instrumentation off."""
    control = lambda *a: subprocess.run(["callgrind_control", *a, str(pid)], check=True,
                                        capture_output=True)

    def dump():
        before = set(glob.glob(f"{out_dir}/cg.out*"))
        control("-d")
        for _ in range(600):
            new = set(glob.glob(f"{out_dir}/cg.out*")) - before
            if new:
                break
            time.sleep(0.1)
        time.sleep(0.5)
        return max(new, key=os.path.getmtime)

    control("-i", "on")
    dump()
    for r in reqs:
        client.send(r)
    path = dump()
    control("-i", "off")
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def strace_window(pid, client, reqs, out_dir):
    out = f"{out_dir}/strace-{pid}.txt"
    tracer = subprocess.Popen(["strace", "-f", "-c", "-p", str(pid), "-o", out],
                              stderr=subprocess.PIPE, text=True)
    # strace says it is attached on stderr, once per thread.
    line = tracer.stderr.readline()
    if "attached" not in line:
        raise RuntimeError(f"strace: {line}")
    time.sleep(0.5)
    for r in reqs:
        client.send(r)
    time.sleep(0.2)
    tracer.send_signal(signal.SIGINT)
    tracer.wait()
    with open(out) as f:
        for line in f:
            if line.strip().endswith("total"):
                parts = line.split()
                # % time, seconds, usecs/call, calls, [errors], total
                return int(parts[3])
    raise RuntimeError(f"no total in {out}")


def serve(cmd, port, valgrind, out_dir, probe):
    if valgrind:
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
               f"--callgrind-out-file={out_dir}/cg.out.%p"] + cmd
    log = open(f"{out_dir}/server-{'vg' if valgrind else 'native'}-{port}.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    wait_ready(port, proc, probe)
    return proc


def measure(name, cmd_of, kinds, out_dir, warm):
    """{kind: (instructions, syscalls, switches) per request} for one server."""
    results = {}
    port = free_port()
    probe = kinds[0][1][0]
    proc = serve(cmd_of(port), port, True, out_dir, probe)
    try:
        client = Client(port)
        for kind, reqs in kinds:
            for r in reqs[:warm]:
                client.send(r)
            results[kind] = [callgrind_window(proc.pid, client, reqs, out_dir) / len(reqs)]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait()
    port = free_port()
    proc = serve(cmd_of(port), port, False, out_dir, probe)
    try:
        client = Client(port)
        for kind, reqs in kinds:
            for r in reqs[:warm]:
                client.send(r)
            time.sleep(1)
            before = ctx_switches(proc.pid)
            for r in reqs:
                client.send(r)
            switches = (ctx_switches(proc.pid) - before) / len(reqs)
            calls = strace_window(proc.pid, client, reqs, out_dir) / len(reqs)
            results[kind] += [calls, switches]
    finally:
        proc.send_signal(signal.SIGINT)
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
    args = ap.parse_args()
    rng = random.Random(37)
    warm = max(1, args.n // 10)
    bare = measure("bare", lambda port: [args.bare, f"127.0.0.1:{port}"],
                   [("bare poem handler", bare_requests(args.n))], args.out, warm)
    kinds = requests_of(args.db, args.key, args.pub, args.n, rng)
    postal = measure("postal", lambda port: [args.postal, "--db", args.db, "serve",
                                             "--listen", f"127.0.0.1:{port}"],
                     kinds, args.out, warm)
    base = bare["bare poem handler"]
    print()
    print("| request | instructions | x bare | system calls | x bare | context switches | x bare |")
    print("|---|---|---|---|---|---|---|")
    for kind, (ins, calls, switches) in list(bare.items()) + list(postal.items()):
        ratio = lambda a, b: f"{a / b:.2f}" if b else "-"
        print(f"| {kind} | {ins:,.0f} | {ratio(ins, base[0])} | {calls:.2f} | {ratio(calls, base[1])} "
              f"| {switches:.2f} | {ratio(switches, base[2])} |")
    print()
    print(f"Per request: {args.n} requests of each kind on one keep-alive connection "
          f"(validate-bulk: {max(1, args.n // 20)}), after {warm} not counted.")


if __name__ == "__main__":
    main()
