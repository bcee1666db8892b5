"""bleak doing what `BlueZBenchmark --link` does, for link_time.py: POLLS polls one after another, round robin over
the addresses (on hci0, after one warm-up poll each), connect -> read the counter -> disconnect.

usage: bleak_link.py POLLS [--every SECONDS] ADDRESS...  (bus: DBUS_SYSTEM_BUS_ADDRESS)

--every starts each poll SECONDS after the last one started (default 0: back to back).

One line per poll: `poll address=... warmup=0|1 connect_ns=... read_ns=... disconnect_ns=... returned_ns=...
reported_ns=-1 ok=1`, instants on CLOCK_MONOTONIC: the connect call, the read done, the disconnect call,
disconnect returned (bleak has no link time of its own to report).
"""
import asyncio
import sys
import time

from bleak import BleakClient, BleakScanner

COUNTER = "4b410002-6b65-6570-616c-697665000000"
ADAPTER = {"adapter": "hci0"}


async def main() -> None:
    polls = int(sys.argv[1])
    addresses = sys.argv[2:]
    every = 0.0
    if addresses[:1] == ["--every"]:
        every = float(addresses[1])
        addresses = addresses[2:]
    # Found once each (the lab's peripheral advertises once a second); every poll then connects by BLEDevice, as
    # bleak_bench.py does, so no poll scans.
    devices = {}
    for address in addresses:
        device = await BleakScanner.find_device_by_address(address, timeout=30.0, bluez=ADAPTER)
        if device is None:
            raise SystemExit(f"bleak did not find {address}")
        devices[address] = device
    failures = 0
    start = time.monotonic()
    for index in range(len(addresses) + polls):
        await asyncio.sleep(max(0.0, start + every * index - time.monotonic()))
        address = addresses[index % len(addresses)]
        client = BleakClient(devices[address], bluez=ADAPTER, timeout=10.0)
        connect_call = time.monotonic_ns()
        try:
            await client.connect()
            await client.read_gatt_char(COUNTER)
        except Exception as error:  # counted, as on the Swift side
            failures += 1
            print(f"failed address={address} error={error!r}", flush=True)
            await client.disconnect()
            continue
        read_done = time.monotonic_ns()
        disconnect_call = time.monotonic_ns()
        await client.disconnect()
        returned = time.monotonic_ns()
        print(
            f"poll address={address} warmup={int(index < len(addresses))} connect_ns={connect_call} "
            f"read_ns={read_done} disconnect_ns={disconnect_call} returned_ns={returned} reported_ns=-1 ok=1",
            flush=True,
        )
    print(f"done polls={polls} failures={failures}", flush=True)


asyncio.run(main())
