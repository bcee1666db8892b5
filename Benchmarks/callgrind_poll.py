#!/usr/bin/env python3
"""Instructions per poll, by function: the daemon and the C floor under callgrind (issue #8's CPU analysis).

    Benchmarks/callgrind_poll.py [--devices N] [--ticks T] [--top K] [--metrics]

Runs `keepalive run` (N devices, 2 s interval) under callgrind twice, for 2 and 2+T ticks, against one
`bluez-sim --devices N --time-scale 0.01`, and the C floor (Benchmarks/c-floor/bluez_poll.c) for 1 and 1+T
rounds; the difference of the two runs ÷ (N·T) is the cost of one poll in steady state, start-up and shutdown
cancelled out. Prints instructions per poll for both clients, by library and by function (self), and the
inclusive cost of a few known hot spots. Instruction counts are repeatable to a fraction of a percent, unlike
CPU time on a shared machine; they do not include the kernel (syscalls, context switches: see strace -c).

valgrind 3.19 cannot run the Swift binaries as they are, so this works on copies: debug info stripped from the
binary and the Swift runtime libraries (its DWARF 5 reader gives up), and libdispatch's main-thread
`sigsuspend` replaced by `pause` through an LD_PRELOAD shim (valgrind crashes in it on this kernel). Builds the
release products in .build-bench first (like run.py).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the benchmark driver: build, simulator, configurations)

SHIM = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <unistd.h>
/* valgrind 3.19 crashes in libdispatch's main-thread sigsuspend here: park with pause() instead. */
int sigsuspend(const sigset_t *mask) {
    sigset_t old;
    sigprocmask(SIG_SETMASK, mask, &old);
    pause();
    sigprocmask(SIG_SETMASK, &old, NULL);
    return -1;
}
"""

HOT_SPOTS = {
    "BluetoothUUID.shortDescription": "BluetoothUUIDV16shortDescription",
    "JSONString.append (record escaping)": "JSONStringO6append",
    "BlueZ.deviceOwning (path split)": "deviceOwning",
    "RecordLine.encode (whole record)": "RecordLineO6encode_",
    "BlueZ.devicePath": "BlueZAAO10devicePath",
    "BlueZObjectCache.apply (signals)": "ZObjectCacheC5apply_2to7effects",
    "DBusConnection.handleIncoming": "ConnectionC14handleIncoming",
    "DBusConnection.sendWithReply": "ConnectionC13sendWithReply",
}


def annotate(path, inclusive):
    """callgrind_annotate → {function: instructions}."""
    # Instructions only: with --cache-sim the other events would come out as more columns.
    command = ["callgrind_annotate", "--threshold=100", "--show=Ir"] + (["--inclusive=yes"] if inclusive else []) + [path]
    text = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    costs = {}
    for line in text.splitlines():
        match = re.match(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if match and ":" in match.group(2):
            costs[match.group(2)] = costs.get(match.group(2), 0) + int(match.group(1).replace(",", ""))
    return costs


def event_totals(path):
    """The PROGRAM TOTALS line of callgrind_annotate → {event: count} (Ir, and with --cache-sim the cache and
    branch events)."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", path], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True).stdout
    events = next((line.split()[2:] for line in text.splitlines() if line.startswith("Events shown:")), ["Ir"])
    for line in text.splitlines():
        if line.rstrip().endswith("PROGRAM TOTALS"):
            counts = re.findall(r"[\d,]+(?=\s)", line)
            return {event: int(count.replace(",", "")) for event, count in zip(events, counts)}
    return {}


def per_poll(short, long, polls):
    return {k: (long.get(k, 0) - short.get(k, 0)) / polls for k in set(short) | set(long)}


CACHE_SIM = []


def callgrind(command, out, env):
    result = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + CACHE_SIM + command, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0 or not os.path.exists(out):
        raise SystemExit(f"callgrind failed: {[l for l in result.stderr.splitlines() if 'dwarf' not in l][-5:]}")


def library(function):
    match = re.search(r"\[([^\]]+)\]$", function)
    return os.path.basename(match.group(1)) if match else "?"


def demangle(names):
    tool = shutil.which("swift-demangle") or "/opt/swift/usr/bin/swift-demangle"
    if not os.path.exists(tool):
        return names
    text = subprocess.run([tool, "--simplified"], input="\n".join(names), stdout=subprocess.PIPE, text=True).stdout
    return text.splitlines()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=10)
    parser.add_argument("--ticks", type=int, default=10)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--scratch", default=os.path.join(run.ROOT, ".build-bench"))
    parser.add_argument("--skip-build", action="store_true")
    parser.add_argument("--keep", action="store_true",
                        help="keep the callgrind output files (for callgrind_annotate --tree=caller) and print where")
    parser.add_argument("--metrics", action="store_true",
                        help="the daemon with `metrics: {textfile: …}` (what the registry and the textfile add)")
    parser.add_argument("--cache-sim", action="store_true",
                        help="also simulate the caches and branch predictor (valgrind's model of this CPU's L1 and "
                             "last level) and print misses per poll for both clients: where time goes that "
                             "instructions do not show (this VM has no hardware counters)")
    args = parser.parse_args()
    if args.cache_sim:
        CACHE_SIM.extend(["--cache-sim=yes", "--branch-sim=yes"])
    ctx = run.Context(argparse.Namespace(quick=True, scratch=args.scratch))
    if args.skip_build:
        ctx.bin = os.path.join(ctx.scratch, "release")
        ctx.cfloor = os.path.join(ctx.scratch, "bluez_poll")
    else:
        run.build(ctx)
    work = tempfile.mkdtemp(prefix="keepalive-callgrind-")
    libs = os.path.join(work, "lib")
    os.makedirs(libs)
    runtime = "/opt/swift/usr/lib/swift/linux"
    for name in os.listdir(runtime):
        if name.endswith(".so"):
            shutil.copy(os.path.join(runtime, name), libs)
            subprocess.run(["objcopy", "--strip-debug", os.path.join(libs, name)], stderr=subprocess.DEVNULL)
    daemon = os.path.join(work, "keepalive")
    shutil.copy(os.path.join(ctx.bin, "keepalive"), daemon)
    subprocess.run(["objcopy", "--strip-debug", daemon], check=True)
    with open(os.path.join(work, "shim.c"), "w") as f:
        f.write(SHIM)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", os.path.join(work, "shim.so"), os.path.join(work, "shim.c")],
                   check=True)
    n, t = args.devices, args.ticks
    results = {}
    # A fresh simulator for every run: a device keeps its GATT objects after a disconnect, so a second run on the
    # same simulator fetched a tree ten times larger at start-up than the first, and that did not cancel out
    # (60,000 instructions "per poll" were start-up before 2026-11-27).
    extra = f"metrics:\n  textfile: {os.path.join(work, 'keepalive.prom')}\n" if args.metrics else ""
    config = run.write_config(ctx, "callgrind.yaml", n, 2.0, budget=1.8, extra=extra)
    for ticks in (2, 2 + t):
        with run.Simulator(ctx, n, 0.01) as sim:
            env = dict(sim.env(), LD_LIBRARY_PATH=libs, LD_PRELOAD=os.path.join(work, "shim.so"))
            run.log(f"callgrind: keepalive, {n} devices, {ticks} ticks")
            # Records to a regular file, as run.py and a configured `output:` write them (to /dev/null, a character
            # device that might block for all the daemon knows, they would be written from the pool instead).
            records = os.path.join(work, f"records-{ticks}.jsonl")
            callgrind([daemon, "run", "--config", config, "--bus", sim.address, "--output", records, "--ticks",
                       str(ticks)], os.path.join(work, f"keepalive-{ticks}.out"), env)
    for rounds in (1, 1 + t):
        with run.Simulator(ctx, n, 0.01) as sim:
            run.log(f"callgrind: C floor, {n} devices, {rounds} rounds")
            callgrind([ctx.cfloor, str(n), str(rounds)], os.path.join(work, f"c-{rounds}.out"), sim.env())
    polls = n * t
    for client, (a, b) in {"keepalive": ("keepalive-2", f"keepalive-{2 + t}"), "C floor": ("c-1", f"c-{1 + t}")}.items():
        self_cost = per_poll(annotate(os.path.join(work, a + ".out"), False),
                             annotate(os.path.join(work, b + ".out"), False), polls)
        total = self_cost.pop("PROGRAM TOTALS", sum(self_cost.values()))
        results[client] = (total, self_cost, a, b)
        by_library = {}
        for function, cost in self_cost.items():
            by_library[library(function)] = by_library.get(library(function), 0) + cost
        print(f"\n{client}: {total:,.0f} instructions per poll ({polls} polls)")
        print("  by library: " + ", ".join(f"{k} {v:,.0f}" for k, v in sorted(by_library.items(), key=lambda kv: -kv[1])
                                            if v >= 1000))
    total, self_cost, a, b = results["keepalive"]
    top = sorted(self_cost.items(), key=lambda kv: -kv[1])[:args.top]
    names = demangle([re.sub(r"^[^:]*:", "", k).rsplit(" [", 1)[0] for k, _ in top])
    print(f"\nkeepalive, top {args.top} functions by self cost per poll:")
    for (function, cost), name in zip(top, names):
        print(f"  {cost:10,.0f}  {name[:110]}  [{library(function)}]")
    inclusive = per_poll(annotate(os.path.join(work, a + ".out"), True), annotate(os.path.join(work, b + ".out"), True), polls)
    print("\nkeepalive, hot spots (inclusive per poll; they overlap: encode contains one shortDescription and the escaping):")
    for label, needle in HOT_SPOTS.items():
        cost = max((v for k, v in inclusive.items() if needle in k), default=0)
        print(f"  {cost:10,.0f}  {cost / total * 100:5.1f} %  {label}")
    c_total = results["C floor"][0]
    print(f"\nkeepalive ÷ C floor: {total / c_total:.2f}× in instructions")
    if args.cache_sim:
        cache_side(results, work, polls)
    kernel_side(ctx, n, t, work)
    if args.keep:
        print(f"\ncallgrind output kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(ctx.work, ignore_errors=True)


def cache_side(results, work, polls):
    """Per poll, both clients: instruction fetch misses (I1mr: first level, ILmr: last level), data read and
    write misses, conditional and indirect branches mispredicted, from callgrind's simulation."""
    rows = {}
    for client, (_, _, a, b) in results.items():
        short, long = event_totals(os.path.join(work, a + ".out")), event_totals(os.path.join(work, b + ".out"))
        rows[client] = {event: (long[event] - short.get(event, 0)) / polls for event in long}
    names = {"Ir": "instructions", "I1mr": "L1 instruction misses", "ILmr": "LL instruction misses",
             "Dr": "data reads", "D1mr": "L1 data read misses", "DLmr": "LL data read misses", "Dw": "data writes",
             "D1mw": "L1 data write misses", "DLmw": "LL data write misses", "Bc": "conditional branches",
             "Bcm": "conditional mispredicted", "Bi": "indirect branches", "Bim": "indirect mispredicted"}
    keep, floor = rows.get("keepalive", {}), rows.get("C floor", {})
    print("\nper poll, simulated caches and branches (callgrind --cache-sim --branch-sim):")
    print(f"  {'':28} {'keepalive':>12} {'C floor':>12} {'ratio':>7}")
    for event, label in names.items():
        if event in keep:
            a, b = keep[event], floor.get(event, 0)
            print(f"  {label:28} {a:12,.0f} {b:12,.0f} {a / b if b else float('nan'):6.2f}×")


def kernel_side(ctx, n, t, work):
    """What callgrind cannot see: syscalls (strace -f -c) and context switches (wait4) per poll, same method."""
    def syscalls(path):
        counts = {}
        with open(path) as f:
            for line in f:
                match = re.match(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
                if match and match.group(2) != "total":
                    counts[match.group(2)] = int(match.group(1))
        return counts

    def command(sim, client, count):
        if client == "keepalive":
            return [os.path.join(ctx.bin, "keepalive"), "run", "--config", config, "--bus", sim.address, "--output",
                    os.path.join(work, f"records-strace-{count}.jsonl"), "--ticks", str(count)]
        return [ctx.cfloor, str(n), str(count)]

    config = run.write_config(ctx, "strace.yaml", n, 2.0, budget=1.8)
    runs = {}
    for client, counts in {"keepalive": (2, 2 + t), "C floor": (1, 1 + t)}.items():
        for count in counts:
            out = os.path.join(work, f"strace-{count}.txt")
            # A fresh simulator for each run, as in main(): once under strace, once alone for wait4's counts.
            with run.Simulator(ctx, n, 0.01) as sim:
                subprocess.run(["strace", "-f", "-c", "-o", out] + command(sim, client, count), env=sim.env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with run.Simulator(ctx, n, 0.01) as sim:
                process = subprocess.Popen(command(sim, client, count), env=sim.env(), stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL)
                _, _, usage = os.wait4(process.pid, 0)
            runs[(client, count)] = (syscalls(out), usage)
    print("\nper poll, kernel side (strace -f -c; wait4 context switches):")
    for client, (a, b) in {"keepalive": (2, 2 + t), "C floor": (1, 1 + t)}.items():
        (calls_a, usage_a), (calls_b, usage_b) = runs[(client, a)], runs[(client, b)]
        diff = {k: (calls_b.get(k, 0) - calls_a.get(k, 0)) / (n * t) for k in set(calls_a) | set(calls_b)}
        voluntary = (usage_b.ru_nvcsw - usage_a.ru_nvcsw) / (n * t)
        involuntary = (usage_b.ru_nivcsw - usage_a.ru_nivcsw) / (n * t)
        top = ", ".join(f"{k} {v:.1f}" for k, v in sorted(diff.items(), key=lambda kv: -kv[1])[:6] if v >= 0.5)
        print(f"  {client}: {sum(diff.values()):.1f} syscalls ({top}); {voluntary:.1f} voluntary + "
              f"{involuntary:.1f} involuntary context switches")


if __name__ == "__main__":
    main()
