"""bleak doing exactly what BlueZBenchmark does: connect -> read one characteristic -> disconnect for N
devices, three at a time, adapter named, against the same org.bluez (DBUS_SYSTEM_BUS_ADDRESS).

usage: bleak_bench.py N [ROUNDS]  -> n=... cpu_us_per_device=... wall_ms_per_round=... failures=...
"""
import asyncio
import resource
import sys
import time

from bleak import BleakClient, BleakScanner

COUNTER = "4b410002-6b65-6570-616c-697665000000"


def cpu_us() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1e6


async def main() -> None:
    count = int(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    addresses = ["C0:FF:EE:00:%02X:%02X" % (n >> 8, n & 0xFF) for n in range(1, count + 1)]
    # Device objects already known to BlueZ are found by a short scan; connecting by BLEDevice avoids a
    # discovery per connection, as BlueZTransport does with an object already present.
    found = {d.address: d for d in await BleakScanner.discover(timeout=2.0, bluez={"adapter": "hci0"})}
    devices = [found.get(a, a) for a in addresses]
    semaphore = asyncio.Semaphore(3)

    async def poll(device) -> bool:
        async with semaphore:
            try:
                async with BleakClient(device, bluez={"adapter": "hci0"}, timeout=10.0) as client:
                    await client.read_gatt_char(COUNTER)
                return True
            except Exception:  # a failure is counted, as on the Swift side
                return False

    async def one_round() -> int:
        results = await asyncio.gather(*(poll(d) for d in devices))
        return sum(1 for ok in results if not ok)

    await one_round()  # warm-up
    cpu_start, wall_start = cpu_us(), time.monotonic()
    failures = 0
    for _ in range(rounds):
        failures += await one_round()
    wall = time.monotonic() - wall_start
    cpu = cpu_us() - cpu_start
    print(f"n={count} cpu_us_per_device={int(cpu / (count * rounds))} wall_ms_per_round={int(wall * 1000 / rounds)} failures={failures}")


asyncio.run(main())
