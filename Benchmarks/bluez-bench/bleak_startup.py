"""bleak's start-up, for the benchmark suite's start-up section (Benchmarks/run.py): from the interpreter's
start, one connect -> read -> disconnect of ADDRESS on hci0, as an application would write it (BleakClient with
an address finds the device by a scan first). Prints `first_read` once the read returned and `disconnected`
once the client has disconnected; the driver times both lines from the spawn.

usage: bleak_startup.py ADDRESS
"""
import asyncio
import sys

from bleak import BleakClient

COUNTER = "4b410002-6b65-6570-616c-697665000000"


async def main() -> None:
    async with BleakClient(sys.argv[1], bluez={"adapter": "hci0"}, timeout=10.0) as client:
        await client.read_gatt_char(COUNTER)
        print("first_read", flush=True)
    print("disconnected", flush=True)


asyncio.run(main())
