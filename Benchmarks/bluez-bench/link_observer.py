"""A neutral observer for link_time.py: its own process and bus connection, polling nothing. It timestamps, with
CLOCK_MONOTONIC as it reads each message, every org.bluez Device1 PropertiesChanged that carries Connected (every
device's) and, when the bus lets it monitor, every Device1.Connect and Device1.Disconnect call on the bus, whoever
makes it: the instant the call went out, not when a client library was asked for it.

usage: link_observer.py [--anonymous] [--no-monitor] OUTPUT
       (bus: DBUS_SYSTEM_BUS_ADDRESS; dbus-fast, which bleak installs)

--anonymous authenticates with ANONYMOUS (the qemu lab's TCP listener, which libdbus clients use) instead of
EXTERNAL; --no-monitor only listens to the signals. Prints `READY monitor` (BecomeMonitor accepted: a root or
same-user connection) or `READY signals` (only the signals, through AddMatch), then writes lines to OUTPUT until
SIGTERM or SIGINT:
  <ns> <object path> connected <0|1>
  <ns> <object path> call <Connect|Disconnect>
"""
import asyncio
import os
import signal
import sys
import time

from dbus_fast import Message, MessageType
from dbus_fast.aio import MessageBus
from dbus_fast.auth import AuthAnonymous

PROPERTIES = "org.freedesktop.DBus.Properties"
DEVICE = "org.bluez.Device1"
SIGNAL_RULE = (
    f"type='signal',interface='{PROPERTIES}',member='PropertiesChanged',path_namespace='/org/bluez',arg0='{DEVICE}'"
)
CALL_RULES = [
    f"type='method_call',interface='{DEVICE}',member='Connect'",
    f"type='method_call',interface='{DEVICE}',member='Disconnect'",
]


def driver_call(interface: str, member: str, signature: str, body: list) -> Message:
    return Message(
        destination="org.freedesktop.DBus",
        path="/org/freedesktop/DBus",
        interface=interface,
        member=member,
        signature=signature,
        body=body,
    )


async def main() -> None:
    options = sys.argv[1:-1]
    output = open(sys.argv[-1], "w", buffering=1)
    auth = AuthAnonymous() if "--anonymous" in options else None
    bus = await MessageBus(bus_address=os.environ["DBUS_SYSTEM_BUS_ADDRESS"], auth=auth).connect()
    # From the BecomeMonitor call on, every message but the bus driver's answers to us is taken here: a monitored
    # method call left to dbus-fast would be answered, and the bus drops a monitor that sends anything.
    monitoring = "--no-monitor" not in options

    def handler(message: Message) -> bool:
        now = time.monotonic_ns()  # first: the time of reading it, before any decoding
        if message.message_type == MessageType.SIGNAL and message.member == "PropertiesChanged":
            interface, changed, _ = message.body
            if interface == DEVICE and "Connected" in changed:
                output.write(f"{now} {message.path} connected {int(bool(changed['Connected'].value))}\n")
        elif message.message_type == MessageType.METHOD_CALL and message.interface == DEVICE:
            output.write(f"{now} {message.path} call {message.member}\n")
        mine = (
            message.message_type in (MessageType.METHOD_RETURN, MessageType.ERROR)
            and message.sender == "org.freedesktop.DBus"
            and message.destination == bus.unique_name
        )
        return monitoring and not mine

    bus.add_message_handler(handler)
    if monitoring:
        rules = [SIGNAL_RULE, *CALL_RULES]
        reply = await bus.call(driver_call("org.freedesktop.DBus.Monitoring", "BecomeMonitor", "asu", [rules, 0]))
        monitoring = reply.message_type != MessageType.ERROR
    if not monitoring:
        reply = await bus.call(driver_call("org.freedesktop.DBus", "AddMatch", "s", [SIGNAL_RULE]))
        if reply.message_type == MessageType.ERROR:
            raise SystemExit(f"AddMatch failed: {reply.body}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    print(f"READY {'monitor' if monitoring else 'signals'}", flush=True)
    await stop.wait()
    output.close()
    bus.disconnect()


asyncio.run(main())
