#!/usr/bin/env python3
"""The peer baseline of the MQTT benchmark (issue #11): a Python daemon publishing its records with paho-mqtt.

    mqtt_peer.py --port P [--devices 1000] [--tick-ms 10000] [--ticks 3] [--bursts 2] [--mode wait|async]
                 [--run paho]

The same program as Benchmarks/MQTTBenchmark (read its header): the same phases (harness, warmup, spread,
burst), the same records byte for byte (the daemon's JSON line shape with `"bench":{"run","phase",
"poll_end_ns"}`), the same topics (`keepalive/bench/d<N>/state`), QoS 1, MQTT 5 with content type
`application/json`, one `key=value` line per phase. What it does not do is keep a spool: nothing touches the
disk.

Publishing modes:
  wait   (the baseline) each record is published from the poll's thread, which then waits for its PUBACK
         (`MQTTMessageInfo.wait_for_publish()`, paho's documented way) before the next record: a careful daemon
         that counts a record as written only once the broker has it, and keeps them in order. paho's network
         thread (`loop_start`) does the socket work, as in miflora-mqtt-daemon.
  async  fire and forget: `publish()` queues the message and returns; the network thread sends it and handles
         the PUBACK (paho's default of 20 messages in flight). The cheapest a paho daemon can be; reported
         beside the baseline for information.
"""
import argparse
import resource
import sys
import time

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties


def monotonic_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def sleep_until(deadline_ns):
    remaining = deadline_ns - monotonic_ns()
    if remaining > 0:
        time.sleep(remaining / 1e9)


def percentile(values, fraction):
    if not values:
        return 0
    return values[min(len(values) - 1, max(0, round(fraction * (len(values) - 1))))]


def timestamp_text(realtime_ns):
    seconds = realtime_ns // 1_000_000_000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{realtime_ns // 1_000_000 % 1000:03d}Z"


def record_line(device, sequence, tick, timestamp, run, phase, poll_end):
    """The bytes MQTTBenchmark's recordLine builds."""
    battery = 40 + (device + tick) % 60
    temperature = 180 + (device * 7 + tick) % 100
    humidity = 300 + (device * 13 + tick) % 400
    return (
        f'{{"ts":"{timestamp}","seq":{sequence},"device":"d{device}","address":"C0:FF:EE:00:{device >> 8:02x}:'
        f'{device & 0xFF:02x}","adapter":"hci0","tick":{tick},"result":"newData","trigger":"schedule",'
        f'"values":{{"2a19":"{battery:02x}","2a6e":"{temperature & 0xFF:02x}{temperature >> 8:02x}",'
        f'"2a6f":"{humidity & 0xFF:02x}{humidity >> 8:02x}"}},"notifications":[],"readings":{{"battery":'
        f'{{"value":{battery},"unit":"%"}},"temperature":{{"value":{temperature // 10}.{temperature % 10},'
        f'"unit":"°C"}},"humidity":{{"value":{humidity // 10}.{humidity % 10},"unit":"%"}}}},"error":null,'
        f'"window":{{"id":{tick + 1},"budget_ms":20000,"used_ms":{1800 + device % 700},"outcome":"completed"}},'
        f'"attempts":1,"interval_ms":30000,"power":"normal","bench":{{"run":"{run}","phase":"{phase}",'
        f'"poll_end_ns":{poll_end}}}}}'
    ).encode()


class Peer:
    def __init__(self, args):
        self.args = args
        self.client = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2, client_id="paho-bench",
                                  protocol=mqtt.MQTTv5)
        self.properties = Properties(PacketTypes.PUBLISH)
        self.properties.ContentType = "application/json"
        self.client.connect("127.0.0.1", args.port, keepalive=60)
        self.client.loop_start()
        deadline = time.monotonic() + 30
        while not self.client.is_connected():
            if time.monotonic() > deadline:
                raise SystemExit(f"mqtt_peer: no connection to 127.0.0.1:{args.port}")
            time.sleep(0.005)

    def phase(self, name, ticks, spread, first_tick, sequence, harness):
        args = self.args
        devices = args.devices
        tick_ns = args.tick_ms * 1_000_000
        wait = args.mode == "wait"
        client, properties = self.client, self.properties
        submits, lateness, pending = [], [], []
        cpu_start = time.process_time_ns()
        usage_start = resource.getrusage(resource.RUSAGE_SELF)
        wall_start = monotonic_ns()
        last_submitted = wall_start
        for tick in range(ticks):
            start = monotonic_ns() + 5_000_000
            realtime_offset = time.time_ns() - monotonic_ns()
            timestamp = timestamp_text(start + realtime_offset)
            for device in range(1, devices + 1):
                scheduled = start + (device - 1) * tick_ns // devices if spread else start
                sleep_until(scheduled)
                payload = record_line(device, sequence, first_tick + tick, timestamp, args.run, name,
                                      scheduled + realtime_offset)
                before = monotonic_ns()
                if not harness:
                    info = client.publish(f"keepalive/bench/d{device}/state", payload, qos=1, retain=False,
                                          properties=properties)
                    if wait:
                        info.wait_for_publish(60)
                        if not info.is_published():
                            raise SystemExit(f"mqtt_peer: no PUBACK for seq {sequence}")
                    else:
                        pending.append(info)
                after = monotonic_ns()
                last_submitted = after
                lateness.append(before - scheduled)
                submits.append(after - before)
                sequence += 1
            if spread:
                sleep_until(start + tick_ns)
            else:
                self.drain(pending)
        self.drain(pending)
        end = monotonic_ns()
        usage_end = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "name": name, "records": devices * ticks, "cpu_ns": time.process_time_ns() - cpu_start,
            "user_us": (usage_end.ru_utime - usage_start.ru_utime) * 1e6,
            "sys_us": (usage_end.ru_stime - usage_start.ru_stime) * 1e6,
            "wall_ns": end - wall_start, "drain_ns": end - last_submitted,
            "submits": sorted(submits), "lateness": sorted(lateness),
        }, sequence

    @staticmethod
    def drain(pending):
        for info in pending:
            info.wait_for_publish(60)
            if not info.is_published():
                raise SystemExit("mqtt_peer: a publish was never acknowledged")
        pending.clear()

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def report(result, harness_per_record):
    per_record = result["cpu_ns"] / 1000 / result["records"]
    fields = [f"phase={result['name']}", f"records={result['records']}", f"cpu_us_per_record={per_record:.2f}"]
    if harness_per_record is not None:
        fields.append(f"net_cpu_us_per_record={per_record - harness_per_record:.2f}")
    submits, lateness = result["submits"], result["lateness"]
    fields += [
        f"user_us_per_record={result['user_us'] / result['records']:.2f}",
        f"sys_us_per_record={result['sys_us'] / result['records']:.2f}",
        f"wall_ms={result['wall_ns'] / 1e6:.1f}", f"drain_ms={result['drain_ns'] / 1e6:.2f}",
        f"submit_p50_us={percentile(submits, 0.5) / 1e3:.1f}", f"submit_p99_us={percentile(submits, 0.99) / 1e3:.1f}",
        f"submit_max_us={(submits[-1] if submits else 0) / 1e3:.1f}",
        f"late_p50_us={percentile(lateness, 0.5) / 1e3:.1f}", f"late_p99_us={percentile(lateness, 0.99) / 1e3:.1f}",
    ]
    print(" ".join(fields), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--tick-ms", type=int, default=10000)
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--bursts", type=int, default=2)
    parser.add_argument("--mode", choices=["wait", "async"], default="wait")
    parser.add_argument("--run", default="paho")
    args = parser.parse_args()
    peer = Peer(args)
    results = []
    sequence = 0
    result, sequence = peer.phase("harness-spread", 1, True, 0, sequence, True)
    results.append(result)
    result, sequence = peer.phase("harness-burst", 1, False, 0, sequence, True)
    results.append(result)
    sequence = 0
    result, sequence = peer.phase("warmup", 1, True, 0, sequence, False)
    results.append(result)
    if args.ticks > 0:
        result, sequence = peer.phase("spread", args.ticks, True, 1, sequence, False)
        results.append(result)
    if args.bursts > 0:
        result, sequence = peer.phase("burst", args.bursts, False, 1 + args.ticks, sequence, False)
        results.append(result)
    harness = {r["name"]: r["cpu_ns"] / 1000 / r["records"] for r in results if r["name"].startswith("harness")}
    for r in results:
        base = None if r["name"].startswith("harness") else harness["harness-burst" if r["name"] == "burst" else "harness-spread"]
        report(r, base)
    peer.close()


if __name__ == "__main__":
    sys.exit(main())
