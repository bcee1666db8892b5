#!/usr/bin/env python3
"""Decode cost per advertisement in the Python decoders (issue #36), beside Benchmarks/AdvertsBenchmark.

    advert_peer.py [--quick] [--vectors PATH] [--iterations N] [--runs R]

Run in the venv `Benchmarks/run.py --sections adverts` makes (pinned versions: PEER_PACKAGES in run.py). Reads
the same vectors as the Swift side (Benchmarks/advert_vectors.tsv) and decodes each with two peers:

- **ha**: the libraries Home Assistant's integrations use, through their parser API, as HA calls them for each
  advertisement: bthome-ble (`BTHomeBluetoothDeviceData(bindkey).update(BluetoothServiceInfoBleak)`), xiaomi-ble
  (`XiaomiBluetoothDeviceData(bindkey).update(BluetoothServiceInfo)`), ruuvitag-ble
  (`RuuvitagBluetoothDeviceData().update(BluetoothServiceInfo)`). None of them decodes pvvx's or ATC1441's
  custom format (HA reads those firmwares through BTHome), so those rows have no ha figure.
- **bleparser**: the parser of the ble_monitor custom integration (`BleParser(aeskeys=…).parse_advertisement`),
  which decodes all six formats, pvvx and ATC1441 included.

Per format and peer: one data object per device (made once, as HA makes one per device), one service info made
once (as the Swift side makes its byte array once); one warm-up run, then R runs of N calls of `update` (or
`parse_advertisement`) timed with the thread's CPU clock (`time.thread_time_ns`); the median run ÷ N.
Every result is checked: a call that yields no values ends the run with status 1.

Replay and duplicate checks: the same advertisement is decoded again and again with its counter. bthome-ble
accepts an equal counter and decrypts every time (its "same as last" skip needs the advertisements more than 4 s
apart: the service info's `time` is fixed); the plain BTHome vector carries no packet id, so bthome-ble's
packet-id filter never skips. xiaomi-ble keeps no counter and decrypts every time. bleparser runs with
`filter_duplicates=False` (its default), so it parses repeats in full.

Prints one line per format and peer:

    advert peer=ha name=bthome_encrypted ns=25312.0 min=… max=… runs=7 iterations=20000 values=2
"""
import argparse
import logging
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVICE_UUID = "0000{:04x}-0000-1000-8000-00805f9b34fb"


def load_vectors(path):
    vectors = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            name, source, payload, address, key, *_ = line.split("\t")
            kind, number = source.split(":")
            vectors.append({
                "name": name, "kind": kind, "number": int(number, 16), "payload": bytes.fromhex(payload.replace(" ", "")),
                "address": address, "key": None if key == "-" else bytes.fromhex(key),
            })
    return vectors


# ---------------------------------------------------------------------------------------------------------
# Home Assistant's libraries


def ha_decoder(vector):
    """(call, count_values) for `vector`, or None when no HA library decodes its format."""
    from habluetooth import BluetoothServiceInfo, BluetoothServiceInfoBleak
    from bleak.backends.device import BLEDevice

    name = vector["name"]
    address = vector["address"]
    service_data, manufacturer_data = {}, {}
    if vector["kind"] == "company":
        manufacturer_data[vector["number"]] = vector["payload"]
    else:
        service_data[SERVICE_UUID.format(vector["number"])] = vector["payload"]
    uuids = list(service_data)
    if name.startswith("bthome"):
        from bthome_ble import BTHomeBluetoothDeviceData
        data = BTHomeBluetoothDeviceData(bindkey=vector["key"])
        info = BluetoothServiceInfoBleak(
            name="ATC_8D18B2", address=address, rssi=-60, manufacturer_data=manufacturer_data,
            service_data=service_data, service_uuids=uuids, source="local",
            device=BLEDevice(address, None, None), advertisement=None, connectable=False, time=time.monotonic(),
            tx_power=None)
    elif name.startswith("mibeacon"):
        from xiaomi_ble import XiaomiBluetoothDeviceData
        data = XiaomiBluetoothDeviceData(bindkey=vector["key"])
        info = BluetoothServiceInfo(name="LYWSD03MMC", address=address, rssi=-60, manufacturer_data=manufacturer_data,
                                    service_data=service_data, service_uuids=uuids, source="local")
    elif name.startswith("ruuvi"):
        from ruuvitag_ble import RuuvitagBluetoothDeviceData
        data = RuuvitagBluetoothDeviceData()
        info = BluetoothServiceInfo(name="Ruuvi 884F", address=address, rssi=-60, manufacturer_data=manufacturer_data,
                                    service_data=service_data, service_uuids=uuids, source="local")
    else:
        return None

    def call():
        return data.update(info)

    def count(update):
        # Readings only: the signal strength every library adds is not a reading of the advertisement.
        return sum(1 for key in update.entity_values if key.key != "signal_strength") + len(update.binary_entity_values)

    return call, count


# ---------------------------------------------------------------------------------------------------------
# bleparser (ble_monitor)


def bleparser_decoder(vector):
    from bleparser import BleParser

    mac = bytes.fromhex(vector["address"].replace(":", ""))
    parser = BleParser(aeskeys={mac: vector["key"]} if vector["key"] else None)
    payload = vector["payload"]
    number = vector["number"]
    # AD structures as the parser takes them: length, type, the UUID or company id (little endian), the data.
    if vector["kind"] == "company":
        element = bytes([len(payload) + 3, 0xFF, number & 0xFF, number >> 8]) + payload
        services, manufacturers = [], [element]
    else:
        element = bytes([len(payload) + 3, 0x16, number & 0xFF, number >> 8]) + payload
        services, manufacturers = [element], []

    def call():
        return parser.parse_advertisement(mac, -60, None, None, "", services, manufacturers)

    def count(result):
        sensor, _ = result
        if not sensor or not sensor.get("data", True):
            return 0
        skip = {"rssi", "mac", "type", "packet", "firmware", "data", "local_name", "status", "motion timer"}
        return sum(1 for k in sensor if k not in skip)

    return call, count


def measure(call, count, iterations, runs):
    values = count(call())
    if values == 0:
        return None, 0
    for _ in range(max(1, iterations // 10)):
        call()
    per_advert = []
    for _ in range(runs):
        start = time.thread_time_ns()
        for _ in range(iterations):
            call()
        per_advert.append((time.thread_time_ns() - start) / iterations)
    last = count(call())
    if last != values:
        raise SystemExit(f"advert_peer: {values} values at first, {last} after the runs")
    return per_advert, values


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--vectors", default=os.path.join(ROOT, "Benchmarks", "advert_vectors.tsv"))
    parser.add_argument("--iterations", type=int)
    parser.add_argument("--runs", type=int)
    parser.add_argument("--peers", default="ha,bleparser")
    args = parser.parse_args()
    iterations = args.iterations or (2000 if args.quick else 20000)
    runs = args.runs or (3 if args.quick else 7)
    # Home Assistant's default: warnings and above. The libraries call _LOGGER.debug on every advertisement.
    logging.basicConfig(level=logging.WARNING)
    makers = {"ha": ha_decoder, "bleparser": bleparser_decoder}
    failed = False
    for vector in load_vectors(args.vectors):
        for peer in args.peers.split(","):
            decoder = makers[peer](vector)
            if decoder is None:
                continue
            per_advert, values = measure(*decoder, iterations, runs)
            if per_advert is None:
                print(f"advert peer={peer} name={vector['name']} error=no_values", flush=True)
                failed = True
                continue
            print(f"advert peer={peer} name={vector['name']} ns={statistics.median(per_advert):.1f} "
                  f"min={min(per_advert):.1f} max={max(per_advert):.1f} runs={runs} iterations={iterations} "
                  f"values={values}", flush=True)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
