#!/usr/bin/env python3
"""Where listening to advertisements spends the daemon's time: run.py's `listening` setup under perf.

    Benchmarks/listening_profile.py [--advertisers 500] [--configured 50] [--rate 1000] [--seconds 20]
                                    [--scratch .build-bench] [--keep]

Starts one `bluez-sim --private --devices 0` with `--advertisers` seeded random-address advertisers
(`AddAdvertisers`, plain kinds) at `--rate` advertisements a second in all, and `keepalive run` (run.py's release
build in --scratch) with `--configured` of them as passive devices; after tick 0 and a few seconds, records the
daemon with `perf record -g` for `--seconds` and prints the hottest symbols (self and with children), the
daemon's CPU per advertisement, and how many Device1 objects org.bluez holds (`GetManagedObjects`), which the
daemon's object cache mirrors. Needs perf (perf_event_paranoid ≤ 2: user space only).
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import types

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the benchmark driver: simulator, configurations, the listening section's helpers)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--advertisers", type=int, default=run.LISTEN_ADVERTISERS)
    parser.add_argument("--configured", type=int, default=run.LISTEN_CONFIGURED)
    parser.add_argument("--rate", type=float, default=run.LISTEN_RATE)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--scratch", default=os.path.join(run.ROOT, ".build-bench"))
    parser.add_argument("--keep", action="store_true", help="keep the work directory (perf.data, logs)")
    args = parser.parse_args()
    if not shutil.which("perf"):
        raise SystemExit("perf is not installed")
    ctx = run.Context(types.SimpleNamespace(quick=False, scratch=args.scratch))
    ctx.bin = os.path.join(os.path.abspath(args.scratch), "release")
    perf_data = ctx.path("perf.data")
    with run.Simulator(ctx, 0, 1.0, log_name="bluez-sim.log") as sim:
        addresses = run.add_advertisers(sim, args.advertisers, args.rate, kinds=run.LISTEN_KINDS)
        step = max(1, args.advertisers // max(1, args.configured))
        picked = addresses[::step][:args.configured]
        entries = [(f"p{n + 1}", a, run.LISTEN_KINDS[(n * step) % len(run.LISTEN_KINDS)], None)
                   for n, a in enumerate(picked)]
        config = run.passive_config(ctx, "profile.yaml", entries, run.LISTEN_INTERVAL)
        output = ctx.path("profile.jsonl")
        stderr = open(ctx.path("keepalive.log"), "w")
        daemon = subprocess.Popen([os.path.join(ctx.bin, "keepalive"), "run", "--config", config, "--bus",
                                   sim.address, "--output", output], stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            time.sleep(run.LISTEN_INTERVAL + 3)
            sent0, cpu0 = run.advertisements_sent(sim), run.process_cpu_seconds(daemon.pid)
            perf = subprocess.run(["perf", "record", "-q", "-g", "-F", "999", "-e", "cpu-clock:u", "-o", perf_data,
                                   "-p", str(daemon.pid), "--", "sleep", str(args.seconds)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            sent1, cpu1 = run.advertisements_sent(sim), run.process_cpu_seconds(daemon.pid)
            tree = subprocess.run(["busctl", f"--address={sim.address}", "call", "org.bluez", "/",
                                   "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"],
                                  stdout=subprocess.PIPE, text=True).stdout
            rss = run.proc_status(daemon.pid, "VmRSS", "RssAnon")
        finally:
            run.stop_process(daemon)
            stderr.close()
    if perf.returncode != 0:
        raise SystemExit(f"perf record failed: {perf.stderr[-500:]}")
    advertisements = sent1 - sent0
    print(f"advertisements {advertisements} in {args.seconds:.0f} s ({advertisements / args.seconds:.0f}/s); daemon CPU "
          f"{(cpu1 - cpu0) / args.seconds * 100:.2f} % of a core, {(cpu1 - cpu0) * 1e6 / max(1, advertisements):.1f} µs "
          f"per advertisement; Device1 objects on the bus {len(re.findall('org.bluez.Device1', tree))}; "
          f"VmRSS {rss.get('VmRSS', 0) / 1024:.2f} MiB")
    for title, flags in (("self", ["--no-children"]), ("with children", ["--children"])):
        report = subprocess.run(["perf", "report", "-i", perf_data, "--stdio", "--no-demangle", *flags,
                                 "--sort", "symbol", "-g", "none", "--percent-limit", "1.5"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
        lines = [line for line in report.splitlines() if line.strip() and not line.startswith("#")]
        demangled = subprocess.run(["/opt/swift/usr/bin/swift-demangle", "--simplified"], input="\n".join(lines),
                                   stdout=subprocess.PIPE, text=True).stdout if os.path.exists(
                                       "/opt/swift/usr/bin/swift-demangle") else "\n".join(lines)
        print(f"\n== {title} ==")
        print("\n".join(line[:220] for line in demangled.splitlines()[:45]))
    if args.keep:
        print(f"\nkept {ctx.work}", file=sys.stderr)
    else:
        shutil.rmtree(ctx.work, ignore_errors=True)


if __name__ == "__main__":
    main()
