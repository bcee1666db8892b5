#!/usr/bin/env python3
"""CPU per poll by thread: which of the daemon's threads spends a poll's time, and how often each wakes.

    Benchmarks/thread_cpu.py [--devices N] [--seconds S] [--binary PATH] [--skip-build]

Runs `keepalive run` (N devices, run.py's interval for N and a 0.9 budget) against one `bluez-sim --devices N
--time-scale 0.01`, lets it settle for 3 s, then reads every thread's /proc/PID/task/TID/schedstat (CPU time in
nanoseconds and scheduling slices) and status (voluntary and involuntary context switches) at the start and the
end of S seconds. Prints, per thread, the difference ÷ the polls made meanwhile (ticks × N, the ticks counted from
the records). Unlike `ru_utime + ru_stime` this says where the time goes: a poll's work on the D-Bus connection's
thread, a tick's hand-over through the timer thread, anything left on the executors' pool.
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the benchmark driver: build, simulator, configurations)


def snapshot(pid):
    """{tid: (name, cpu_ns, slices, voluntary, involuntary)} for every thread of pid now."""
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/comm") as f:
                name = f.read().strip()
            with open(f"{base}/schedstat") as f:
                cpu_ns, _, slices = map(int, f.read().split())
            with open(f"{base}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
            threads[int(tid)] = (name, cpu_ns, slices, int(status["voluntary_ctxt_switches"]),
                                 int(status["nonvoluntary_ctxt_switches"]))
        except (FileNotFoundError, ProcessLookupError):
            pass  # it ended between the listing and the read
    return threads


def count_polls(path):
    try:
        with open(path) as f:
            return sum(1 for line in f if line.strip() and "tick" in json.loads(line))
    except FileNotFoundError:
        return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--binary", help="the keepalive to measure (default: the release build in --scratch)")
    parser.add_argument("--scratch", default=os.path.join(run.ROOT, ".build-bench"))
    parser.add_argument("--skip-build", action="store_true")
    args = parser.parse_args()
    ctx = run.Context(argparse.Namespace(quick=True, scratch=args.scratch, keep=False))
    if args.skip_build:
        ctx.bin = os.path.join(ctx.scratch, "release")
    else:
        run.build(ctx)
    binary = args.binary or os.path.join(ctx.bin, "keepalive")
    devices = args.devices
    with run.Simulator(ctx, devices, 0.01) as sim:  # bluez-sim is always the scratch's
        interval = run.daemon_interval(devices)
        config = run.write_config(ctx, f"threads-{devices}.yaml", devices, interval, budget=0.9 * interval)
        output = ctx.path(f"threads-{devices}.jsonl")
        if os.path.exists(output):
            os.remove(output)
        with open(ctx.path(f"threads-{devices}.log"), "w") as log:
            process = subprocess.Popen([binary, "run", "--config", config, "--bus", sim.address, "--output", output],
                                       stdout=subprocess.DEVNULL, stderr=log)
            try:
                time.sleep(3)
                before, polls_before = snapshot(process.pid), count_polls(output)
                time.sleep(args.seconds)
                after, polls_after = snapshot(process.pid), count_polls(output)
            finally:
                run.stop_process(process)
    polls = polls_after - polls_before
    if polls <= 0:
        sys.exit("thread_cpu.py: no poll completed while measuring (see the daemon's log in the scratch directory)")
    print(f"{binary}: {devices} devices, interval {interval} s, {polls} polls in {args.seconds:g} s")
    print(f"{'thread':16} {'µs/poll':>9} {'slices':>7} {'vol':>6} {'invol':>6}")
    total = 0.0
    for tid in sorted(after):
        name, cpu, slices, voluntary, involuntary = after[tid]
        _, cpu0, slices0, voluntary0, involuntary0 = before.get(tid, (name, 0, 0, 0, 0))
        micros = (cpu - cpu0) / 1000 / polls
        total += micros
        print(f"{name:16} {micros:9.1f} {(slices - slices0) / polls:7.2f} {(voluntary - voluntary0) / polls:6.2f} "
              f"{(involuntary - involuntary0) / polls:6.2f}")
    print(f"{'all':16} {total:9.1f}")


if __name__ == "__main__":
    main()
