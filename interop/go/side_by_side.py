#!/usr/bin/env python3
"""The benchmarks of cosi and Go COSI, side by side, in one run.

Builds each side once (`cargo bench -p cosi --bench BENCH --no-run`, and
`go test -c ./bench`), then runs them alternately in rounds, so both see the
same machine load: per round every Rust binary (the one just built, and any
given with --rust, say a build of the commit before), then Go. Prints each
figure's median over the rounds, with [min, max] of the rounds; the raw
output of every run goes to the log directory.

    interop/go/side_by_side.py [--bench runtime|state] --rounds 5 [--part chain] [--rust NAME=BINARY ...]

`runtime` (the default): the chain, the chain beside a busy neighbour, four
CPU-bound controllers side by side (parallel), the transforms, and (Rust
only) the scale scenario. The Rust chain runs
on a 2-worker multi-thread tokio runtime (the bench's code in a task, as Go's
benchmark goroutine runs on one of its Ps, and in `block_on`) and on a
current-thread one; Go runs with GOMAXPROCS=2 (-cpu 2). `state`: create,
get, update, the lists and the watch fan-out, each side's calls from a task
of 2 workers (GOMAXPROCS=2), everything built before the timed loop.
Both sides read COSI_BENCH_HISTORY (the memory state's history), which this
passes on.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

UNITS = {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}


def micros(text):
    """A Rust `Debug` duration (`49.5µs`, `1.2ms`) in microseconds."""
    match = re.fullmatch(r"([0-9.]+)(ns|µs|us|ms|s)", text)
    if not match:
        raise ValueError(f"not a duration: {text!r}")
    return float(match.group(1)) * UNITS[match.group(2)]


def build_rust(bench):
    command = ["cargo", "bench", "-p", "cosi", "--bench", bench, "--no-run", "--message-format=json"]
    output = subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True).stdout
    for line in output.splitlines():
        message = json.loads(line)
        if message.get("reason") == "compiler-artifact" and message.get("executable"):
            if message["target"]["name"] == bench:
                return message["executable"]
    sys.exit(f"cargo built no {bench} bench")


def build_go(directory):
    binary = os.path.join(directory, "bench.test")
    subprocess.run(["go", "test", "-c", "-o", binary, "./bench"], cwd=HERE, check=True)
    return binary


# Criterion's names and Go's benchmark names for the state benchmarks, and the figure each is.
STATE_FIGURES = {
    "memory/create": "create", "Create": "create",
    "memory/get": "get, typed, from 10,000", "Get": "get, typed, from 10,000",
    "memory/update": "update (get, edit, update)", "Update": "update (get, edit, update)",
    "memory/list/typed/10000": "list 10,000, typed", "ListTyped": "list 10,000, typed",
    "memory/list/dynamic/10000": "list 10,000, dynamic", "ListDynamic": "list 10,000, dynamic",
    "memory/watch_fan_out/watchers/100": "watch fan-out, 100 x 100", "WatchFanOut": "watch fan-out, 100 x 100",
}


def parse_rust_state(output):
    """{(who, figure): microseconds} from one run of the Rust state bench (Criterion's median)."""
    figures = {}
    name = None
    for line in output.splitlines():
        match = re.match(r"^(memory/\S+)", line)
        if match:
            name = match.group(1)
        match = re.search(r"time:\s+\[\S+ \S+ (\S+) (ns|µs|us|ms|s)", line)
        if match and name in STATE_FIGURES:
            figures[("", STATE_FIGURES[name])] = float(match.group(1)) * UNITS[match.group(2)]
            name = None
    return figures


def parse_go_state(output):
    figures = {}
    for line in output.splitlines():
        match = re.match(r"Benchmark(\w+)-\d+\s+\d+\s+([0-9.]+) ns/op", line)
        if match and match.group(1) in STATE_FIGURES:
            figures[("Go, GOMAXPROCS=2", STATE_FIGURES[match.group(1)])] = float(match.group(2)) / 1e3
    return figures


def parse_rust(output):
    """{(flavour, figure): microseconds} from one run of the Rust runtime bench."""
    figures = {}
    flavour = None
    for line in output.splitlines():
        if line.startswith("== "):
            flavour = line[3:].replace("tokio ", "").strip()
            continue
        fields = line.split()
        if len(fields) == 6 and fields[0].isdigit() and fields[1].isdigit():
            for name, value in zip(["median", "p90", "p99", "max"], fields[2:]):
                figures[(flavour, f"chain {fields[0]} {name}")] = micros(value)
            continue
        if len(fields) == 7 and fields[0] in ("neighbour", "neighbours2", "scale") and fields[2].isdigit():
            figure = {"neighbour": "neighbour, chain 10", "neighbours2": "2 neighbours, chain 10",
                      "scale": "scale wake"}[fields[0]]
            for name, value in zip(["median", "p90", "p99", "max"], fields[3:]):
                figures[(flavour, f"{figure} {name}")] = micros(value)
            continue
        match = re.match(r"\s*scale settle\s+(\S+)", line)
        if match:
            figures[(flavour, "scale settle")] = micros(match.group(1))
            continue
        match = re.match(r"\s*parallel (\S+) preloaded, from start\s+(\S+)", line)
        if match:
            figures[(flavour, "parallel 4 preloaded, from start")] = micros(match.group(2))
            continue
        match = re.match(r"\s*(reconcile|queue) (preloaded, from start|live, from the first write)\s+(\S+)", line)
        if match:
            figures[(flavour, f"{match.group(1)} {match.group(2)}")] = micros(match.group(3))
    return figures


def parse_go(output):
    figures = {}
    for line in output.splitlines():
        match = re.match(r"BenchmarkRuntimeChain/links=(\d+)-\d+\s", line)
        if match:
            for value, name in re.findall(r"([0-9.]+) (median|p90|p99|max)-µs", line):
                figures[("Go, GOMAXPROCS=2", f"chain {match.group(1)} {name}")] = float(value)
            continue
        match = re.match(r"BenchmarkRuntimeNeighbour/busy=(\d)-\d+\s", line)
        if match:
            figure = "neighbour, chain 10" if match.group(1) == "1" else "2 neighbours, chain 10"
            for value, name in re.findall(r"([0-9.]+) (median|p90|p99|max)-µs", line):
                figures[("Go, GOMAXPROCS=2", f"{figure} {name}")] = float(value)
            continue
        match = re.match(r"BenchmarkRuntimeParallel-\d+\s", line)
        if match:
            median = re.search(r"([0-9.]+) median-ms", line)
            if median:
                figures[("Go, GOMAXPROCS=2", "parallel 4 preloaded, from start")] = float(median.group(1)) * 1e3
            continue
        match = re.match(r"BenchmarkRuntimeTransform/(reconcile|queue)-\d+\s", line)
        if match:
            median = re.search(r"([0-9.]+) median-ms", line)
            if median:
                figures[("Go, GOMAXPROCS=2", f"{match.group(1)} preloaded, from start")] = float(median.group(1)) * 1e3
    return figures


def show(value):
    if value < 1:
        return f"{value * 1e3:.0f} ns"
    if value >= 1e4:
        return f"{value / 1e3:.0f} ms"
    if value >= 1e3:
        return f"{value / 1e3:.2f} ms"
    return f"{value:.1f} µs"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default="runtime", choices=["runtime", "state"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--part", default="",
                        help="chain, neighbour, parallel, scale, reconcile or queue (default: all)")
    parser.add_argument("--rust", action="append", default=[], help="NAME=BINARY: another Rust bench binary")
    parser.add_argument("--no-build", metavar="BINARY", help="use this Rust bench binary as `now` instead of building")
    parser.add_argument("--log", default=None, help="where the raw output goes (default: a new temporary directory)")
    args = parser.parse_args()

    log = args.log or tempfile.mkdtemp(prefix=f"cosi-{args.bench}-bench-")
    os.makedirs(log, exist_ok=True)
    rust = [("now", args.no_build or build_rust(args.bench))]
    rust += [tuple(spec.split("=", 1)) for spec in args.rust]
    go = build_go(log)
    if args.bench == "runtime":
        go_pattern = {"": "Runtime", "chain": "RuntimeChain", "neighbour": "RuntimeNeighbour",
                      "parallel": "RuntimeParallel", "scale": None, "reconcile": "RuntimeTransform/reconcile",
                      "queue": "RuntimeTransform/queue"}[args.part]
        go_flags = ["-test.benchtime", "1x"]
        rust_flags = [args.part] if args.part else []
        parse_rust_output, parse_go_output = parse_rust, parse_go
    else:
        go_pattern = "^Benchmark(Create|Get|Update|ListTyped|ListDynamic|WatchFanOut)$"
        go_flags = ["-test.benchmem"]
        rust_flags = ["--warm-up-time", "1", "--measurement-time", "3"] + ([args.part] if args.part else [])
        parse_rust_output, parse_go_output = parse_rust_state, parse_go_state

    samples = {}
    for round_ in range(args.rounds):
        load = os.getloadavg()[0]
        print(f"round {round_ + 1}/{args.rounds}, load average {load:.2f}", flush=True)
        for name, binary in rust:
            command = [binary, "--bench"] + rust_flags
            output = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
            with open(os.path.join(log, f"rust-{name}-{round_}.txt"), "w") as file:
                file.write(output)
            for (flavour, figure), value in parse_rust_output(output).items():
                who = f"Rust {name}, {flavour}" if flavour else f"Rust {name}"
                samples.setdefault((who, figure), []).append(value)
        if go_pattern is None:
            continue
        command = [go, "-test.run", "^$", "-test.bench", go_pattern, "-test.cpu", "2"] + go_flags
        output = subprocess.run(command, cwd=os.path.join(HERE, "bench"), check=True, stdout=subprocess.PIPE,
                                text=True).stdout
        with open(os.path.join(log, f"go-{round_}.txt"), "w") as file:
            file.write(output)
        for key, value in parse_go_output(output).items():
            samples.setdefault(key, []).append(value)

    print(f"\n{args.rounds} rounds, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; raw output in {log}")
    print("median of the rounds [min, max]\n")
    order = {"median": 0, "p90": 1, "p99": 2, "max": 3}

    state_order = list(dict.fromkeys(STATE_FIGURES.values()))

    def place(figure):
        words = figure.split()
        if words[0] == "chain":
            return (0, int(words[1]), order[words[2]], "")
        if words[-1] in order:
            return (0, 1000, order[words[-1]], " ".join(words[:-1]))
        if figure in state_order:
            return (1, state_order.index(figure), 0, "")
        return (2, 0, 0, figure)

    figures = sorted({figure for _, figure in samples}, key=place)
    for figure in figures:
        print(figure)
        for (who, name), values in sorted(samples.items()):
            if name == figure:
                print(f"  {who:<58} {show(statistics.median(values)):>10} "
                      f"[{show(min(values))}, {show(max(values))}]")


if __name__ == "__main__":
    main()
