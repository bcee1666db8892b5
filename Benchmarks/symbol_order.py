#!/usr/bin/env python3
"""Writes Benchmarks/keepalive.order and keepalive.ld: where the release build puts the functions `keepalive run`
executes (lld's --symbol-ordering-file, and a linker script for the functions that have no symbol).

    Benchmarks/symbol_order.py [--skip-build] [--check]

Why: Swift emits each function to a section of its own only when asked (`-function-sections`, which the
release build passes), and lld then lays the sections out in the order this file gives. Without an order, the
≈ 1.4 MB of functions a daemon executes is scattered over its ≈ 13 MB of code, and every 4 KiB page it touches
brings its 64 KiB neighbourhood into the process with it (the kernel's fault-around): at 100 devices that was
8.8 MiB of resident code. With the executed functions placed together first, the code the daemon uses is what is
resident (Benchmarks/NOTES.md, "RSS").

How: the release `keepalive` (built as `make install` builds it, into .build-bench) runs under callgrind
against `bluez-sim` in two configurations, each start-up, four ticks and shutdown: 100 devices reading a
characteristic (the benchmarks' configuration), then 20 devices whose reads are decoded into fields and
delivered over MQTT to a private mosquitto (the bridge, its spool and discovery), with `metrics:` (a textfile,
and an endpoint that curl scrapes once a second while the daemon runs). The first configuration's functions
come first, so the daemon without `metrics:` or `mqtt:` keeps its code together. callgrind records every
instruction executed (`--dump-instr=yes`); the map of a link made for the profile (the same flags plus `-Map`, a
relink only) says which input section holds each. Every executed section is listed once, in the order first
seen: by its symbol in keepalive.order, or, for the functions Swift emits without a symbol (private closures'
context destructors, some value witnesses: sections named `.text..L…`, one per object file, so no name can order
them), by object file in keepalive.ld, which puts them first in `.text`; keepalive.order's follow.
The standard library's and the runtime's archives hold one `.text` per object file: such a section moves whole.
A function the profile missed (an error path, a command other than `run`) is laid out after the listed ones, as
before: the order makes the common case compact and costs nothing when it is stale, except the resident memory
it would have saved. Regenerate after large changes to the daemon: `--check` (in CI, after bench-quick) fails when
the build has less than 95 % of the listed functions, and the linker script names object files, never the
compiler's labels for unnamed functions, which any edit renumbers.

valgrind 3.19 needs the same workarounds here as in callgrind_poll.py (debug info stripped from a copy of the
binary, libdispatch's `sigsuspend` shimmed).
"""
import argparse
import bisect
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import callgrind_poll  # noqa: E402  (SHIM: valgrind's workaround)
import run  # noqa: E402  (the benchmark driver: build, simulator, broker, configurations)

ORDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "keepalive.order")
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "keepalive.ld")


def executed_addresses(profile, binary):
    """Every instruction address of `binary` a callgrind output file (--dump-instr=yes --dump-line=no) has a
    cost for, in the order first listed there; and, for each named function, the lowest of its addresses (to
    find where valgrind loaded the binary)."""
    objects, functions = {}, {}
    current_object = current_function = None
    address, seen, result, lowest = 0, set(), [], {}

    def name(table, spec):
        # callgrind's name compression: "(id) name" defines an id, "(id)" refers to one.
        match = re.match(r"\((\d+)\)(?: (.*))?$", spec)
        if not match:
            return spec
        if match.group(2) is not None:
            table[match.group(1)] = match.group(2)
        return table.get(match.group(1))

    with open(profile) as f:
        for line in f:
            head = line[:1]
            if head in "0123456789+-*":
                # A cost line: its first number is the instruction's address, absolute or relative to the last.
                position = line.split(None, 1)[0]
                if position[0] == "+":
                    address += int(position[1:], 0)
                elif position[0] == "-":
                    address -= int(position[1:], 0)
                elif position != "*":
                    address = int(position, 0)
                # "???": code valgrind does not attribute to an object, which includes the binary's code outside
                # its `.text` (keepalive.ld's section); placement() keeps only addresses inside the link map.
                if current_object == binary or current_object == "???":
                    if address not in seen:
                        seen.add(address)
                        result.append(address)
                    if current_object == binary and current_function and not current_function.startswith("0x"):
                        lowest[current_function] = min(lowest.get(current_function, address), address)
            elif line.startswith("ob="):
                current_object = name(objects, line[3:].rstrip("\n"))
            elif line.startswith("fn="):
                current_function = re.sub(r"'\d+$", "", name(functions, line[3:].rstrip("\n")) or "")
            elif line.startswith("cob="):
                name(objects, line[4:].rstrip("\n"))
            elif line.startswith("cfn="):
                name(functions, line[4:].rstrip("\n"))
    return result, lowest


def text_sections(link_map):
    """lld's -Map → [(address, size, object file, section, its first symbol or None)] of the input sections of
    executable code, by address."""
    sections = []
    section = re.compile(r"\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+\s+(\S.*):\((\.text[^)]*)\)$")
    symbol = re.compile(r"\s*[0-9a-f]+\s+[0-9a-f]+\s+[0-9a-f]+\s+\d+\s+(\S+)$")
    with open(link_map) as f:
        for line in f:
            line = line.rstrip("\n")
            match = section.match(line)
            if match:
                sections.append([int(match.group(1), 16), int(match.group(2), 16), match.group(3), match.group(4), None])
                continue
            match = symbol.match(line) if sections and sections[-1][4] is None and ":(" not in line else None
            if match and not match.group(1).startswith("."):  # not the next output section's line
                sections[-1][4] = match.group(1)
    sections.sort()
    return sections


def placement(addresses, sections):
    """The executed sections, in the order of `addresses`: their symbols for keepalive.order, and linker-script
    patterns for the sections of functions without a symbol. A section of many functions (an archive member's or
    a C object's whole `.text`: the standard library, the runtime) moves whole, by one of its symbols."""
    starts = [section[0] for section in sections]
    names, patterns, seen = [], [], set()
    for address in addresses:
        index = bisect.bisect_right(starts, address) - 1
        if index < 0 or index in seen:
            continue
        start, size, source, section, first_symbol = sections[index]
        if not start <= address < start + size:
            continue
        seen.add(index)
        if first_symbol:
            names.append(first_symbol)
        elif section != ".text" and not source.endswith(")"):
            # Every unnamed section of the object, by the object's path below the scratch directory's configuration
            # folder (<Module>.build/<File>.o): the compiler's own labels (`.L__unnamed_2`) change with any edit.
            pattern = "*/" + "/".join(source.split("/")[-2:]) + "(.text..L*)"
            if pattern not in patterns:
                patterns.append(pattern)
    return names, patterns


def defined_functions(binary):
    text = subprocess.run(["nm", "--defined-only", binary], stdout=subprocess.PIPE, text=True, check=True).stdout
    return {fields[2] for fields in (line.split(" ", 2) for line in text.splitlines()) if len(fields) == 3
            and fields[1] in "tTwW"}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scratch", default=os.path.join(run.ROOT, ".build-bench"))
    parser.add_argument("--skip-build", action="store_true")
    parser.add_argument("--check", action="store_true", help="only say how much of the order the build still has")
    parser.add_argument("--at-least", type=float, default=0.95,
                        help="with --check: fail when the build has less than this share of the listed functions")
    args = parser.parse_args()
    ctx = run.Context(argparse.Namespace(quick=True, scratch=args.scratch))
    if args.skip_build:
        ctx.bin = os.path.join(ctx.scratch, "release")
    else:
        run.build(ctx)
    binary = os.path.join(ctx.bin, "keepalive")
    if args.check:
        with open(ORDER) as f:
            listed = [line.strip() for line in f if line.strip()]
        present = defined_functions(binary)
        kept = sum(1 for name in listed if name in present)
        share = kept / max(len(listed), 1)
        print(f"{kept} of the {len(listed)} functions in {ORDER} are in {binary} ({share:.0%})")
        if share < args.at_least:
            raise SystemExit(f"the release layout is stale: under {args.at_least:.0%} of it is in the build; "
                             "regenerate it with Benchmarks/symbol_order.py")
        return
    work = tempfile.mkdtemp(prefix="keepalive-order-")
    # The same link with a map (a relink: only linker flags differ), to find the sections of unnamed functions.
    link_map = os.path.join(work, "keepalive.map")
    subprocess.run([ctx.swift, "build", "-c", "release", "--scratch-path", ctx.scratch, "--product", "keepalive"]
                   + run.RELEASE_FLAGS + ["-Xlinker", f"-Map={link_map}", "-Xlinker", "--no-demangle"], check=True,
                   stdout=subprocess.DEVNULL, env=run.RELEASE_ENV)
    daemon = os.path.join(work, "keepalive")
    shutil.copy(binary, daemon)
    subprocess.run(["objcopy", "--strip-debug", daemon], check=True)
    with open(os.path.join(work, "shim.c"), "w") as f:
        f.write(callgrind_poll.SHIM)
    shim = os.path.join(work, "shim.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", shim, os.path.join(work, "shim.c")], check=True)
    sections = text_sections(link_map)
    profiled = []
    with run.Simulator(ctx, 100, 0.01) as sim, run.Mosquitto(ctx) as broker:
        env = dict(sim.env(), LD_PRELOAD=shim)
        plain = run.write_config(ctx, "order-plain.yaml", 100, 2.0, budget=1.8)
        spool = os.path.join(work, "spool")
        bridged = os.path.join(work, "order-mqtt.yaml")
        with open(bridged, "w") as f:
            f.write(f"interval: 2s\nmin_interval: 2s\nwindow_budget: 1800ms\n"
                    f"mqtt:\n  broker: mqtt://127.0.0.1:{broker.port}\n"
                    f"  gateway: order\n  spool: {{path: {spool}}}\n"
                    f"metrics:\n  textfile: {os.path.join(work, 'order.prom')}\n  listen: 127.0.0.1:0\n"
                    f"devices:\n")
            for n in range(1, 21):
                f.write(f'  - {{name: d{n}, address: "{run.address(n)}", read: [{{uuid: {run.COUNTER}, '
                        f'fields: [{{name: counter, at: 0, format: uint32le}}]}}]}}\n')
        for label, config, devices in (("plain", plain, 100), ("mqtt", bridged, 20)):
            profile = os.path.join(work, f"{label}.out")
            output = os.path.join(work, f"{label}.jsonl")
            run.log(f"callgrind: keepalive run, {label} configuration, 4 ticks")
            log_path = os.path.join(work, f"{label}.log")
            with open(log_path, "w") as log_file:
                process = subprocess.Popen(
                    ["valgrind", "--tool=callgrind", "--demangle=no", "--dump-instr=yes", "--dump-line=no",
                     f"--callgrind-out-file={profile}",
                     daemon, "run", "--config", config, "--bus", sim.address, "--output", output, "--ticks", "4"],
                    env=env, stdout=subprocess.DEVNULL, stderr=log_file, text=True)
                # The metrics endpoint, once it says where it is: scraped as a Prometheus would, until the end.
                while process.poll() is None:
                    time.sleep(1)
                    with open(log_path) as f:
                        listening = [line.split("listen=")[1].split()[0] for line in f if "listen=" in line]
                    if listening:
                        subprocess.run(["curl", "-s", "-o", "/dev/null", "--max-time", "5",
                                        f"http://{listening[0]}/metrics"])
                returncode = process.wait()
            if returncode != 0 or not os.path.exists(profile):
                with open(log_path) as f:
                    raise SystemExit(f"callgrind failed ({label}): {f.read().splitlines()[-5:]}")
            addresses, lowest = executed_addresses(profile, daemon)
            records = open(output).read().count("\n") if os.path.exists(output) else 0
            if records < 4 * devices:
                raise SystemExit(f"{label}: {records} records in 4 ticks of {devices} devices: the profile is not the daemon's")
            # valgrind loads the binary at an address of its own: the offset most named functions agree on.
            symbols = {section[4]: section[0] for section in sections if section[4]}
            offsets = collections.Counter(low - symbols[name] for name, low in lowest.items() if name in symbols)
            if not offsets:
                raise SystemExit(f"{label}: no function of the profile is in the link map")
            offset = offsets.most_common(1)[0][0]
            profiled += [address - offset for address in addresses]
    named, unnamed = placement(profiled, sections)
    shutil.rmtree(work, ignore_errors=True)
    with open(ORDER, "w") as f:
        f.write("".join(f"{name}\n" for name in named))
    with open(SCRIPT, "w") as f:
        f.write("/* Written by Benchmarks/symbol_order.py: the functions `keepalive run` executes that have no symbol (so\n"
                "   keepalive.order cannot name them), together, first in .text. Used by the release build (Makefile). */\n"
                "SECTIONS {\n  .text : {\n")
        f.write("".join(f"    {pattern}\n" for pattern in unnamed))
        f.write("  }\n} INSERT BEFORE .init;\n")
    print(f"{len(named)} functions written to {ORDER}, {len(unnamed)} sections of unnamed ones to {SCRIPT}")


if __name__ == "__main__":
    main()
