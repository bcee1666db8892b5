#!/usr/bin/env python3
"""Fidelity check: real BlueZ clients (bleak 3.x, bluetoothctl 5.66) against bluez-sim.

usage: fidelity.py PATH/TO/bluez-sim

Each step prints `PASS name` or `FAIL name: why`; the last line is `N passed, M failed`. Exit status 1 on any
failure. If a real client cannot talk to the simulator, the simulator is wrong, not the client.
"""

import asyncio
import os
import re
import signal
import subprocess
import sys
import time

BATTERY_LEVEL = "00002a19-0000-1000-8000-00805f9b34fb"
TEMPERATURE = "00002a6e-0000-1000-8000-00805f9b34fb"
COUNTER = "4b410002-6b65-6570-616c-697665000000"
SETTING = "4b410003-6b65-6570-616c-697665000000"
FIRST = "C0:FF:EE:00:00:01"
DEVICES = ["C0:FF:EE:00:00:01", "C0:FF:EE:00:00:02", "C0:FF:EE:00:00:03"]

results = []


def record(name, ok, why=""):
    results.append(ok)
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why), flush=True)
    return ok


class Simulator:
    """bluez-sim --private: its own dbus-daemon; prints the bus address, then READY."""

    def __init__(self, binary, *arguments):
        self.process = subprocess.Popen(
            [binary, "--private", "--devices", str(len(DEVICES)), *arguments],
            stdout=subprocess.PIPE, text=True)
        self.address = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            if line.startswith("DBUS_SYSTEM_BUS_ADDRESS="):
                self.address = line.split("=", 1)[1].strip()
            if line.strip() == "READY":
                return
        raise RuntimeError("bluez-sim did not print READY")

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return None


async def bleak_steps():
    from bleak import BleakClient, BleakScanner

    step = "bleak: discover on hci0 finds the 3 sensors"
    found = await BleakScanner.discover(timeout=3.0, bluez={"adapter": "hci0"}, return_adv=True)
    addresses = sorted(found.keys())
    if not record(step, all(a in addresses for a in DEVICES), f"found {addresses}"):
        return
    device, advertisement = found[FIRST]
    record("bleak: advertisement carries name, RSSI, manufacturer data",
           advertisement.local_name == "Sensor-001" and advertisement.rssi < 0
           and advertisement.manufacturer_data.get(0xFFFF, b"")[:2] == b"KA",
           repr(advertisement))

    client = BleakClient(device, bluez={"adapter": "hci0"}, timeout=20.0)
    try:
        await client.connect()
        record("bleak: connect", client.is_connected, "is_connected is False")
        uuids = {c.uuid for s in client.services for c in s.characteristics}
        record("bleak: services resolved with the GATT characteristics",
               {BATTERY_LEVEL, TEMPERATURE, COUNTER, SETTING} <= uuids, f"characteristics {sorted(uuids)}")

        level = await client.read_gatt_char(BATTERY_LEVEL)
        record("bleak: read Battery Level 0x2A19", len(level) == 1 and 0 < level[0] <= 100, repr(level))
        first = int.from_bytes(await client.read_gatt_char(COUNTER), "little")
        second = int.from_bytes(await client.read_gatt_char(COUNTER), "little")
        record("bleak: read the counter twice, it counts", second == first + 1, f"{first} then {second}")

        received = []
        three = asyncio.Event()

        def on_notification(_, data):
            received.append(int.from_bytes(data, "little"))
            if len(received) >= 3:
                three.set()

        await client.start_notify(COUNTER, on_notification)
        try:
            await asyncio.wait_for(three.wait(), 10)
        except asyncio.TimeoutError:
            pass
        await client.stop_notify(COUNTER)
        gaps = [b - a for a, b in zip(received, received[1:]) if b - a != 1]
        record("bleak: start_notify gets >= 3 notifications without gaps",
               len(received) >= 3 and not gaps, f"received {received}")

        await client.write_gatt_char(SETTING, b"\x2a\x07", response=True)
        back = await client.read_gatt_char(SETTING)
        record("bleak: write with response, read back", bytes(back) == b"\x2a\x07", repr(back))
        await client.write_gatt_char(SETTING, b"\x05", response=False)
        back = await client.read_gatt_char(SETTING)
        record("bleak: write without response, read back", bytes(back)[:1] == b"\x05", repr(back))
    except Exception as error:  # a client error is a simulator failure
        record("bleak: session", False, f"{type(error).__name__}: {error}")
    finally:
        if client.is_connected:
            await client.disconnect()
    record("bleak: disconnect", not client.is_connected, "still connected")


def bluetoothctl_steps():
    import pexpect

    prompt = r"\[[^\]]*\][^#]*# "
    ctl = pexpect.spawn("bluetoothctl", encoding="utf-8", timeout=15, env=dict(os.environ, TERM="dumb"))
    transcript = []
    ctl.logfile_read = type("Log", (), {"write": lambda self, s: transcript.append(s), "flush": lambda self: None})()

    def run(command, expected, name, then_prompt=True):
        """Sends `command`, waits for `expected` (a regex) in the output (and, unless the expected text is the
        prompt itself or is printed after it, for the next prompt)."""
        ctl.sendline(command)
        try:
            ctl.expect(expected)
            if then_prompt:
                ctl.expect(prompt)
            return record(name, True)
        except pexpect.TIMEOUT:
            tail = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", "".join(transcript))[-600:]
            return record(name, False, f"no {expected!r} after {command!r}; output tail:\n{tail}")

    try:
        ctl.expect("Agent registered")
        ctl.expect(prompt)
        record("bluetoothctl: starts, registers its agent", True)
    except pexpect.TIMEOUT:
        record("bluetoothctl: starts, registers its agent", False, "".join(transcript)[-400:])
        ctl.terminate(force=True)
        return
    run("list", r"Controller 00:1A:7D:DA:71:00 keepalive-sim #1 \[default\]", "bluetoothctl: list")
    run("devices", r"Device C0:FF:EE:00:00:03 Sensor-003", "bluetoothctl: devices")
    run(f"info {FIRST}", r"Name: Sensor-001(?s:.*)ManufacturerData Key: 0xffff", "bluetoothctl: info")
    run(f"connect {FIRST}", r"Connection successful", "bluetoothctl: connect")
    run(f"info {FIRST}", r"Connected: yes(?s:.*)Battery Percentage: 0x", "bluetoothctl: info after connect (Battery1)")
    run("menu gatt", r"list-attributes", "bluetoothctl: gatt menu")
    run(f"list-attributes {FIRST}", r"char0013(?s:.*)Vendor specific", "bluetoothctl: list-attributes")
    run(f"select-attribute {TEMPERATURE}", r"\[Sensor-001:/service[0-9a-f]{4}/char[0-9a-f]{4}\]",
        "bluetoothctl: select-attribute by UUID", then_prompt=False)
    # The value is printed when the reply comes, after the prompt is back.
    run("read", r"Attempting to read(?s:.*?)Value:(?s:.*?)[0-9a-f]{2} [0-9a-f]{2} ", "bluetoothctl: read",
        then_prompt=False)
    run("back", r"Menu main", "bluetoothctl: back to main menu")
    run(f"disconnect {FIRST}", r"Successful disconnected", "bluetoothctl: disconnect")
    ctl.sendline("quit")
    ctl.expect(pexpect.EOF)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]

    # (a) bleak, against `bluetoothd -P battery` (no battery plugin), so 0x180F stays a GATT service.
    simulator = Simulator(binary, "--no-battery-plugin")
    os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = simulator.address
    try:
        asyncio.run(asyncio.wait_for(bleak_steps(), 120))
    except Exception as error:
        record("bleak: run", False, f"{type(error).__name__}: {error}")
    record("bluez-sim (bleak run) stops cleanly on SIGTERM", simulator.stop() == 0, "exit status not 0")

    # (b) bluetoothctl, against the default (battery plugin on: Battery1 instead of the 0x180F service).
    simulator = Simulator(binary)
    os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = simulator.address
    try:
        bluetoothctl_steps()
    except Exception as error:
        record("bluetoothctl: run", False, f"{type(error).__name__}: {error}")
    record("bluez-sim (bluetoothctl run) stops cleanly on SIGTERM", simulator.stop() == 0, "exit status not 0")

    passed = sum(1 for ok in results if ok)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
