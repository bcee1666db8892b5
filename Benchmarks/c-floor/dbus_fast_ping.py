"""The dbus-fast side of DBusBenchmark: N Ping calls to org.example.Bench /bench over asyncio, one at a time,
as the C and Swift clients do. Prints `median_us=… cpu_us_per_call=… user_us_per_call=… system_us_per_call=…` like
dbus_ping.c.

usage: dbus_fast_ping.py ADDRESS N
"""
import asyncio
import resource
import sys
import time

from dbus_fast import Message
from dbus_fast.aio import MessageBus


def cpu_us() -> tuple[float, float]:
    """This process's user and system CPU."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime * 1e6, usage.ru_stime * 1e6


async def main() -> None:
    address, count = sys.argv[1], int(sys.argv[2])
    bus = await MessageBus(bus_address=address).connect()
    message = lambda: Message(destination="org.example.Bench", path="/bench", interface="org.example.Bench", member="Ping")
    for _ in range(200):  # warm-up, as the other clients do
        await bus.call(message())
    latencies = []
    start = cpu_us()
    for _ in range(count):
        t0 = time.perf_counter()
        reply = await bus.call(message())
        latencies.append((time.perf_counter() - t0) * 1e6)
        if reply.message_type.name != "METHOD_RETURN":
            raise SystemExit(f"call failed: {reply.error_name}: {reply.body}")
    end = cpu_us()
    user, system = (end[0] - start[0]) / count, (end[1] - start[1]) / count
    latencies.sort()
    print(f"median_us={latencies[count // 2]:.1f} cpu_us_per_call={user + system:.2f} user_us_per_call={user:.2f} "
          f"system_us_per_call={system:.2f}")
    bus.disconnect()


asyncio.run(main())
