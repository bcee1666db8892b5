#!/usr/bin/python3 -u
"""The lab's BLE peripheral: a GATT application and LE advertisements served by bluetoothd on hci1.

Runs inside the lab guest (started by /lab/init). It exposes the same GATT layout as the BlueZ simulator's
keep-alive sensor (Sources/BlueZSimulator, SimulatedService.keepAlive and .battery), so the HIL suite can run
unchanged against either:

  4b410001-…  keep-alive service
    4b410002-…  counter  read, notify   UInt32 LE; free-running, +1 every 100 ms; while notifying every
                                        step is sent, so notifications go up by exactly 1 (no gaps); a read
                                        returns the current value
    4b410003-…  setting  read, write, write-without-response   starts as [0x01]; a write replaces it
    4b410004-…  command  write
  180f  Battery Service
    2a19  Battery Level  read, notify   87 %  (the central's battery plugin adds Battery1 to the device)

Advertising: connectable, general discoverable, the service UUID, the name "keepalive-lab" (in the scan
response: it does not fit next to a 128-bit UUID). There are two such advertisements, the second with
manufacturer data (0xFFFF: "KA" 01), each with a 1-s rotation Duration. Two, because btvirt's emulated controller
sends an advertising report only when advertising or scanning is switched on, never again while both stay on; the
kernel on hci0 drops a report that comes before its own "discovery started" bookkeeping, so a scan that starts
after the peripheral sometimes never sees it (seen: 1 run in 3 found nothing for 90 s). With several instances
the kernel on hci1 rotates them every second, switching advertising off and on, so a scanner gets a report each
second, as from a real sensor advertising at 1 Hz.

BTHome v2 (issue #36): two more instances in the same rotation carry service data 0xFCD2 and nothing else but the
flags (flags 3 + service data 15 or 23 bytes: legacy advertising's 31 fit). Both are connectable ("peripheral"):
the kernel gives a non-connectable instance a non-resolvable private address, and the central would hear the
readings from an address it does not know. Every BTHOME_PERIOD_SECONDS the packet id goes up by one and the
readings follow it, so a test can check the values it decodes against the packet id it decodes:

  battery      100 - pid % 50                        %     object 0x01, uint8
  temperature  20.00 + (pid % 20) * 0.25             °C    object 0x02, sint16 × 0.01
  humidity     40.00 + (pid % 40) * 0.5              %     object 0x03, uint16 × 0.01

  instance 2  plain      40 | 00 pid | 01 batt | 02 temp | 03 hum
  instance 3  encrypted  41 | AES-CCM(00 pid 01 batt 02 temp 03 hum) | counter (LE32) | 4-byte tag, with
              BTHOME_KEY; nonce: hci1's address (as written) D2 FC 41 counter (bthome.io/encryption); the
              counter goes up with every update. Only when python3-cryptography is there (it is in the image).

The new data reaches the controller without registering again: bluetoothd watches each registered
LEAdvertisement1 for PropertiesChanged and re-sends the instance (MGMT Add Advertising, same instance number), so
the update is a PropertiesChanged signal with the new ServiceData.

It registers again whenever it has to: when org.bluez gets a new owner (bluetoothd restarted), when hci1
appears, when hci1 is powered on again, and when bluetoothd releases an advertisement. Its own state is on the
bus as io.keepalive.Lab.Peripheral /io/keepalive/Lab/Peripheral (io.keepalive.LabPeripheral1: Registered,
Registrations, Counter, Notifying, Setting, Advertising), which labd.py turns into the lab's Ready property.

SetAdvertising(false) withdraws the advertisements and replies once bluetoothd has taken them back; labd.py
calls it before powering hci1 off. This matters with btvirt too: powering a controller off does not stop its
emulated advertising (the kernel's last LE Set Advertising Parameters fails during power-off), and hci0 would
then "connect" to the dead hci1 at once, a phantom link that never resolves services and never times out. With
the advertising gone first, a Connect to the powered-off peripheral waits and fails as it does with real radios
(org.bluez.Error.Failed "le-connection-abort-by-local" after about 41 s).
"""

import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

try:
    from cryptography.hazmat.primitives.ciphers.aead import AESCCM
except ImportError:  # the encrypted BTHome instance is left out
    AESCCM = None

ADAPTER_PATH = "/org/bluez/hci1"
APP_PATH = "/io/keepalive/lab/app"
ADVERTISEMENT_PATH = "/io/keepalive/lab/advertisement"   # + 0, 1
ROTATION_SECONDS = 1
STATUS_NAME = "io.keepalive.Lab.Peripheral"
STATUS_PATH = "/io/keepalive/Lab/Peripheral"
STATUS_INTERFACE = "io.keepalive.LabPeripheral1"
LOCAL_NAME = "keepalive-lab"
BTHOME_UUID = "fcd2"
BTHOME_PERIOD_SECONDS = 3
BTHOME_KEY = bytes.fromhex("231d39c1d7cc1ab1aee224cd096db932")

KEEPALIVE_SERVICE = "4b410001-6b65-6570-616c-697665000000"
COUNTER = "4b410002-6b65-6570-616c-697665000000"
SETTING = "4b410003-6b65-6570-616c-697665000000"
COMMAND = "4b410004-6b65-6570-616c-697665000000"
BATTERY_SERVICE = "0000180f-0000-1000-8000-00805f9b34fb"
BATTERY_LEVEL = "00002a19-0000-1000-8000-00805f9b34fb"
COUNTER_PERIOD_MS = 100
BATTERY_PERCENT = 87

PROPERTIES = "org.freedesktop.DBus.Properties"
OBJECT_MANAGER = "org.freedesktop.DBus.ObjectManager"
SERVICE_INTERFACE = "org.bluez.GattService1"
CHARACTERISTIC_INTERFACE = "org.bluez.GattCharacteristic1"
ADVERTISEMENT_INTERFACE = "org.bluez.LEAdvertisement1"


def log(message):
    with open("/proc/uptime") as uptime:
        seconds = uptime.read().split()[0]
    print(f"peripheral [{seconds}] {message}", flush=True)


def no_options():
    # Calls go out without introspection, so an empty a{sv} needs its signature spelled out.
    return dbus.Dictionary({}, signature="sv")


def byte_array(values):
    return dbus.Array([dbus.Byte(value) for value in values], signature="y")


class NotPermitted(dbus.DBusException):
    _dbus_error_name = "org.bluez.Error.NotPermitted"


class InvalidArguments(dbus.DBusException):
    _dbus_error_name = "org.freedesktop.DBus.Error.InvalidArgs"


class PropertiesObject(dbus.service.Object):
    """An exported object whose properties are a dict per interface (read-only over D-Bus)."""

    def properties(self):
        return {}

    @dbus.service.method(PROPERTIES, in_signature="ss", out_signature="v")
    def Get(self, interface, name):
        values = self.properties().get(interface, {})
        if name not in values:
            raise InvalidArguments(f"no property {name} on {interface}")
        return values[name]

    @dbus.service.method(PROPERTIES, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        return self.properties().get(interface, {})

    @dbus.service.signal(PROPERTIES, signature="sa{sv}as")
    def PropertiesChanged(self, interface, changed, invalidated):
        pass


class Service(PropertiesObject):
    def __init__(self, bus, path, uuid):
        super().__init__(bus, path)
        self.path = path
        self.uuid = uuid
        self.characteristics = []

    def properties(self):
        return {SERVICE_INTERFACE: {"UUID": self.uuid, "Primary": dbus.Boolean(True)}}


class Characteristic(PropertiesObject):
    """A GATT characteristic whose value lives in `self.value`; subclasses change what reads/writes do."""

    def __init__(self, bus, service, index, uuid, flags, value):
        self.path = f"{service.path}/char{index}"
        super().__init__(bus, self.path)
        self.service = service
        self.uuid = uuid
        self.flags = flags
        self.value = list(value)
        self.notifying = False
        service.characteristics.append(self)

    def properties(self):
        return {CHARACTERISTIC_INTERFACE: {
            "Service": dbus.ObjectPath(self.service.path),
            "UUID": self.uuid,
            "Flags": dbus.Array(self.flags, signature="s"),
            "Notifying": dbus.Boolean(self.notifying),
        }}

    def current_value(self):
        return self.value

    def notify(self, values):
        self.PropertiesChanged(CHARACTERISTIC_INTERFACE, {"Value": byte_array(values)}, [])

    @dbus.service.method(CHARACTERISTIC_INTERFACE, in_signature="a{sv}", out_signature="ay")
    def ReadValue(self, options):
        if "read" not in self.flags:
            raise NotPermitted("Read not permitted")
        offset = int(options.get("offset", 0))
        return byte_array(self.current_value()[offset:])

    @dbus.service.method(CHARACTERISTIC_INTERFACE, in_signature="aya{sv}")
    def WriteValue(self, value, options):
        kind = str(options.get("type", "request"))
        allowed = "write-without-response" if kind == "command" else "write"
        if allowed not in self.flags:
            raise NotPermitted("Write not permitted")
        offset = int(options.get("offset", 0))
        self.value = self.value[:offset] + [int(byte) for byte in value]
        self.written(kind)

    def written(self, kind):
        pass

    @dbus.service.method(CHARACTERISTIC_INTERFACE)
    def StartNotify(self):
        if "notify" not in self.flags:
            raise NotPermitted("Notify not permitted")
        if not self.notifying:
            self.notifying = True
            log(f"StartNotify {self.uuid}")
            self.notifying_changed()

    @dbus.service.method(CHARACTERISTIC_INTERFACE)
    def StopNotify(self):
        if self.notifying:
            self.notifying = False
            log(f"StopNotify {self.uuid}")
            self.notifying_changed()

    def notifying_changed(self):
        pass


class Counter(Characteristic):
    """Free-running like a real sensor's counter: a read sees the current value, notifications see every step."""

    def __init__(self, bus, service, index, status):
        super().__init__(bus, service, index, COUNTER, ["read", "notify"], [0, 0, 0, 0])
        self.count = 0
        self.status = status
        GLib.timeout_add(COUNTER_PERIOD_MS, self.step)

    def current_value(self):
        return list((self.count & 0xFFFFFFFF).to_bytes(4, "little"))

    def step(self):
        self.count += 1
        if self.notifying:
            self.notify(self.current_value())
        return True

    def notifying_changed(self):
        self.status.changed()


class Setting(Characteristic):
    def __init__(self, bus, service, index, status):
        super().__init__(bus, service, index, SETTING, ["read", "write", "write-without-response"], [0x01])
        self.status = status

    def written(self, kind):
        log(f"setting written ({kind}): {bytes(self.value).hex()}")
        self.status.changed()


class Command(Characteristic):
    def __init__(self, bus, service, index):
        super().__init__(bus, service, index, COMMAND, ["write"], [])

    def written(self, kind):
        log(f"command written ({kind}): {bytes(self.value).hex()}")


class Application(dbus.service.Object):
    """The object tree bluetoothd reads with GetManagedObjects after RegisterApplication."""

    def __init__(self, bus, status):
        super().__init__(bus, APP_PATH)
        keepalive = Service(bus, f"{APP_PATH}/service0", KEEPALIVE_SERVICE)
        battery = Service(bus, f"{APP_PATH}/service1", BATTERY_SERVICE)
        self.counter = Counter(bus, keepalive, 0, status)
        self.setting = Setting(bus, keepalive, 1, status)
        Command(bus, keepalive, 2)
        Characteristic(bus, battery, 0, BATTERY_LEVEL, ["read", "notify"], [BATTERY_PERCENT])
        self.services = [keepalive, battery]

    @dbus.service.method(OBJECT_MANAGER, out_signature="a{oa{sa{sv}}}")
    def GetManagedObjects(self):
        objects = {}
        for service in self.services:
            objects[dbus.ObjectPath(service.path)] = service.properties()
            for characteristic in service.characteristics:
                objects[dbus.ObjectPath(characteristic.path)] = characteristic.properties()
        return objects


class Advertisement(PropertiesObject):
    """One advertising instance. The first two carry the service UUID and the name; the second adds manufacturer
    data (company 0xFFFF, "KA" and the sensor number), as the simulator's sensors do. BTHome instances are
    BTHomeAdvertisement."""

    def __init__(self, bus, index, on_release):
        self.path = f"{ADVERTISEMENT_PATH}{index}"
        super().__init__(bus, self.path)
        self.index = index
        self.on_release = on_release

    def properties(self):
        properties = {
            "Type": "peripheral",
            "ServiceUUIDs": dbus.Array([KEEPALIVE_SERVICE], signature="s"),
            "LocalName": LOCAL_NAME,
            "Discoverable": dbus.Boolean(True),
            "Duration": dbus.UInt16(ROTATION_SECONDS),
        }
        if self.index == 1:
            properties["ManufacturerData"] = dbus.Dictionary(
                {dbus.UInt16(0xFFFF): byte_array([0x4B, 0x41, 0x01])}, signature="qv")
        return {ADVERTISEMENT_INTERFACE: properties}

    @dbus.service.method(ADVERTISEMENT_INTERFACE)
    def Release(self):
        log(f"advertisement {self.index} released by bluetoothd")
        self.on_release(self.path)


class BTHome:
    """The readings of the BTHome instances: one packet id, readings derived from it (see the module's doc)."""

    def __init__(self):
        self.packet_id = 0
        self.counter = 0              # encryption counter, +1 per update
        self.address = None           # hci1's address (AA:BB:…), part of the nonce; read from bluetoothd
        self.advertisements = []

    def objects(self):
        pid = self.packet_id & 0xFF
        battery = 100 - pid % 50
        temperature = 2000 + (pid % 20) * 25       # 0.01 °C
        humidity = 4000 + (pid % 40) * 50          # 0.01 %
        return (bytes([0x00, pid, 0x01, battery, 0x02]) + temperature.to_bytes(2, "little", signed=True)
                + bytes([0x03]) + humidity.to_bytes(2, "little"))

    def plain(self):
        return bytes([0x40]) + self.objects()

    def encrypted(self):
        if AESCCM is None or not self.address:
            return None
        information = 0x41
        counter = self.counter.to_bytes(4, "little")
        nonce = bytes.fromhex(self.address.replace(":", "")) + bytes([0xD2, 0xFC, information]) + counter
        sealed = AESCCM(BTHOME_KEY, tag_length=4).encrypt(nonce, self.objects(), None)
        return bytes([information]) + sealed[:-4] + counter + sealed[-4:]

    def step(self):
        self.packet_id = (self.packet_id + 1) & 0xFF
        self.counter = (self.counter + 1) & 0xFFFFFFFF
        for advertisement in self.advertisements:
            advertisement.changed()
        return True


class BTHomeAdvertisement(Advertisement):
    """A BTHome v2 instance: flags and service data 0xFCD2 only, plain or encrypted."""

    def __init__(self, bus, index, on_release, bthome, encrypted):
        super().__init__(bus, index, on_release)
        self.bthome = bthome
        self.encrypted = encrypted
        bthome.advertisements.append(self)

    def data(self):
        return self.bthome.encrypted() if self.encrypted else self.bthome.plain()

    def properties(self):
        data = self.data() or self.bthome.plain()
        return {ADVERTISEMENT_INTERFACE: {
            "Type": "peripheral",
            "ServiceData": dbus.Dictionary({BTHOME_UUID: byte_array(data)}, signature="sv"),
            "Discoverable": dbus.Boolean(True),
            "Duration": dbus.UInt16(ROTATION_SECONDS),
        }}

    def changed(self):
        # bluetoothd's proxy of a registered advertisement re-sends the instance on this signal.
        self.PropertiesChanged(ADVERTISEMENT_INTERFACE, self.properties()[ADVERTISEMENT_INTERFACE], [])


class Status(PropertiesObject):
    """The peripheral's state for labd.py (and for a curious host)."""

    def __init__(self, bus, peripheral):
        super().__init__(bus, STATUS_PATH)
        self.peripheral = peripheral

    def properties(self):
        peripheral = self.peripheral
        application = peripheral.application
        return {STATUS_INTERFACE: {
            "Registered": dbus.Boolean(peripheral.registered()),
            "Registrations": dbus.UInt32(peripheral.registrations),
            "Counter": dbus.UInt32(application.counter.count & 0xFFFFFFFF) if application else dbus.UInt32(0),
            "Notifying": dbus.Boolean(application.counter.notifying if application else False),
            "Setting": byte_array(application.setting.value if application else []),
            "Advertising": dbus.Boolean(peripheral.advertise),
        }}

    @dbus.service.method(STATUS_INTERFACE, in_signature="b", async_callbacks=("reply", "error"))
    def SetAdvertising(self, on, reply, error):
        self.peripheral.set_advertising(bool(on), reply)

    def changed(self):
        self.PropertiesChanged(STATUS_INTERFACE, self.properties()[STATUS_INTERFACE], [])


class Peripheral:
    """Keeps the application and the advertisements registered with whichever bluetoothd owns org.bluez."""

    def __init__(self, bus):
        self.bus = bus
        self.application = None
        self.status = Status(bus, self)
        self.application = Application(bus, self.status)
        self.advertisements = [Advertisement(bus, index, self.advertisement_released) for index in range(2)]
        self.bthome = BTHome()
        self.advertisements.append(BTHomeAdvertisement(bus, 2, self.advertisement_released, self.bthome, False))
        if AESCCM is not None:
            self.advertisements.append(BTHomeAdvertisement(bus, 3, self.advertisement_released, self.bthome, True))
        GLib.timeout_add_seconds(BTHOME_PERIOD_SECONDS, self.bthome.step)
        self.owner = None            # org.bluez's unique name, None while bluetoothd is gone
        self.powered = None          # hci1 Powered as last seen, None while unknown
        self.app_registered = False
        self.adv_registered = set()  # paths of the advertisements bluetoothd has
        self.pending = set()         # calls in flight: "app", "powered", or an advertisement's path
        self.registrations = 0
        self.advertise = True        # SetAdvertising; off while labd has the peripheral "unplugged"
        self.withdrawn = []          # SetAdvertising(false) replies waiting for the unregistrations
        self.last_reported = None

        bus.add_signal_receiver(self.name_owner_changed, "NameOwnerChanged", "org.freedesktop.DBus",
                                "org.freedesktop.DBus", "/org/freedesktop/DBus", arg0="org.bluez")
        bus.add_signal_receiver(self.adapter_changed, "PropertiesChanged", PROPERTIES, "org.bluez", ADAPTER_PATH)
        bus.add_signal_receiver(self.interfaces_added, "InterfacesAdded", OBJECT_MANAGER, "org.bluez", "/")
        try:
            owner = bus.get_name_owner("org.bluez")
        except dbus.DBusException:
            owner = None
        self.set_owner(owner)
        # Signals cover every change; the poll only retries what failed (e.g. hci1 not there yet).
        GLib.timeout_add(1000, self.retry)

    def registered(self):
        return self.app_registered and len(self.adv_registered) == len(self.advertisements)

    def report(self):
        state = (self.owner, self.powered, self.app_registered, len(self.adv_registered))
        if state != self.last_reported:
            self.last_reported = state
            log(f"org.bluez={self.owner} hci1.Powered={self.powered} application={self.app_registered} "
                f"advertisements={len(self.adv_registered)}/{len(self.advertisements)}")
            self.status.changed()

    # --- what bluetoothd says ----------------------------------------------------------------------------------

    def set_owner(self, owner):
        owner = owner or None
        if owner != self.owner:
            # A new bluetoothd knows nothing of us; calls in flight to the old one will fail and are dropped.
            self.owner = owner
            self.powered = None
            self.app_registered = False
            self.adv_registered.clear()
            self.pending.clear()
        self.reconcile()

    def name_owner_changed(self, name, old, new):
        self.set_owner(str(new))

    def interfaces_added(self, path, interfaces):
        if str(path) == ADAPTER_PATH and "org.bluez.Adapter1" in interfaces:
            self.bthome.address = str(interfaces["org.bluez.Adapter1"].get("Address", "")) or self.bthome.address
            self.set_powered(bool(interfaces["org.bluez.Adapter1"].get("Powered", False)))

    def adapter_changed(self, interface, changed, invalidated):
        if interface == "org.bluez.Adapter1" and "Powered" in changed:
            self.set_powered(bool(changed["Powered"]))

    def set_powered(self, powered):
        was = self.powered
        self.powered = powered
        if not powered:
            # Off means not advertising. bluetoothd may keep the registrations, so they are dropped and made
            # anew on power-on: the advertisements then surely go back to the controller.
            self.adv_registered.clear()
        elif was is False:
            for advertisement in self.advertisements:
                self.unregister(advertisement)
        self.reconcile()

    def advertisement_released(self, path):
        self.adv_registered.discard(path)
        self.reconcile()

    def retry(self):
        if self.owner and not self.registered():
            self.reconcile()
        return True

    # --- SetAdvertising ------------------------------------------------------------------------------------------

    def set_advertising(self, on, reply):
        log(f"SetAdvertising({on})")
        self.advertise = on
        if on:
            reply()
        else:
            self.withdrawn.append(reply)
        self.reconcile()

    def withdraw(self):
        """Unregisters the advertisements; once none is left, answers the SetAdvertising(false) calls."""
        if not self.owner:
            self.adv_registered.clear()
        for advertisement in self.advertisements:
            if advertisement.path in self.adv_registered and advertisement.path not in self.pending:
                self.unregister(advertisement)
        if self.adv_registered or any(advertisement.path in self.pending for advertisement in self.advertisements):
            return
        replies, self.withdrawn = self.withdrawn, []
        for reply in replies:
            reply()

    # --- calls to bluetoothd -------------------------------------------------------------------------------------

    def call(self, tag, method, *args, reply=None, error=None, **keywords):
        """An asynchronous call to bluetoothd: blocking would deadlock, bluetoothd calls back into us."""
        owner = self.owner
        self.pending.add(tag)

        def done(*result):
            if owner == self.owner:
                self.pending.discard(tag)
                if reply:
                    reply(*result)
                self.reconcile()

        def failed(failure):
            if owner == self.owner:
                self.pending.discard(tag)
                if error:
                    error(failure)
                self.reconcile()

        try:
            method(*args, reply_handler=done, error_handler=failed, timeout=30, **keywords)
        except (dbus.DBusException, TypeError, ValueError) as failure:
            # Nothing went out: say so, and let the retry poll try again.
            self.pending.discard(tag)
            log(f"calling {tag} failed at once: {failure}")

    def adapter(self):
        return self.bus.get_object(self.owner, ADAPTER_PATH, introspect=False)

    def reconcile(self):
        self.report()
        if not self.owner:
            if not self.advertise:
                self.withdraw()
            return
        if self.powered is None:
            if "powered" not in self.pending:
                # GetAll: Powered, and the Address that goes into the encrypted BTHome instance's nonce.
                self.call("powered", self.adapter().GetAll, "org.bluez.Adapter1",
                          dbus_interface=PROPERTIES, reply=self.adapter_read, error=self.adapter_missing)
            return
        if not self.app_registered and "app" not in self.pending:
            # A GATT application can be registered on an adapter that is off; it is served once it is on.
            self.call("app", self.adapter().RegisterApplication, dbus.ObjectPath(APP_PATH), no_options(),
                      dbus_interface="org.bluez.GattManager1", reply=self.application_registered,
                      error=lambda failure: self.register_failed("application", failure, self.application_registered))
        if not self.advertise:
            self.withdraw()
            return
        if not self.powered:
            return
        for advertisement in self.advertisements:
            if advertisement.path in self.adv_registered or advertisement.path in self.pending:
                continue
            registered = (lambda path: lambda: self.advertisement_registered(path))(advertisement.path)
            self.call(advertisement.path, self.adapter().RegisterAdvertisement, dbus.ObjectPath(advertisement.path),
                      no_options(), dbus_interface="org.bluez.LEAdvertisingManager1", reply=registered,
                      error=lambda failure, registered=registered: self.register_failed(
                          "advertisement", failure, registered))

    def adapter_read(self, properties):
        self.bthome.address = str(properties.get("Address", "")) or self.bthome.address
        self.powered = bool(properties.get("Powered", False))

    def adapter_missing(self, failure):
        # hci1 not there yet (bluetoothd still starting): InterfacesAdded or the retry poll brings it back.
        log(f"hci1 not available yet: {failure.get_dbus_name()}: {failure.get_dbus_message()}")

    def application_registered(self):
        self.app_registered = True
        self.registrations += 1
        log("application registered")

    def advertisement_registered(self, path):
        self.adv_registered.add(path)
        self.registrations += 1
        log(f"advertisement {path[-1]} registered")

    def register_failed(self, what, failure, registered):
        name = failure.get_dbus_name()
        if name == "org.bluez.Error.AlreadyExists":
            # bluetoothd still has it (e.g. across a power cycle): it counts as registered.
            registered()
            return
        log(f"registering the {what} failed: {name}: {failure.get_dbus_message()}")

    def unregister(self, advertisement):
        if not self.owner:
            return

        def done(*_):
            self.adv_registered.discard(advertisement.path)

        # DoesNotExist (bluetoothd dropped it already) counts as done too.
        self.call(advertisement.path, self.adapter().UnregisterAdvertisement, dbus.ObjectPath(advertisement.path),
                  dbus_interface="org.bluez.LEAdvertisingManager1", reply=done, error=done)


def main():
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    Peripheral(bus)
    # Taken last, so that whoever sees the name can read a complete status object.
    name = dbus.service.BusName(STATUS_NAME, bus, do_not_queue=True)
    log(f"serving {LOCAL_NAME} on {ADAPTER_PATH} (status: {name.get_name()} {STATUS_PATH})")
    GLib.MainLoop().run()


if __name__ == "__main__":
    sys.exit(main())
