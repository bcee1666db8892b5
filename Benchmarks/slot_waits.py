#!/usr/bin/env python3
"""Slot waits at N devices on one adapter with 3 slots, without and with slot-aware placement (issue #35).

    Benchmarks/slot_waits.py [--devices 100] [--interval 12] [--time-scale 0.1] [--ticks 5] [--bin DIR]

Runs `keepalive run` twice against one `bluez-sim --private` (BlueZ's delays scaled by --time-scale: at 1 a poll
holds its slot about 2.2 s, 2 s of it BlueZ's disconnect; at 0.1 about 0.22 s), once with `placement: false`, once
with the default. Both run --ticks T; every device's ticks 2..T-1 are the steady state (tick 0 fires every device
at start; placement is made from what tick 0 measured and applies from tick 1, which may come up to an interval
late). Prints, per run, the steady-state polls, how many waited for a slot, the mean / p95 / max wait, the polls
without a slot (`noSlot`), and the mean link time, then one JSON line with the figures.

The interval should leave room: at 100 devices and the realistic 2.2 s hold, 120 s is a load of 1.8 slots; the
default 12 s at a time scale of 0.1 is the same load ten times faster.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

COUNTER = "4b410002-6b65-6570-616c-697665000000"


def address(number):
    return f"C0:FF:EE:00:{(number >> 8) & 0xFF:02X}:{number & 0xFF:02X}"


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))] if ordered else 0


def run(binary, bus, directory, devices, interval, ticks, placement):
    config = os.path.join(directory, f"slots-{placement}.yaml")
    with open(config, "w") as f:
        f.write(f"interval: {interval}s\nmin_interval: {interval}s\nmax_connections: 3\n")
        f.write(f"placement: {'true' if placement else 'false'}\ndevices:\n")
        for n in range(1, devices + 1):
            f.write(f'  - {{name: d{n}, address: "{address(n)}", read: [{COUNTER}]}}\n')
    output = os.path.join(directory, f"slots-{placement}.jsonl")
    log = open(os.path.join(directory, f"slots-{placement}.log"), "w")
    timeout = float(interval) * (ticks + 2) + 60
    status = subprocess.run(
        [binary, "run", "--config", config, "--bus", bus, "--ticks", str(ticks), "--output", output],
        stdout=subprocess.DEVNULL, stderr=log, timeout=timeout).returncode
    log.close()
    if status != 0:
        sys.exit(f"keepalive run exited {status} (see {log.name})")
    records = [json.loads(line) for line in open(output) if line.strip()]
    steady = [r for r in records if r["tick"] >= 2]
    waits = [r["slot_wait_ms"] for r in steady if r.get("slot_wait_ms") is not None]
    links = [r["link_ms"] for r in steady if r.get("link_ms") is not None]
    no_slot = sum(1 for r in steady if (r.get("error") or {}).get("code") == "noSlot")
    failed = sum(1 for r in steady if r["result"] == "failed")
    placed = sum(1 for line in open(log.name) if "devices placed within" in line)
    return {
        "placement": placement, "records": len(records), "steady_polls": len(steady),
        "waited": sum(1 for w in waits if w > 0), "mean_wait_ms": round(statistics.mean(waits), 1) if waits else 0,
        "p95_wait_ms": percentile(waits, 0.95), "max_wait_ms": max(waits, default=0), "no_slot": no_slot,
        "failed": failed, "mean_link_ms": round(statistics.mean(links), 1) if links else None,
        "placed_log_lines": placed,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", type=int, default=100)
    parser.add_argument("--interval", type=float, default=12)
    parser.add_argument("--time-scale", type=float, default=0.1)
    parser.add_argument("--ticks", type=int, default=5)
    parser.add_argument("--bin", default=None, help="where keepalive and bluez-sim are (default: the release build)")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    binaries = args.bin or subprocess.run(
        ["swift", "build", "--package-path", root, "-c", "release", "--show-bin-path"],
        stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    interval = f"{args.interval:g}"
    with tempfile.TemporaryDirectory() as directory:
        simulator = subprocess.Popen(
            [os.path.join(binaries, "bluez-sim"), "--private", "--devices", str(args.devices), "--time-scale",
             str(args.time_scale)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        bus = None
        try:
            for line in simulator.stdout:
                if line.startswith("DBUS_SYSTEM_BUS_ADDRESS="):
                    bus = line.strip().split("=", 1)[1]
                if line.startswith("READY"):
                    break
            if not bus:
                sys.exit("bluez-sim did not start")
            results = [run(os.path.join(binaries, "keepalive"), bus, directory, args.devices, interval, args.ticks,
                           placement) for placement in (False, True)]
        finally:
            simulator.terminate()
            simulator.wait(timeout=30)
    print(f"{args.devices} devices every {interval} s on hci0, 3 slots, simulator time scale {args.time_scale}; "
          f"steady state = ticks 2..{args.ticks - 1}")
    print(f"{'placement':<10} {'polls':>6} {'waited':>7} {'mean wait':>10} {'p95':>8} {'max':>8} {'noSlot':>7} "
          f"{'failed':>7} {'link':>9}")
    for r in results:
        print(f"{'on' if r['placement'] else 'off':<10} {r['steady_polls']:>6} {r['waited']:>7} "
              f"{r['mean_wait_ms']:>7} ms {r['p95_wait_ms']:>5} ms {r['max_wait_ms']:>5} ms {r['no_slot']:>7} "
              f"{r['failed']:>7} {r['mean_link_ms']!s:>6} ms")
    print(json.dumps({"devices": args.devices, "interval_s": args.interval, "time_scale": args.time_scale,
                      "ticks": args.ticks, "runs": results}))


if __name__ == "__main__":
    main()
