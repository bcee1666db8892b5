#!/usr/bin/env python3
"""Writes Benchmarks/keepalive.order: the functions `keepalive run` executes, for lld's --symbol-ordering-file.

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
delivered over MQTT to a private mosquitto (the bridge, its spool and discovery). Every function callgrind saw
run in the `keepalive` binary is listed once, in the order first listed. A function the profile missed
(an error path, a command other than `run`) is laid out after the listed ones, as before: the order makes the
common case compact and costs nothing when it is stale, except the resident memory it would have saved; `make
bench-quick`'s gate on resident memory at 100 devices notices that. Regenerate after large changes to the
daemon; `--check` prints how many of the listed functions the current build still has.

valgrind 3.19 needs the same workarounds here as in callgrind_poll.py (debug info stripped from a copy of the
binary, libdispatch's `sigsuspend` shimmed).
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
import callgrind_poll  # noqa: E402  (SHIM: valgrind's workaround)
import run  # noqa: E402  (the benchmark driver: build, simulator, broker, configurations)

ORDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "keepalive.order")


def executed_functions(profile, binary):
    """The functions of `binary` a callgrind output file has costs for, in the order first listed there."""
    objects, functions = {}, {}
    current, seen, result = None, set(), []

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
            line = line.rstrip("\n")
            if line.startswith("ob="):
                current = name(objects, line[3:])
            elif line.startswith("cob="):
                name(objects, line[4:])
            elif line.startswith("cfn="):
                name(functions, line[4:])
            elif line.startswith("fn="):
                function = name(functions, line[3:])
                if current != binary or not function:
                    continue
                function = re.sub(r"'\d+$", "", function)  # callgrind's mark for a recursion level
                if function.startswith("0x") or function in seen:
                    continue  # no symbol: nothing to order
                seen.add(function)
                result.append(function)
    return result


def defined_functions(binary):
    text = subprocess.run(["nm", "--defined-only", binary], stdout=subprocess.PIPE, text=True, check=True).stdout
    return {fields[2] for fields in (line.split(" ", 2) for line in text.splitlines()) if len(fields) == 3
            and fields[1] in "tTwW"}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scratch", default=os.path.join(run.ROOT, ".build-bench"))
    parser.add_argument("--skip-build", action="store_true")
    parser.add_argument("--check", action="store_true", help="only say how much of the order the build still has")
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
        print(f"{kept} of the {len(listed)} functions in {ORDER} are in {binary} ({kept / max(len(listed), 1):.0%})")
        return
    work = tempfile.mkdtemp(prefix="keepalive-order-")
    daemon = os.path.join(work, "keepalive")
    shutil.copy(binary, daemon)
    subprocess.run(["objcopy", "--strip-debug", daemon], check=True)
    with open(os.path.join(work, "shim.c"), "w") as f:
        f.write(callgrind_poll.SHIM)
    shim = os.path.join(work, "shim.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", shim, os.path.join(work, "shim.c")], check=True)
    order = []
    with run.Simulator(ctx, 100, 0.01) as sim, run.Mosquitto(ctx) as broker:
        env = dict(sim.env(), LD_PRELOAD=shim)
        plain = run.write_config(ctx, "order-plain.yaml", 100, 2.0, budget=1.8)
        spool = os.path.join(work, "spool")
        bridged = os.path.join(work, "order-mqtt.yaml")
        with open(bridged, "w") as f:
            f.write(f"interval: 2s\nwindow_budget: 1800ms\nmqtt:\n  broker: mqtt://127.0.0.1:{broker.port}\n"
                    f"  gateway: order\n  spool: {{path: {spool}}}\ndevices:\n")
            for n in range(1, 21):
                f.write(f'  - {{name: d{n}, address: "{run.address(n)}", read: [{{uuid: {run.COUNTER}, '
                        f'fields: [{{name: counter, at: 0, format: uint32le}}]}}]}}\n')
        for label, config in (("plain", plain), ("mqtt", bridged)):
            profile = os.path.join(work, f"{label}.out")
            run.log(f"callgrind: keepalive run, {label} configuration, 4 ticks")
            result = subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={profile}",
                                     daemon, "run", "--config", config, "--bus", sim.address, "--output", os.devnull,
                                     "--ticks", "4"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    text=True)
            if result.returncode != 0 or not os.path.exists(profile):
                raise SystemExit(f"callgrind failed ({label}): {result.stderr.splitlines()[-5:]}")
            known = set(order)
            order += [name for name in executed_functions(profile, daemon) if name not in known]
    shutil.rmtree(work, ignore_errors=True)
    with open(ORDER, "w") as f:
        f.write("".join(f"{name}\n" for name in order))
    print(f"{len(order)} functions written to {ORDER}")


if __name__ == "__main__":
    main()
