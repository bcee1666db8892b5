#!/usr/bin/env python3
"""CPU per poll of two or more `keepalive` builds and the C floor, interleaved in one run (A/B of a change).

    Benchmarks/ab_cpu.py DIR_A DIR_B [...] [--reps 3] [--plan 1:20,10:10,100:3]

Each DIR holds a `keepalive` built as run.py builds it (the release flags; e.g. a copy of
.build-bench/release/keepalive before and after a change). For every repetition and every N of the plan
(N devices: ticks), the C floor (back to back, then at the daemon's cadence) and then each build run against
one `bluez-sim --devices MAX(N) --time-scale 0.01`, measured exactly as the cpu section of run.py measures
them (`run_daemon_ticks`, `run_cfloor`, `run_cfloor_paced`). Prints the median per N, its ratio to both C
floors of the same run, and every repetition's
value: on a shared machine a drift in load then hits every build alike, which a before and an after run
minutes apart cannot promise. Needs run.py's products in .build-bench (bluez-sim, bluez_poll): run
`make bench-quick` or run.py once first.
"""
import argparse
import os
import shutil
import subprocess
import sys
import types

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the benchmark driver: simulator, daemon runs, the C floor)


def knows_key(ctx, build, key):
    """Whether the `keepalive` in `build` accepts the top-level configuration `key` (a build from before a key was
    added refuses it as unknown, exit 78): so that builds on either side of a new key can be compared."""
    path = ctx.path(f"knows-{key}.yaml")
    with open(path, "w") as f:
        f.write(f"interval: 30s\n{key}: 30s\ndevices:\n  - {{name: d1, address: \"{run.address(1)}\", read: [2a19]}}\n")
    result = subprocess.run([os.path.join(build, "keepalive"), "run", "--check", "--config", path],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return not (result.returncode == 78 and key in result.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("builds", nargs="+", help="directories, each holding a keepalive binary")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--plan", default="1:20,10:10,100:3", help="N:ticks pairs")
    parser.add_argument("--scratch", default=os.path.join(run.ROOT, ".build-bench"))
    args = parser.parse_args()
    plan = {int(n): int(t) for n, t in (pair.split(":") for pair in args.plan.split(","))}
    builds = [os.path.abspath(b) for b in args.builds]
    for build in builds:
        if not os.access(os.path.join(build, "keepalive"), os.X_OK):
            raise SystemExit(f"ab_cpu: no keepalive in {build}")
    ctx = run.Context(types.SimpleNamespace(quick=False, scratch=args.scratch))
    knows_min_interval = {build: knows_key(ctx, build, "min_interval") for build in builds}
    ctx.cfloor = os.path.join(ctx.scratch, "bluez_poll")
    simulator_bin = os.path.join(ctx.scratch, "release")
    results = {n: {name: [] for name in ["c", "c_paced", *builds]} for n in plan}
    problems = []
    with run.Simulator(types.SimpleNamespace(bin=simulator_bin, path=ctx.path), max(plan), 0.01) as sim:
        for rep in range(args.reps):
            for n, ticks in plan.items():
                run.log(f"ab_cpu: rep {rep + 1}/{args.reps} N={n}")
                result = run.run_cfloor(ctx, sim, n, ticks)
                problems += result["problems"]
                results[n]["c"].append(result["cpu_us"])
                result = run.run_cfloor_paced(ctx, sim, n, ticks)
                problems += result["problems"]
                results[n]["c_paced"].append(result["cpu_us"])
                for build in builds:
                    ctx.bin = build
                    ctx.knows_min_interval = knows_min_interval[build]
                    result = run.run_daemon_ticks(ctx, sim, n, ticks)
                    problems += [f"{build} N={n}: {p}" for p in result["problems"]]
                    results[n][build].append(result.get("cpu_us"))
    for n in plan:
        floor = run.median(results[n]["c"])
        paced = run.median(results[n]["c_paced"])
        line = f"N={n}: C floor {floor:.0f} µs, paced {paced:.0f} µs"
        for build in builds:
            values = [v for v in results[n][build] if v is not None]
            value = run.median(values)
            shown = (f"{value:.0f} µs ({run.ratio(value, floor):.2f}×, paced {run.ratio(value, paced):.2f}×)"
                     if value is not None and floor and paced else "failed")
            line += f" | {os.path.basename(build)} {shown} {[round(v) for v in values]}"
        print(line)
    for problem in problems:
        print(f"problem: {problem}")
    shutil.rmtree(ctx.work, ignore_errors=True)
    if problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
