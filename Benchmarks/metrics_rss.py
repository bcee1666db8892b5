#!/usr/bin/env python3
"""What `metrics:` costs the daemon (issue #37): the peak and settled RSS, and the wake-ups between ticks, of the
release `keepalive run` at 100 devices without `metrics:`, with `textfile:`, and with `listen:` (scraped by curl
once a tick, as a Prometheus would).

    Benchmarks/metrics_rss.py [--skip-build] [--scratch DIR] [--binary PATH --label NAME] [--variants off,textfile,listen]

The scenario is run.py's idle section (bluez-sim --time-scale 0.01, 100 devices every 5 s, the shipped build's
flags): each variant runs 4 ticks; the quiet between ticks 1-3 is sampled as there, and VmHWM read at the end.
Unlike there, each run starts with the binary out of the page cache (see drop_from_page_cache).
`--binary` measures another build's `keepalive` instead (the commit before metrics, built the same way, shows what
linking swift-metrics and SwiftNIO costs); bluez-sim comes from --scratch either way. Prints a Markdown table.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the benchmark driver: build flags, simulator, configuration, sampling)

DEVICES, INTERVAL, TICKS = 100, 5.0, 4


def drop_from_page_cache(path):
    """The binary's pages out of the page cache, as after a reboot: right after a link, the page cache holds the file
    in the large folios the linker's writes made, and a fault maps more of a large folio than of a page read
    back (measured here: 1 MiB more RssFile for the same build, warm after its link, than cold)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(descriptor)


def measure(ctx, binary, variant, run_number):
    drop_from_page_cache(binary)
    extra = ""
    name = f"metrics-{variant}-{run_number}"
    textfile = ctx.path(f"{name}.prom")
    if variant == "textfile":
        extra = f"metrics:\n  textfile: {textfile}\n"
    elif variant == "listen":
        extra = "metrics:\n  listen: 127.0.0.1:0\n"
    with run.Simulator(ctx, DEVICES, 0.01, log_name=f"bluez-sim-{name}.log") as sim:
        config = run.write_config(ctx, f"{name}.yaml", DEVICES, INTERVAL, extra=extra)
        output = ctx.path(f"{name}.jsonl")
        log_path = ctx.path(f"{name}.log")
        stderr = open(log_path, "w")
        offset = run.wall_to_mono()
        process = subprocess.Popen([binary, "run", "--config", config, "--bus", sim.address, "--output", output],
                                   stdout=subprocess.DEVNULL, stderr=stderr)
        reader = run.Records(output)
        per_tick, fire0, periods, scrapes = {}, None, [], []
        try:
            for tick in range(TICKS):
                deadline = time.monotonic() + INTERVAL + 5
                while len(per_tick.get(tick, [])) < DEVICES:
                    for record in reader.poll():
                        per_tick.setdefault(record["tick"], []).append(record)
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise SystemExit(f"{variant}: tick {tick} has {len(per_tick.get(tick, []))} records")
                    time.sleep(0.01)
                if fire0 is None:
                    fire0 = min(run.epoch(r["ts"]) - r["window"]["used_ms"] / 1000 for r in per_tick[0]) + offset
                if variant == "listen":
                    with open(log_path) as f:
                        address = next(line.split("listen=")[1].split()[0] for line in f if "listen=" in line)
                    scraped = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{size_download}",
                                              f"http://{address}/metrics"], stdout=subprocess.PIPE, text=True)
                    scrapes.append(int(scraped.stdout or 0))
                done = max(run.epoch(r["ts"]) for r in per_tick[tick]) + offset
                fire = fire0 + tick * INTERVAL
                start, end = done + 0.2, fire0 + (tick + 1) * INTERVAL - 0.1
                while time.monotonic() < start:
                    time.sleep(0.01)
                if tick > 0:
                    periods.append(run.sample_quiet(process.pid, start, end, fire))
                else:
                    time.sleep(max(0, end - time.monotonic()))
            status = run.proc_status(process.pid, "VmHWM", "VmRSS", "RssAnon", "RssFile")
            threads = sorted(set(run.thread_label(comm) for comm, _, _ in run.tasks(process.pid).values()))
        finally:
            run.stop_process(process)
            stderr.close()
    size = os.path.getsize(textfile) if variant == "textfile" and os.path.exists(textfile) else None
    return {"variant": variant, **status, "threads": threads,
            "wakeups_per_s": statistics.mean(p["per_second"] for p in periods),
            "per_thread": [p["per_thread"] for p in periods],
            "bytes": size if size is not None else (max(scrapes) if scrapes else None)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scratch", default=os.path.join(run.ROOT, ".build-bench"), help="swift build --scratch-path")
    parser.add_argument("--skip-build", action="store_true", help="use keepalive and bluez-sim already in --scratch")
    parser.add_argument("--binary", help="measure this keepalive instead of --scratch's")
    parser.add_argument("--label", default="this build", help="what --binary is, for the table")
    parser.add_argument("--variants", default="off,textfile,listen")
    args = parser.parse_args()
    args.quick = True
    ctx = run.Context(args)
    ctx.bin = os.path.join(ctx.scratch, "release")
    if not args.skip_build:
        run.prepare_static_libraries(ctx.swift)
        for product in ["keepalive", "bluez-sim"]:
            run.log(f"building {product} (release, {ctx.scratch})")
            subprocess.run([ctx.swift, "build", "--package-path", run.ROOT, "--scratch-path", ctx.scratch, "-c",
                            "release", *run.RELEASE_FLAGS, "--product", product], check=True, env=run.RELEASE_ENV)
    binary = args.binary or os.path.join(ctx.bin, "keepalive")
    size = os.path.getsize(binary)
    print(f"| build | metrics | VmHWM MiB | VmRSS MiB | RssAnon MiB | RssFile MiB | wake-ups/s between ticks | "
          f"threads | text bytes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for number, variant in enumerate(args.variants.split(",")):
        run.log(f"{args.label}: metrics {variant}")
        result = measure(ctx, binary, variant, number)
        mib = lambda key: f"{result.get(key, 0) / 1024:.2f}"  # noqa: E731
        print(f"| {args.label} ({size / 2**20:.1f} MiB binary) | {variant} | {mib('VmHWM')} | {mib('VmRSS')} | "
              f"{mib('RssAnon')} | {mib('RssFile')} | {result['wakeups_per_s']:.2f} | {len(result['threads'])}: "
              f"{', '.join(result['threads'])} | {result['bytes'] or ''} |", flush=True)
        run.log(f"per thread: {result['per_thread']}")
    shutil.rmtree(ctx.work, ignore_errors=True)


if __name__ == "__main__":
    main()
