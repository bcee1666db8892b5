#!/usr/bin/python3 -u
"""io.keepalive.Lab: the lab guest's control service, reached from the host with Tests/Lab/labctl.

Runs inside the lab guest (started by /lab/init) on the system bus, as io.keepalive.Lab /io/keepalive/Lab,
interface io.keepalive.Lab1:

  PowerPeripheral(b on)   hci1 off or on, as a peripheral losing power: first the peripheral withdraws its
                          advertisement (see peripheral.py: btvirt keeps advertising for a powered-off
                          controller otherwise), then hci1 goes off through bluetoothd (Adapter1.Powered); the
                          kernel ends hci1's links (HCI reason 0x15, "power off"), so hci0's link drops at once.
                          Returns once hci1's Powered is what was asked and, for on, the peripheral is
                          advertising again (Ready).
  RestartBluetoothd()     SIGTERM, wait for the exit, start it again; returns when the lab is Ready again.
  CrashBluetoothd()       the same with SIGKILL: no InterfacesRemoved, no clean power-off.
  ReadLog(s name) -> s    a file of /run/lab: with lab.debug=1, btmon.log (every HCI packet) and
                          bluetoothd-N.log (bluetoothd -d, one per start)
  properties              Ready (b): bluetoothd is up, hci0 is powered, hci1 is powered and the peripheral's
                          application and advertisement are registered. CentralAddress, PeripheralAddress
                          (s: hci0's and hci1's Adapter1.Address), PeripheralPowered (b, what was asked),
                          BluetoothdPid (u), BluetoothdStarts (u). PropertiesChanged is emitted for each change.

labd owns bluetoothd (it is its child): it starts it, powers hci0 and hci1 (main.conf has AutoEnable=false)
once after every start, as AutoEnable would on a real machine (hci1 only if the test has not "unplugged" the
peripheral; a test that powers hci0 off itself keeps it off), and starts it again if it dies on its own. It also names hci1 "keepalive-lab" (Adapter1.Alias): that is the GAP Device Name a central reads after
connecting, which bluetoothd then puts in Device1.Name in place of the advertised name; a real sensor
advertises the same name it serves. The console gets "KEEPALIVE-LAB READY …" the first time the lab is ready, and a line on every change.
"""

import os
import signal
import subprocess
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

BLUETOOTHD = "/usr/libexec/bluetooth/bluetoothd"
NAME = "io.keepalive.Lab"
PATH = "/io/keepalive/Lab"
INTERFACE = "io.keepalive.Lab1"
PERIPHERAL_NAME = "io.keepalive.Lab.Peripheral"
PERIPHERAL_PATH = "/io/keepalive/Lab/Peripheral"
PERIPHERAL_INTERFACE = "io.keepalive.LabPeripheral1"
PROPERTIES = "org.freedesktop.DBus.Properties"
OBJECT_MANAGER = "org.freedesktop.DBus.ObjectManager"
ADAPTER = "org.bluez.Adapter1"
CENTRAL = "/org/bluez/hci0"
PERIPHERAL = "/org/bluez/hci1"
PERIPHERAL_ALIAS = "keepalive-lab"
SETTLE_SECONDS = 30  # how long a control method waits for the lab to settle before it fails


def uptime():
    with open("/proc/uptime") as file:
        return file.read().split()[0]


def log(message):
    print(f"labd [{uptime()}] {message}", flush=True)


class LabError(dbus.DBusException):
    _dbus_error_name = "io.keepalive.Lab.Error.Failed"


class Lab(dbus.service.Object):
    def __init__(self, bus):
        super().__init__(bus, PATH)
        self.bus = bus
        self.debug = "lab.debug=1" in open("/proc/cmdline").read().split()
        self.process = None
        self.starts = 0
        self.stopping = False          # an exit we caused: start again without complaint
        self.hold_seconds = 0          # StopBluetoothd: how long the next expected exit stays stopped
        self.owner = None               # org.bluez's unique name
        self.adapters = {}              # path → {"Powered": bool, "Address": str, "Alias": str}
        self.peripheral_registered = False
        self.peripheral_on = True       # what PowerPeripheral last asked for
        self.powering = set()           # (adapter path, property) with a Set in flight
        self.intents = {}               # (adapter path, property) → value still to set
        self.waiters = []               # (predicate, reply, error, timeout source id)
        self.announced = False
        self.last = None

        bus.add_signal_receiver(self.name_owner_changed, "NameOwnerChanged", "org.freedesktop.DBus",
                                "org.freedesktop.DBus", "/org/freedesktop/DBus")
        bus.add_signal_receiver(self.interfaces_added, "InterfacesAdded", OBJECT_MANAGER, "org.bluez", "/")
        bus.add_signal_receiver(self.interfaces_removed, "InterfacesRemoved", OBJECT_MANAGER, "org.bluez", "/")
        bus.add_signal_receiver(self.bluez_properties_changed, "PropertiesChanged", PROPERTIES, "org.bluez",
                                path_keyword="path")
        bus.add_signal_receiver(self.peripheral_changed, "PropertiesChanged", PROPERTIES, PERIPHERAL_NAME,
                                PERIPHERAL_PATH)
        self.start_bluetoothd()
        self.refresh_peripheral()
        # Signals drive everything; this poll repairs what a lost race or a failed call left behind.
        GLib.timeout_add(1000, self.poll)

    # --- bluetoothd ---------------------------------------------------------------------------------------

    def start_bluetoothd(self):
        arguments = [BLUETOOTHD, "-n"] + (["-d"] if self.debug else [])
        # Debug output is large: to a file (ReadLog), so the serial console does not slow the guest down.
        output = open(f"/run/lab/bluetoothd-{self.starts + 1}.log", "wb") if self.debug else None
        self.process = subprocess.Popen(arguments, stdout=output, stderr=output)
        if output:
            output.close()
        self.starts += 1
        log(f"bluetoothd started (pid {self.process.pid}, start {self.starts})")
        GLib.child_watch_add(GLib.PRIORITY_DEFAULT, self.process.pid, self.bluetoothd_exited)
        self.changed()

    def bluetoothd_exited(self, pid, status):
        if self.process is None or pid != self.process.pid:
            return
        expected = self.stopping
        self.stopping = False
        self.process = None
        log(f"bluetoothd (pid {pid}) exited with wait status {status}{'' if expected else ', unexpectedly'}")
        # Stopped on purpose for a while (StopBluetoothd): started again when that is over.
        if expected and self.hold_seconds:
            seconds, self.hold_seconds = self.hold_seconds, 0
            log(f"bluetoothd stays stopped for {seconds} s")
            GLib.timeout_add_seconds(seconds, self.start_after_exit)
            self.changed()
            return
        # Unexpected exits are started again too, a little later, like systemd's Restart=on-failure.
        GLib.timeout_add(10 if expected else 1000, self.start_after_exit)

    def start_after_exit(self):
        if self.process is None:
            self.start_bluetoothd()
        return False

    def stop_bluetoothd(self, signal_number):
        if self.process is None:
            return
        self.stopping = True
        pid = self.process.pid
        log(f"sending signal {signal_number} to bluetoothd (pid {pid})")
        os.kill(pid, signal_number)
        if signal_number != signal.SIGKILL:
            # A bluetoothd that ignores SIGTERM for 10 s is killed.
            def escalate():
                if self.process is not None and self.process.pid == pid:
                    log("bluetoothd ignored SIGTERM for 10 s: SIGKILL")
                    os.kill(pid, signal.SIGKILL)
                return False
            GLib.timeout_add_seconds(10, escalate)

    # --- what bluetoothd and the peripheral say -------------------------------------------------------------

    def name_owner_changed(self, name, old, new):
        if name == "org.bluez":
            self.owner = str(new) or None
            self.adapters = {}
            self.powering.clear()
            log(f"org.bluez owner: {self.owner}")
            if self.owner:
                # What systemd and AutoEnable=true would do on a real machine, and the peripheral's power
                # as the test last set it.
                self.intents = {(CENTRAL, "Powered"): dbus.Boolean(True, variant_level=1),
                                (PERIPHERAL, "Alias"): dbus.String(PERIPHERAL_ALIAS, variant_level=1),
                                (PERIPHERAL, "Powered"): dbus.Boolean(self.peripheral_on, variant_level=1)}
                self.refresh_adapters()
            self.changed()
        elif name == PERIPHERAL_NAME:
            self.refresh_peripheral()

    def refresh_adapters(self):
        manager = self.bus.get_object(self.owner, "/", introspect=False)
        manager.GetManagedObjects(dbus_interface=OBJECT_MANAGER, timeout=10,
                                  reply_handler=self.managed_objects, error_handler=lambda error: None)

    def managed_objects(self, objects):
        for path, interfaces in objects.items():
            self.interfaces_added(path, interfaces)

    def interfaces_added(self, path, interfaces):
        if ADAPTER in interfaces:
            properties = interfaces[ADAPTER]
            self.adapters[str(path)] = {"Powered": bool(properties.get("Powered", False)),
                                        "Address": str(properties.get("Address", "")),
                                        "Alias": str(properties.get("Alias", ""))}
            self.changed()

    def interfaces_removed(self, path, interfaces):
        if ADAPTER in interfaces:
            self.adapters.pop(str(path), None)
            self.changed()

    def bluez_properties_changed(self, interface, changed, invalidated, path=None):
        if interface == ADAPTER and path in self.adapters:
            for key in ("Powered", "Address", "Alias"):
                if key in changed:
                    value = changed[key]
                    self.adapters[path][key] = bool(value) if key == "Powered" else str(value)
            self.changed()

    def refresh_peripheral(self):
        def read(properties):
            self.peripheral_registered = bool(properties.get("Registered", False))
            self.changed()

        def missing(error):
            self.peripheral_registered = False
            self.changed()

        self.bus.call_async(PERIPHERAL_NAME, PERIPHERAL_PATH, PROPERTIES, "GetAll", "s", (PERIPHERAL_INTERFACE,),
                            read, missing, timeout=10)

    def peripheral_changed(self, interface, changed, invalidated):
        if "Registered" in changed:
            self.peripheral_registered = bool(changed["Registered"])
            self.changed()

    def poll(self):
        if self.owner and len(self.adapters) < 2:
            self.refresh_adapters()
        if not self.peripheral_registered:
            self.refresh_peripheral()
        self.reconcile_adapters()
        return True

    # --- keeping the adapters as asked ------------------------------------------------------------------------

    def want(self, path, key, value):
        """Asks for an adapter property once: it is set until it holds, then left alone, so that a test may
        power hci0 off itself (as on a real machine, nothing turns it back on until bluetoothd starts again)."""
        self.intents[(path, key)] = value
        self.reconcile_adapters()

    def reconcile_adapters(self):
        if not self.owner:
            return
        for (path, key), value in list(self.intents.items()):
            adapter = self.adapters.get(path)
            tag = (path, key)
            if adapter is None or tag in self.powering:
                continue
            if adapter[key] == value:
                del self.intents[tag]
                continue
            self.powering.add(tag)
            log(f"setting {path[-4:]} {key} to {value}")

            def done(tag=tag, value=value):
                # The Set succeeded, so that is the value now; its PropertiesChanged may come later, and
                # meanwhile the same Set must not go out again.
                self.powering.discard(tag)
                if tag[0] in self.adapters:
                    self.adapters[tag[0]][tag[1]] = bool(value) if tag[1] == "Powered" else str(value)
                self.changed()

            def failed(error, tag=tag):
                self.powering.discard(tag)
                log(f"setting {tag[0][-4:]} {tag[1]} failed: {error.get_dbus_name()}: "
                    f"{error.get_dbus_message().strip()}")

            proxy = self.bus.get_object(self.owner, path, introspect=False)
            proxy.Set(ADAPTER, key, value, dbus_interface=PROPERTIES, timeout=20,
                      reply_handler=done, error_handler=failed)

    # --- state ---------------------------------------------------------------------------------------------------

    def powered(self, path):
        return self.adapters.get(path, {}).get("Powered", False)

    def ready(self):
        return bool(self.owner and self.powered(CENTRAL) and self.powered(PERIPHERAL)
                    and self.adapters[PERIPHERAL].get("Alias") == PERIPHERAL_ALIAS and self.peripheral_registered)

    def properties(self):
        return {
            "Ready": dbus.Boolean(self.ready()),
            "CentralAddress": self.adapters.get(CENTRAL, {}).get("Address", ""),
            "PeripheralAddress": self.adapters.get(PERIPHERAL, {}).get("Address", ""),
            "PeripheralPowered": dbus.Boolean(self.peripheral_on),
            "BluetoothdPid": dbus.UInt32(self.process.pid if self.process else 0),
            "BluetoothdStarts": dbus.UInt32(self.starts),
        }

    def changed(self):
        self.reconcile_adapters()
        properties = self.properties()
        if properties != self.last:
            changed = {key: value for key, value in properties.items()
                       if self.last is None or self.last.get(key) != value}
            self.last = properties
            self.PropertiesChanged(INTERFACE, changed, [])
            if "Ready" in changed:
                log(f"Ready={bool(properties['Ready'])} (org.bluez={self.owner}, hci0 on={self.powered(CENTRAL)}, "
                    f"hci1 on={self.powered(PERIPHERAL)}, peripheral registered={self.peripheral_registered})")
        if self.ready() and not self.announced:
            self.announced = True
            print(f"KEEPALIVE-LAB READY central={properties['CentralAddress']} "
                  f"peripheral={properties['PeripheralAddress']} uptime={uptime()}", flush=True)
        for waiter in list(self.waiters):
            predicate, reply, _, source = waiter
            if predicate():
                self.waiters.remove(waiter)
                GLib.source_remove(source)
                reply()

    def wait_until(self, predicate, what, reply, error):
        """Replies to a method call once `predicate` holds, or fails it after SETTLE_SECONDS."""
        def expire():
            for waiter in list(self.waiters):
                if waiter[3] == source:
                    self.waiters.remove(waiter)
                    error(LabError(f"the lab did not settle within {SETTLE_SECONDS} s: {what}"))
            return False

        source = GLib.timeout_add_seconds(SETTLE_SECONDS, expire)
        self.waiters.append((predicate, reply, error, source))
        self.changed()

    # --- D-Bus interface ---------------------------------------------------------------------------------------

    @dbus.service.method(INTERFACE, in_signature="b", async_callbacks=("reply", "error"))
    def PowerPeripheral(self, on, reply, error):
        on = bool(on)
        log(f"PowerPeripheral({on})")

        def advertising_set():
            if not on:
                self.peripheral_on = False
                self.want(PERIPHERAL, "Powered", dbus.Boolean(False, variant_level=1))
                self.wait_until(lambda: self.owner is not None and PERIPHERAL in self.adapters
                                and not self.powered(PERIPHERAL), "hci1 off", reply, error)

        def advertising_failed(failure):
            error(LabError(f"the peripheral did not answer SetAdvertising({on}): {failure.get_dbus_message()}"))

        if on:
            self.peripheral_on = True
            self.want(PERIPHERAL, "Powered", dbus.Boolean(True, variant_level=1))
            self.wait_until(self.ready, "hci1 on and the peripheral registered", reply, error)
        # Off: the advertisement goes before the power (see the module's documentation).
        self.bus.call_async(PERIPHERAL_NAME, PERIPHERAL_PATH, PERIPHERAL_INTERFACE, "SetAdvertising", "b", (on,),
                            advertising_set, advertising_failed, timeout=SETTLE_SECONDS)

    @dbus.service.method(INTERFACE, async_callbacks=("reply", "error"))
    def RestartBluetoothd(self, reply, error):
        log("RestartBluetoothd()")
        self.restart(signal.SIGTERM, reply, error)

    @dbus.service.method(INTERFACE, in_signature="u", async_callbacks=("reply", "error"))
    def StopBluetoothd(self, seconds, reply, error):
        """`systemctl stop bluetooth` for `seconds`, then started again; returns once org.bluez has left the bus."""
        log(f"StopBluetoothd({seconds})")
        self.hold_seconds = int(seconds)
        self.stop_bluetoothd(signal.SIGTERM)
        self.wait_until(lambda: self.process is None and not self.owner, "bluetoothd stopped", reply, error)

    @dbus.service.method(INTERFACE, async_callbacks=("reply", "error"))
    def CrashBluetoothd(self, reply, error):
        log("CrashBluetoothd()")
        self.restart(signal.SIGKILL, reply, error)

    def restart(self, signal_number, reply, error):
        starts = self.starts
        self.stop_bluetoothd(signal_number)

        def settled():
            if self.starts == starts or not self.owner or not self.powered(CENTRAL):
                return False
            return self.ready() if self.peripheral_on else True

        self.wait_until(settled, "bluetoothd back, adapters powered, peripheral registered", reply, error)

    @dbus.service.method(INTERFACE, in_signature="s", out_signature="s")
    def ReadLog(self, name):
        """A log file of /run/lab (btmon.log, bluetoothd-N.log with lab.debug=1), for debugging from the host."""
        if not name or "/" in name or name.startswith("."):
            raise LabError(f"not a log name: {name!r}")
        try:
            with open(f"/run/lab/{name}", "rb") as file:
                return file.read().decode("utf-8", "replace")
        except OSError as failure:
            raise LabError(f"{name}: {failure.strerror}")

    @dbus.service.method(PROPERTIES, in_signature="ss", out_signature="v")
    def Get(self, interface, name):
        properties = self.properties()
        if interface != INTERFACE or name not in properties:
            raise dbus.DBusException(f"no property {interface}.{name}",
                                     name="org.freedesktop.DBus.Error.InvalidArgs")
        return properties[name]

    @dbus.service.method(PROPERTIES, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        return self.properties() if interface == INTERFACE else {}

    @dbus.service.signal(PROPERTIES, signature="sa{sv}as")
    def PropertiesChanged(self, interface, changed, invalidated):
        pass


def main():
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    lab = Lab(bus)
    name = dbus.service.BusName(NAME, bus, do_not_queue=True)
    log(f"serving {name.get_name()} {PATH}")

    def terminate(*_):
        lab.stop_bluetoothd(signal.SIGTERM)
        sys.exit(0)

    signal.signal(signal.SIGTERM, terminate)
    GLib.MainLoop().run()


if __name__ == "__main__":
    sys.exit(main())
