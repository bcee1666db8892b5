"""Link time per poll (issue #35): keepalive's BlueZTransport and bleak doing the same reads (connect -> read the
counter -> disconnect, one poll at a time), timed by a neutral observer on the bus.

usage: link_time.py --swift BIN --python PY --polls N [--every SECONDS] --address A [--address B ...]
                    [--bus ADDRESS] [--external-bus ADDRESS] [--observer-on-bus] [--label TEXT]
                    [--interval SECONDS] [--csv FILE]

--every starts each client's polls SECONDS apart (default 0: back to back).

--bus is the bus keepalive (libdbus) uses, --external-bus the one bleak (dbus-fast, EXTERNAL only) uses: the same
on a unix socket; in the qemu lab the first is the guest's TCP listener (ANONYMOUS) and the second its socat
bridge (EXTERNAL). Both default to DBUS_SYSTEM_BUS_ADDRESS. The observer uses the external bus and monitors it;
with --observer-on-bus it uses --bus with ANONYMOUS and only listens to the signals (the lab: see link-time.sh).

The observer (link_observer.py, a process of its own) stamps every Device1 Connected change of every device with
CLOCK_MONOTONIC as it reads the signal; the clients stamp their own calls on the same clock. Per poll:

  link        observer: Connected=true -> Connected=false (the airtime the sensor pays for)
  operations  client: connect called -> read done
  disconnect  BlueZ's own disconnect: Device1.Disconnect on the bus -> Connected=false (observer; when it does
              not monitor the bus, the client's disconnect call stands in for the D-Bus call, and gap reads 0)
  setup       connect called (client) -> Connected=true
  gap         read done (client) -> Device1.Disconnect on the bus: what the client library adds to the link
              between its last operation and asking BlueZ to end it
  returned    Connected=false -> disconnect returned (negative: the client returned before the link was down)
  reported    keepalive's BlueZTransport.linkTime(of:) minus the observer's link

link = operations + disconnect - setup + gap, so "link <= operations + BlueZ's disconnect" holds exactly when the
client adds less between its read and its Disconnect than the connection took to come up. link - disconnect
(operations - setup + gap) is the client's share of the link: BlueZ's disconnect is the same for every client,
but on bluetoothd 5.66 it varies by a second from poll to poll (its 2-s timer is rounded to a whole second), so
two clients' links are compared by their shares. Per device-hour: the mean link (and share) times the polls an
hour at --interval.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def device_path(address: str) -> str:
    return "/org/bluez/hci0/dev_" + address.upper().replace(":", "_")


def parse_polls(output: str) -> tuple[list[dict], int]:
    """The polls that completed, and how many failed."""
    polls = []
    failed = 0
    for line in output.splitlines():
        if line.startswith("failed"):
            failed += 1
            print(f"  {line}", file=sys.stderr)
        if not line.startswith("poll "):
            continue
        fields = dict(item.split("=", 1) for item in line.split()[1:])
        polls.append(
            {key: (value if key == "address" else int(value)) for key, value in fields.items()}
        )
    return polls, failed


Events = dict[str, list[tuple[int, str]]]  # object path -> (ns, "1" | "0" | "Connect" | "Disconnect"), in order


def read_events(path: str) -> Events:
    events: Events = {}
    with open(path) as lines:
        for line in lines:
            parts = line.split()
            if len(parts) == 4:
                events.setdefault(parts[1], []).append((int(parts[0]), parts[3]))
    return events


def match(poll: dict, events: Events) -> dict | None:
    """The observer's Connected=true and =false of this poll's link, and its Disconnect call on the bus (when the
    observer could monitor; else the client's own disconnect call); None when a Connected change is missing."""
    changes = events.get(device_path(poll["address"]), [])
    ups = [t for t, what in changes if what == "1" and poll["connect_ns"] <= t <= poll["read_ns"]]
    if not ups:
        return None
    up = ups[-1]
    calls = [t for t, what in changes if what == "Disconnect" and poll["read_ns"] <= t <= poll["returned_ns"]]
    disconnect_call = calls[0] if calls else poll["disconnect_ns"]
    downs = [t for t, what in changes if what == "0" and t >= max(up, disconnect_call)]
    if not downs:
        return None
    down = downs[0]
    row = {
        "link": down - up,
        "operations": poll["read_ns"] - poll["connect_ns"],
        "disconnect": down - disconnect_call,
        "setup": up - poll["connect_ns"],
        "gap": disconnect_call - poll["read_ns"],
        "returned": poll["returned_ns"] - down,
    }
    row["share"] = row["link"] - row["disconnect"]
    if poll.get("reported_ns", -1) >= 0:
        row["reported"] = poll["reported_ns"] - (down - up)
    return row


def run_client(name: str, command: list[str], bus: str) -> tuple[list[dict], int]:
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus)
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-2000:] + result.stderr[-4000:])
        raise SystemExit(f"{name} exited {result.returncode}")
    return parse_polls(result.stdout)


def milliseconds(nanoseconds: float) -> str:
    value = nanoseconds / 1e6
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--swift", required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--polls", type=int, default=20)
    parser.add_argument("--every", type=float, default=0.0)
    parser.add_argument("--address", action="append", required=True)
    parser.add_argument("--bus", default=os.environ.get("DBUS_SYSTEM_BUS_ADDRESS"))
    parser.add_argument("--external-bus", default=None)
    parser.add_argument("--observer-on-bus", action="store_true")
    parser.add_argument("--label", default="")
    parser.add_argument("--interval", type=float, default=30.0)
    parser.add_argument("--csv")
    arguments = parser.parse_args()
    bus = arguments.bus
    external = arguments.external_bus or bus
    if not bus:
        raise SystemExit("no bus: set DBUS_SYSTEM_BUS_ADDRESS or pass --bus")

    events_file = tempfile.NamedTemporaryFile(prefix="link-observer.", delete=False).name
    observer_options = ["--anonymous", "--no-monitor"] if arguments.observer_on_bus else []
    observer = subprocess.Popen(
        [arguments.python, str(HERE / "link_observer.py"), *observer_options, events_file],
        env=dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus if arguments.observer_on_bus else external),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ready = observer.stdout.readline().split()
        if not ready or ready[0] != "READY":
            raise SystemExit("the observer did not start")
        monitoring = ready[1] == "monitor"
        pacing = ["--every", str(arguments.every)] if arguments.every > 0 else []
        clients = {
            "keepalive": run_client(
                "BlueZBenchmark --link",
                [arguments.swift, "--link", str(arguments.polls), *pacing, *arguments.address],
                bus,
            ),
            "bleak": run_client(
                "bleak_link.py",
                [arguments.python, str(HERE / "bleak_link.py"), str(arguments.polls), *pacing, *arguments.address],
                external,
            ),
        }
        # A client may return before its last Connected=false reached the observer: wait for it (bounded).
        last = max((p["disconnect_ns"] for polls, _ in clients.values() for p in polls), default=0)
        give_up = time.monotonic() + 10
        while time.monotonic() < give_up:
            events = read_events(events_file)
            if any(t >= last and what == "0" for changes in events.values() for t, what in changes):
                break
            time.sleep(0.05)
    finally:
        observer.terminate()
        observer.wait(timeout=10)
    events = read_events(events_file)
    os.unlink(events_file)

    columns = ["link", "operations", "disconnect", "setup", "gap", "returned", "share", "reported"]
    csv = open(arguments.csv, "w") if arguments.csv else None
    if csv:
        csv.write("client,address,warmup," + ",".join(f"{c}_ns" for c in columns) + "\n")
    summary = {}
    for name, (polls, failed) in clients.items():
        rows = []
        unmatched = 0
        for poll in polls:
            row = match(poll, events)
            if row is None:
                unmatched += 1
                continue
            if csv:
                csv.write(
                    f"{name},{poll['address']},{poll['warmup']},"
                    + ",".join(str(row.get(c, "")) for c in columns)
                    + "\n"
                )
            if not poll["warmup"]:
                rows.append(row)
        summary[name] = (rows, unmatched, failed)

    label = f" ({arguments.label})" if arguments.label else ""
    print(f"Link time per poll{label}: median (min–max) in ms over the measured polls; warm-up polls left out.")
    print(
        "The Disconnect call is stamped "
        + ("on the bus (the observer monitors it)." if monitoring else "by the client (the observer does not monitor).")
    )
    print()
    print("| client | polls (failed) | link | operations | BlueZ's disconnect | setup | gap | returned | "
          "link − disconnect | link ≤ operations + disconnect | reported − observed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, (rows, unmatched, failed) in summary.items():
        if not rows:
            print(f"| {name} | 0 ({failed}) | | | | | | | | | |")
            continue

        def cell(key: str) -> str:
            values = [row[key] for row in rows if key in row]
            if not values:
                return "—"
            return (
                f"{milliseconds(statistics.median(values))} "
                f"({milliseconds(min(values))}–{milliseconds(max(values))})"
            )

        within = sum(1 for row in rows if row["link"] <= row["operations"] + row["disconnect"])
        print(
            f"| {name} | {len(rows)} ({failed}) | {cell('link')} | {cell('operations')} | {cell('disconnect')} | "
            f"{cell('setup')} | {cell('gap')} | {cell('returned')} | {cell('share')} | {within} of {len(rows)} | "
            f"{cell('reported')} |"
        )
        if unmatched:
            print(f"  ({name}: {unmatched} polls without both Connected changes seen)", file=sys.stderr)
    print()
    per_hour = 3600 / arguments.interval
    print(f"Per device-hour at a {arguments.interval:g} s interval ({per_hour:g} polls):")
    print()
    print("| client | link per poll (mean) | link per device-hour | duty cycle | link − disconnect per device-hour |")
    print("|---|---:|---:|---:|---:|")
    for name, (rows, _, _) in summary.items():
        if not rows:
            continue
        link = statistics.mean(row["link"] for row in rows)
        share = statistics.mean(row["share"] for row in rows)
        print(
            f"| {name} | {milliseconds(link)} ms | {link * per_hour / 1e9:,.2f} s | "
            f"{100 * link / 1e9 / arguments.interval:.3f} % | {share * per_hour / 1e9:,.2f} s |"
        )


main()
