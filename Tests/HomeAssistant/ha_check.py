#!/usr/bin/env python3
"""End-to-end check of keepalive's Home Assistant MQTT discovery against a real Home Assistant core.

Run by run.sh with the Home Assistant venv's python (it needs aiohttp and paho-mqtt, both HA dependencies).
Everything runs on 127.0.0.1 inside a temporary directory: a private mosquitto, the BlueZ simulator on its own
private D-Bus, `hass` with a pre-seeded config directory (no onboarding, MQTT config entry, only `lo` enabled),
and `keepalive run`. Assertions are made on the entities Home Assistant created (REST /api/states and the
WebSocket entity/device registries), never on the MQTT payloads.

No Home Assistant code is copied here; the .storage formats were read from the installed package.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone

import aiohttp
import paho.mqtt.client as paho

GATEWAY = "gw-test"
DISCOVERY_PREFIX = "homeassistant"
TOPIC_PREFIX = "keepalive"
INTERVAL_S = 5
MICRO = "\u03bc"

# What each configured device must become in Home Assistant: reading -> (device_class, unit, state_class).
# Text readings (None, None, None) must be diagnostic. Units are HA's spellings (Greek mu).
DEVICES = [
    {
        "name": "flora", "address": "C0:FF:EE:01:00:01", "profile": "mi-flora",
        "readings": {
            "temperature": ("temperature", "°C", "measurement"),
            "light": ("illuminance", "lx", "measurement"),
            "moisture": ("moisture", "%", "measurement"),
            "conductivity": ("conductivity", MICRO + "S/cm", "measurement"),
            "battery": ("battery", "%", "measurement"),
            "firmware": (None, None, None),
        },
    },
    {
        "name": "ess", "address": "C0:FF:EE:01:00:03", "profile": "environmental-sensing",
        "readings": {
            "temperature": ("temperature", "°C", "measurement"),
            "humidity": ("humidity", "%", "measurement"),
        },
    },
    {
        "name": "battery-1", "address": "C0:FF:EE:00:00:01", "read": ["2a19"],
        "readings": {"battery": ("battery", "%", "measurement")},
    },
]
# Passive sensors the daemon hears itself (`keepalive simulate --adverts`, SimulatedAdvertisement.swift): configured
# with `advertisements:` (and `key:`), never connected to. Readings as for DEVICES; "binary": boolean readings ->
# (binary_sensor device_class, state). Such a device has the diagnostics of PASSIVE_DIAGNOSTICS (the RSSI of what was
# heard, no window and no link time) and no poll button.
ADVERTISERS = [
    {
        "name": "porch", "address": "C0:FF:EE:02:00:01", "advertisements": "bthome",
        "readings": {
            "temperature": ("temperature", "°C", "measurement"),
            "humidity": ("humidity", "%", "measurement"),
            "battery": ("battery", "%", "measurement"),
            "voltage": ("voltage", "V", "measurement"),
        },
    },
    {
        "name": "attic", "address": "C0:FF:EE:02:00:02", "advertisements": "bthome",
        "key": "231d39c1d7cc1ab1aee224cd096db932",
        "readings": {
            "temperature": ("temperature", "°C", "measurement"),
            "humidity": ("humidity", "%", "measurement"),
            "battery": ("battery", "%", "measurement"),
            "voltage": ("voltage", "V", "measurement"),
        },
    },
    {
        "name": "kitchen", "address": "C0:FF:EE:02:00:03", "advertisements": "pvvx",
        "readings": {
            "temperature": ("temperature", "°C", "measurement"),
            "humidity": ("humidity", "%", "measurement"),
            "battery": ("battery", "%", "measurement"),
            "voltage": ("voltage", "V", "measurement"),
        },
        # pvvx's flags byte (0 in the simulator): binary sensors without a class
        "binary": {k: (None, "off") for k in ("reed_switch", "trigger_output", "trigger_output_controlled",
                                              "temperature_trigger", "humidity_trigger")},
    },
    {
        "name": "bedroom", "address": "C0:FF:EE:02:00:04", "advertisements": "mibeacon",
        "key": "b853075158487ca39a5b5ea9cd8e6b2f",
        "readings": {
            "temperature": ("temperature", "°C", "measurement"),
            "humidity": ("humidity", "%", "measurement"),
        },
    },
    {
        "name": "fridge", "address": "C0:FF:EE:02:00:05", "advertisements": "ruuvi",
        "readings": {
            "temperature": ("temperature", "°C", "measurement"),
            "humidity": ("humidity", "%", "measurement"),
            "pressure": ("pressure", "hPa", "measurement"),
            "voltage": ("voltage", "V", "measurement"),
            "acceleration_x": (None, "G", "measurement"),
            "acceleration_y": (None, "G", "measurement"),
            "acceleration_z": (None, "G", "measurement"),
            "tx_power": ("signal_strength", "dBm", "measurement"),
            "movement_counter": (None, None, "measurement"),
            "measurement_sequence": (None, None, "measurement"),
        },
    },
]
# What a passive device must not have (a polled device's entities).
POLLED_ONLY = ["poll", "window_used", "link_time"]

# A passive device with binary sensors and events (the simulator's advertisers have none that change), fed by the
# MQTTBridgeTests feed (HomeAssistantPassiveFeed.swift) on its own gateway: unique_id suffix -> (domain, device_class, unit,
# state_class, expected state after the first packet). Units are HA's spellings (Greek mu); None state: any.
PASSIVE_GATEWAY = "gw-passive"
PASSIVE_ADDRESS = "C0:FF:EE:0A:00:01"
PASSIVE = {
    "temperature": ("sensor", "temperature", "°C", "measurement", "21.5"),
    "humidity": ("sensor", "humidity", "%", "measurement", "48.25"),
    "pressure": ("sensor", "pressure", "hPa", "measurement", "1008.5"),
    "illuminance": ("sensor", "illuminance", "lx", "measurement", "312.5"),
    "voltage": ("sensor", "voltage", "V", "measurement", "3.012"),
    "co2": ("sensor", "carbon_dioxide", "ppm", "measurement", "612"),
    "pm2_5": ("sensor", "pm25", MICRO + "g/m³", "measurement", "8"),
    "battery": ("sensor", "battery", "%", "measurement", "87"),
    "energy": ("sensor", "energy", "kWh", "total", "1.234"),
    "acceleration": ("sensor", None, "m/s²", "measurement", "9.81"),
    "door": ("binary_sensor", "door", None, None, "off"),
    "window": ("binary_sensor", "window", None, None, "off"),
    "motion": ("binary_sensor", "motion", None, None, "off"),
    "moisture_detected": ("binary_sensor", "moisture", None, None, "off"),
    "battery_low": ("binary_sensor", "battery", None, None, "off"),
    "opening": ("binary_sensor", "opening", None, None, "on"),
    "button": ("event", "button", None, None, "unknown"),
    "dimmer": ("event", None, None, None, "unknown"),
    "advertisement_rssi": ("sensor", "signal_strength", "dBm", "measurement", "-67"),
    "last_result": ("sensor", None, None, None, "newData"),
    "last_error": ("sensor", None, None, None, "none"),
    "consecutive_failures": ("sensor", None, None, "measurement", "0"),
}
BUTTON_EVENTS = ["press", "double_press", "triple_press", "long_press", "long_double_press", "long_triple_press",
                 "hold_press", "hold_release"]

# Diagnostics per device: object id -> (device_class, unit, state_class, numeric)
DIAGNOSTICS = {
    "last_result": (None, None, None, False),
    "window_used": ("duration", "ms", "measurement", True),
    "link_time": ("duration", "ms", "measurement", True),
    "last_error": (None, None, None, False),
    "consecutive_failures": (None, None, "measurement", True),
}
# A passive device's: the signal strength of what was heard instead of window used and link time.
PASSIVE_DIAGNOSTICS = {
    "last_result": (None, None, None, False),
    "advertisement_rssi": ("signal_strength", "dBm", "measurement", True),
    "last_error": (None, None, None, False),
    "consecutive_failures": (None, None, "measurement", True),
}


def same_unit(a, b) -> bool:
    """Units equal up to the spelling of micro (U+00B5 micro sign / U+03BC Greek mu): HA itself changed spelling."""
    fold = lambda u: None if u is None else u.replace("\u00b5", "u").replace("\u03bc", "u")
    return fold(a) == fold(b)


def spell(unit) -> str:
    """A unit with its non-ASCII code points named, so µ and μ can be told apart in a report."""
    if unit is None:
        return "None"
    extra = [f"U+{ord(c):04X}" for c in unit if ord(c) > 127 and c not in "°²³"]
    return f"{unit}" + (f" ({','.join(extra)})" if extra else "")


def ha_accepts(device_class, unit, state_class) -> list[str]:
    """Problems per the installed HA's own tables (sensor/const.py DEVICE_CLASS_UNITS / _STATE_CLASSES).

    Read from the installed package at run time (not copied), so the check follows the HA version under test.
    """
    if device_class is None:
        return []
    from homeassistant.components.sensor.const import DEVICE_CLASS_STATE_CLASSES, DEVICE_CLASS_UNITS, SensorDeviceClass

    try:
        dc = SensorDeviceClass(device_class)
    except ValueError:
        return [f"device_class {device_class!r} unknown to this HA"]
    problems = []
    units = DEVICE_CLASS_UNITS.get(dc)
    if units is not None and unit not in units:
        problems.append(f"unit {spell(unit)} not accepted by HA for {device_class}: accepted "
                        f"{sorted(spell(u) for u in units if u is not None)}")
    states = DEVICE_CLASS_STATE_CLASSES.get(dc)
    if state_class is not None and states is not None and state_class not in states:
        problems.append(f"state_class {state_class!r} not accepted by HA for {device_class}")
    return problems


def addr_id(address: str) -> str:
    return address.replace(":", "").lower()


def gateway_id() -> str:
    return "keepalive_gateway_" + GATEWAY


# ---------------------------------------------------------------------------------------------------------------
# bookkeeping


class Report:
    def __init__(self) -> None:
        self.checks: list[tuple[bool, str, str]] = []
        self.timings: list[tuple[str, float]] = []
        self.notes: list[str] = []
        self.t0 = time.monotonic()

    def check(self, ok: bool, what: str, detail: str = "") -> bool:
        self.checks.append((bool(ok), what, detail))
        mark = "ok  " if ok else "FAIL"
        print(f"[{time.monotonic() - self.t0:7.1f}s] {mark} {what}" + (f"  ({detail})" if detail else ""), flush=True)
        return bool(ok)

    def timing(self, what: str, seconds: float) -> None:
        self.timings.append((what, seconds))
        print(f"[{time.monotonic() - self.t0:7.1f}s] time {what}: {seconds:.1f}s", flush=True)

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"[{time.monotonic() - self.t0:7.1f}s] note {text}", flush=True)

    @property
    def failed(self) -> list[tuple[bool, str, str]]:
        return [c for c in self.checks if not c[0]]


class Fatal(Exception):
    pass


R = Report()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - R.t0:7.1f}s] {msg}", flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, predicate, timeout: float, interval: float = 0.25):
    """Polls predicate until truthy; returns (value, seconds) or raises Fatal."""
    start = time.monotonic()
    while True:
        value = predicate()
        if value:
            return value, time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise Fatal(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class Processes:
    """Every process started, killed by PID (its own process group) at the end."""

    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen] = {}
        self.started_pids: list[int] = []

    def start(self, name: str, argv: list[str], **kw) -> subprocess.Popen:
        proc = subprocess.Popen(argv, start_new_session=True, **kw)
        self.procs[name] = proc
        self.started_pids.append(proc.pid)
        log(f"started {name} pid {proc.pid}: {' '.join(argv)}")
        return proc

    def stop(self, name: str, sig=signal.SIGTERM, timeout: float = 20) -> int | None:
        proc = self.procs.pop(name, None)
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(10)
        return proc.returncode

    def stop_all(self) -> None:
        for name in list(self.procs)[::-1]:
            self.stop(name, timeout=15)


P = Processes()


# ---------------------------------------------------------------------------------------------------------------
# MQTT monitor (paho, subscribes to everything; evidence only, never the basis of an assertion about entities)


class Monitor:
    def __init__(self, port: int) -> None:
        self.messages: list[tuple[float, str, bytes, bool]] = []
        self.lock = threading.Lock()
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="ha-check-monitor")
        self.client.on_message = self._on_message
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe("#", qos=1)
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def _on_message(self, client, userdata, msg) -> None:
        with self.lock:
            self.messages.append((time.monotonic(), msg.topic, bytes(msg.payload), bool(msg.retain)))

    def since(self, t: float, topic_re: str) -> list[tuple[float, str, bytes, bool]]:
        rx = re.compile(topic_re)
        with self.lock:
            return [m for m in self.messages if m[0] >= t and rx.search(m[1])]

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


# ---------------------------------------------------------------------------------------------------------------
# The daemon's records (stdout JSON lines), read by a thread


class Records:
    def __init__(self, proc: subprocess.Popen, path: str) -> None:
        self.records: list[tuple[float, dict]] = []
        self.lock = threading.Lock()
        self.path = path
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        with open(self.path, "a", encoding="utf-8") as out:
            for line in proc.stdout:
                out.write(line)
                out.flush()
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                with self.lock:
                    self.records.append((time.monotonic(), record))

    def for_device(self, name: str, since: float = 0) -> list[dict]:
        with self.lock:
            return [r for t, r in self.records if r.get("device") == name and t >= since]


# ---------------------------------------------------------------------------------------------------------------
# Home Assistant config directory


def jwt_hs256(payload: dict, key: str) -> str:
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    body = b64(json.dumps(payload, separators=(",", ":")).encode())
    signature = hmac.new(key.encode(), f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{b64(signature)}"


def storage(path: str, key: str, version: int, minor: int, data: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": version, "minor_version": minor, "key": key, "data": data}, f, indent=2)


def prepare_ha_config(directory: str, http_port: int, mqtt_port: int, ha_version: str) -> str:
    """Writes configuration.yaml and .storage; returns a long-lived access token (a JWT for the seeded token)."""
    os.makedirs(os.path.join(directory, ".storage"), exist_ok=True)
    with open(os.path.join(directory, "configuration.yaml"), "w", encoding="utf-8") as f:
        f.write(
            f"""# written by ha_check.py: no default_config (cloud, zeroconf, ...), loopback only
homeassistant:
  name: ha-check
  latitude: 52.52
  longitude: 13.40
  elevation: 34
  unit_system: metric
  time_zone: UTC
  currency: EUR
  country: DE
  language: en
  internal_url: "http://127.0.0.1:{http_port}"
http:
  server_host: 127.0.0.1
  server_port: {http_port}
api:
websocket_api:
config:
network:
mqtt:
sensor:
binary_sensor:
button:
event:
logger:
  default: info
"""
        )
    now = datetime.now(timezone.utc).isoformat()
    user_id = uuid.uuid4().hex
    token_id = uuid.uuid4().hex
    jwt_key = secrets.token_hex(64)
    storage(
        os.path.join(directory, ".storage", "auth"), "auth", 1, 1,
        {
            "users": [{
                "id": user_id, "group_ids": ["system-admin"], "is_owner": True, "is_active": True,
                "name": "ha-check", "system_generated": False, "local_only": False,
            }],
            "groups": [
                {"id": "system-admin", "name": "Administrators"},
                {"id": "system-users", "name": "Users"},
                {"id": "system-read-only", "name": "Read Only"},
            ],
            "credentials": [],
            "refresh_tokens": [{
                "id": token_id, "user_id": user_id, "client_id": None, "client_name": "ha-check",
                "client_icon": None, "token_type": "long_lived_access_token", "created_at": now,
                "access_token_expiration": 86400.0 * 3650, "token": secrets.token_hex(64), "jwt_key": jwt_key,
                "last_used_at": None, "last_used_ip": None, "expire_at": None, "credential_id": None,
                "version": ha_version,
            }],
        },
    )
    storage(os.path.join(directory, ".storage", "onboarding"), "onboarding", 4, 1,
            {"done": ["user", "core_config", "analytics", "integration"]})
    storage(os.path.join(directory, ".storage", "core.network"), "core.network", 1, 1, {"configured_adapters": ["lo"]})
    storage(
        os.path.join(directory, ".storage", "core.config_entries"), "core.config_entries", 1, 5,
        {"entries": [{
            "created_at": now, "modified_at": now, "entry_id": uuid.uuid4().hex.upper()[:26], "domain": "mqtt",
            "title": "127.0.0.1", "version": 1, "minor_version": 2, "source": "user", "unique_id": None,
            "disabled_by": None, "discovery_keys": {}, "pref_disable_new_entities": False,
            "pref_disable_polling": False, "subentries": [],
            "data": {"broker": "127.0.0.1", "port": mqtt_port},
            "options": {"discovery": True, "discovery_prefix": DISCOVERY_PREFIX},
        }]},
    )
    iat = int(time.time()) - 60
    return jwt_hs256({"iss": token_id, "iat": iat, "exp": iat + 86400 * 3650}, jwt_key)


# ---------------------------------------------------------------------------------------------------------------
# Home Assistant API


class HA:
    def __init__(self, port: int, token: str) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.token = token
        self.loop = asyncio.new_event_loop()

    def _run(self, coro):
        return self.loop.run_until_complete(coro)

    async def _request(self, method: str, path: str, body=None, timeout: float = 10):
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
            async with session.request(method, self.base + path, headers=headers,
                                       data=None if body is None else json.dumps(body)) as resp:
                text = await resp.text()
                return resp.status, (json.loads(text) if text and resp.content_type == "application/json" else text)

    def get(self, path: str):
        return self._run(self._request("GET", path))

    def post(self, path: str, body):
        return self._run(self._request("POST", path, body))

    def api_up(self) -> bool:
        try:
            status, body = self.get("/api/")
            return status == 200 and isinstance(body, dict) and body.get("message") == "API running."
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return False

    def states(self) -> dict[str, dict]:
        status, body = self.get("/api/states")
        if status != 200:
            raise Fatal(f"GET /api/states answered {status}: {body}")
        return {s["entity_id"]: s for s in body}

    async def _ws(self, commands: list[dict]) -> list:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:
            async with session.ws_connect(self.base.replace("http", "ws") + "/api/websocket") as ws:
                hello = await ws.receive_json()
                assert hello["type"] == "auth_required", hello
                await ws.send_json({"type": "auth", "access_token": self.token})
                auth = await ws.receive_json()
                if auth["type"] != "auth_ok":
                    raise Fatal(f"websocket auth failed: {auth}")
                results = []
                for i, command in enumerate(commands, start=1):
                    await ws.send_json({"id": i, **command})
                    while True:
                        msg = await ws.receive_json()
                        if msg.get("id") == i and msg.get("type") == "result":
                            break
                    if not msg.get("success"):
                        raise Fatal(f"websocket {command['type']} failed: {msg}")
                    results.append(msg["result"])
                return results

    def ws(self, *commands: dict) -> list:
        return self._run(self._ws(list(commands)))


# ---------------------------------------------------------------------------------------------------------------


def reported_at(state: dict) -> float:
    """When HA last heard the entity's state (last_reported, else last_updated), epoch seconds."""
    stamps = [state.get("last_reported"), state.get("last_updated")]
    return max(datetime.fromisoformat(x).timestamp() for x in stamps if x)


def numeric(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class Harness:
    def __init__(self, args) -> None:
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="ha-check-")
        self.ha_dir = os.path.join(self.tmp, "ha")
        self.mqtt_port = free_port()
        self.http_port = free_port()
        self.ha: HA | None = None
        self.monitor: Monitor | None = None
        self.records: Records | None = None
        self.bus = ""
        self.ha_starts = 0
        self.daemon_starts = 0
        self.entity_ids: dict[str, str] = {}  # unique_id -> entity_id
        self.frozen = (0.0, 0.0)

    # -- processes ----------------------------------------------------------------------------------------------
    def start_mosquitto(self) -> None:
        conf = os.path.join(self.tmp, "mosquitto.conf")
        with open(conf, "w") as f:
            # log to stderr (a file in the 0700 temp dir is not writable once mosquitto drops root for its user)
            f.write(f"listener {self.mqtt_port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                    f"log_dest stderr\nlog_type error\nlog_type warning\nlog_type notice\nlog_type information\n"
                    f"connection_messages true\n")
        P.start("mosquitto", [self.args.mosquitto, "-c", conf],
                stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.tmp, "mosquitto.err"), "w"))

        def up():
            try:
                with socket.create_connection(("127.0.0.1", self.mqtt_port), timeout=0.5):
                    return True
            except OSError:
                return False

        _, s = wait_for("mosquitto to listen", up, 10)
        R.timing("mosquitto listening", s)
        self.monitor = Monitor(self.mqtt_port)

    def start_simulator(self) -> None:
        start = time.monotonic()
        proc = P.start("simulator", [self.args.keepalive, "simulate", "--private", "--profiles", "--adverts"],
                       stdout=subprocess.PIPE, stderr=open(os.path.join(self.tmp, "simulator.err"), "w"), text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise Fatal("the simulator exited before READY")
            line = line.strip()
            if line.startswith("DBUS_SYSTEM_BUS_ADDRESS="):
                self.bus = line.split("=", 1)[1]
            if line == "READY":
                break
        if not self.bus:
            raise Fatal("the simulator printed no DBUS_SYSTEM_BUS_ADDRESS")
        # keep draining its stdout so it never blocks
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
        R.timing("simulator READY", time.monotonic() - start)

    def write_daemon_config(self) -> str:
        path = os.path.join(self.tmp, "keepalive.yaml")
        lines = [f"interval: {INTERVAL_S}s", "devices:"]
        for d in DEVICES:
            extra = f"profile: {d['profile']}" if "profile" in d else f"read: [{', '.join(d['read'])}]"
            lines.append(f"  - {{name: {d['name']}, address: {d['address']}, {extra}}}")
        for d in ADVERTISERS:
            key = f", key: {d['key']}" if "key" in d else ""
            lines.append(f"  - {{name: {d['name']}, address: {d['address']}, advertisements: {d['advertisements']}{key}}}")
        lines += ["mqtt:", f"  broker: mqtt://127.0.0.1:{self.mqtt_port}", f"  gateway: {GATEWAY}",
                  f"  spool: {{path: {self.tmp}/spool}}"]
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def start_daemon(self) -> None:
        self.daemon_starts += 1
        cfg = self.write_daemon_config()
        env = dict(os.environ, NO_COLOR="1")
        proc = P.start("daemon", [self.args.keepalive, "run", "--config", cfg, "--bus", self.bus],
                       stdout=subprocess.PIPE, text=True, env=env,
                       stderr=open(os.path.join(self.tmp, f"daemon-{self.daemon_starts}.err"), "w"))
        self.records = Records(proc, os.path.join(self.tmp, f"daemon-{self.daemon_starts}.jsonl"))

    def start_ha(self) -> float:
        self.ha_starts += 1
        start = time.monotonic()
        P.start("hass", [os.path.join(self.args.venv, "bin", "hass"), "-c", self.ha_dir, "--skip-pip",
                         "--log-file", os.path.join(self.tmp, f"ha-{self.ha_starts}.log")],
                stdout=open(os.path.join(self.tmp, f"ha-{self.ha_starts}.out"), "w"), stderr=subprocess.STDOUT)
        proc = P.procs["hass"]

        def up():
            if proc.poll() is not None:
                raise Fatal(f"hass exited with {proc.returncode}; see {self.tmp}/ha-{self.ha_starts}.log")
            return self.ha.api_up()

        _, s = wait_for("the HA HTTP API", up, self.args.ha_timeout, 0.5)
        R.timing(f"HA start #{self.ha_starts}: API answering", time.monotonic() - start)
        return start

    def wait_ha_birth(self, since: float) -> float:
        got, _ = wait_for(
            "HA's MQTT birth message (homeassistant/status online)",
            lambda: [m for m in self.monitor.since(since, r"^homeassistant/status$") if m[2] == b"online"],
            60)
        return got[0][0]

    # -- entity lookup ------------------------------------------------------------------------------------------
    def registry(self) -> tuple[dict, dict]:
        entities, devices = self.ha.ws({"type": "config/entity_registry/list"}, {"type": "config/device_registry/list"})
        ents = {e["unique_id"]: e for e in entities if e.get("platform") == "mqtt"}
        devs = {d["id"]: d for d in devices}
        return ents, devs

    def expected_unique_ids(self) -> dict[str, dict]:
        """unique_id -> expectation."""
        out: dict[str, dict] = {}
        for d in DEVICES:
            aid = addr_id(d["address"])
            for reading, (dc, unit, sc) in d["readings"].items():
                out[f"keepalive_{aid}_{reading}"] = {
                    "device": d["name"], "kind": "reading", "reading": reading, "domain": "sensor",
                    "device_class": dc, "unit": unit, "state_class": sc, "numeric": dc is not None,
                    "category": "diagnostic" if dc is None and unit is None else None}
            for obj, (dc, unit, sc, is_num) in DIAGNOSTICS.items():
                out[f"keepalive_{aid}_{obj}"] = {
                    "device": d["name"], "kind": "diagnostic", "reading": obj, "domain": "sensor",
                    "device_class": dc, "unit": unit, "state_class": sc, "numeric": is_num, "category": "diagnostic"}
            out[f"keepalive_{aid}_poll"] = {"device": d["name"], "kind": "button", "domain": "button",
                                            "device_class": None, "unit": None, "state_class": None,
                                            "numeric": False, "category": None}
        for d in ADVERTISERS:
            aid = addr_id(d["address"])
            for reading, (dc, unit, sc) in d["readings"].items():
                out[f"keepalive_{aid}_{reading}"] = {
                    "device": d["name"], "kind": "reading", "reading": reading, "domain": "sensor",
                    "device_class": dc, "unit": unit, "state_class": sc, "numeric": sc is not None,
                    "category": None, "passive": True}
            for reading, (dc, _) in d.get("binary", {}).items():
                out[f"keepalive_{aid}_{reading}"] = {
                    "device": d["name"], "kind": "reading", "reading": reading, "domain": "binary_sensor",
                    "device_class": dc, "unit": None, "state_class": None, "numeric": False,
                    "category": None, "passive": True}
            for obj, (dc, unit, sc, is_num) in PASSIVE_DIAGNOSTICS.items():
                out[f"keepalive_{aid}_{obj}"] = {
                    "device": d["name"], "kind": "diagnostic", "reading": obj, "domain": "sensor",
                    "device_class": dc, "unit": unit, "state_class": sc, "numeric": is_num, "category": "diagnostic",
                    "passive": True}
        out[gateway_id() + "_status"] = {"device": None, "kind": "gateway", "domain": "binary_sensor",
                                         "device_class": "connectivity", "unit": None, "state_class": None,
                                         "numeric": False, "category": "diagnostic"}
        out[gateway_id() + "_dropped"] = {"device": None, "kind": "gateway", "domain": "sensor",
                                          "device_class": None, "unit": None, "state_class": "total_increasing",
                                          "numeric": True, "category": "diagnostic"}
        # The daemon's health line (STATUS=), e.g. "polling 3 devices every 5s".
        out[gateway_id() + "_health"] = {"device": None, "kind": "gateway", "domain": "sensor",
                                         "device_class": None, "unit": None, "state_class": None,
                                         "numeric": False, "category": "diagnostic"}
        return out

    def all_entities_ready(self, values_since: float | None = None):
        """Every expected entity registered, with a state; readings numeric. Returns (ents, devs, states) or None.

        values_since (monotonic): every reading entity must also show a value the daemon recorded after it.
        """
        try:
            ents, devs = self.registry()
            states = self.ha.states()
        except (Fatal, aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return None
        for uid, exp in self.expected_unique_ids().items():
            if uid not in ents:
                return None
            st = states.get(ents[uid]["entity_id"])
            if st is None or st["state"] in ("unknown", "unavailable"):
                if exp["kind"] != "button":  # a button's state is unknown until pressed
                    return None
            if exp["numeric"] and numeric(st["state"]) is None:
                return None
        if values_since is not None:
            self.entity_ids = {u: ents[u]["entity_id"] for u in self.expected_unique_ids()}
            if any(not ok for ok, *_ in self.value_matches(states, values_since)):
                return None
        return ents, devs, states

    @staticmethod
    def fed_by_state(uid: str, exp: dict) -> bool:
        return exp["kind"] == "reading" or (exp["kind"] == "diagnostic" and exp["reading"] != "consecutive_failures")

    def unavailable_count(self, uids: list[str]) -> int:
        states = self.ha.states()
        return sum(1 for u in uids if states.get(self.entity_ids[u], {}).get("state") == "unavailable")

    # -- checks -------------------------------------------------------------------------------------------------
    def check_entities(self, ents: dict, devs: dict, states: dict, label: str) -> None:
        expected = self.expected_unique_ids()
        self.entity_ids = {u: ents[u]["entity_id"] for u in expected}
        extra = sorted(set(ents) - set(expected))
        R.check(not extra, f"{label}: no unexpected MQTT entities", ", ".join(extra))
        rows = []
        for uid, exp in expected.items():
            ent = ents[uid]
            eid = ent["entity_id"]
            st = states.get(eid)
            attrs = st["attributes"] if st else {}
            problems = []
            if not eid.startswith(exp["domain"] + "."):
                problems.append(f"domain {eid}")
            if attrs.get("device_class") != exp["device_class"]:
                problems.append(f"device_class {attrs.get('device_class')!r} != {exp['device_class']!r}")
            if not same_unit(attrs.get("unit_of_measurement"), exp["unit"]):
                problems.append(f"unit {spell(attrs.get('unit_of_measurement'))} != {spell(exp['unit'])}")
            if exp["domain"] == "sensor":
                problems += ha_accepts(attrs.get("device_class"), attrs.get("unit_of_measurement"),
                                       attrs.get("state_class"))
            if attrs.get("state_class") != exp["state_class"]:
                problems.append(f"state_class {attrs.get('state_class')!r} != {exp['state_class']!r}")
            if ent.get("entity_category") != exp["category"]:
                problems.append(f"entity_category {ent.get('entity_category')!r} != {exp['category']!r}")
            if exp["numeric"] and numeric(st["state"] if st else None) is None:
                problems.append(f"state {st and st['state']!r} not numeric")
            # device linkage
            dev = devs.get(ent.get("device_id"))
            if dev is None:
                problems.append("no device")
            elif exp["device"] is not None:
                if dev.get("name") != exp["device"]:
                    problems.append(f"device name {dev.get('name')!r}")
                via = devs.get(dev.get("via_device_id") or "")
                if not via or [["mqtt", gateway_id()]] != via.get("identifiers"):
                    problems.append(f"via_device {via and via.get('identifiers')}")
            rows.append((eid, uid, st["state"] if st else None, attrs.get("device_class"),
                         attrs.get("unit_of_measurement"), attrs.get("state_class"), ent.get("entity_category")))
            R.check(not problems, f"{label}: {eid} ({uid})", "; ".join(problems) or
                    f"state={st['state'] if st else None!r} dc={attrs.get('device_class')} "
                    f"unit={spell(attrs.get('unit_of_measurement'))} sc={attrs.get('state_class')} cat={ent.get('entity_category')}")
        self.entity_rows = rows
        # Passive devices: none of a polled device's entities (no connection to poll, no window, no link).
        for d in ADVERTISERS:
            aid = addr_id(d["address"])
            present = [obj for obj in POLLED_ONLY if f"keepalive_{aid}_{obj}" in ents]
            R.check(not present, f"{label}: passive {d['name']} ({d['advertisements']}) has no poll button, "
                    f"window_used or link_time", f"present: {present}")

    def check_devices(self, ents: dict, devs: dict) -> None:
        for d in DEVICES + ADVERTISERS:
            uid = f"keepalive_{addr_id(d['address'])}_{next(iter(d['readings']))}"
            dev = devs.get(ents[uid]["device_id"], {})
            conns = [list(c) for c in dev.get("connections", [])]
            ok = ["mac", d["address"].lower()] in conns and ["mqtt", f"keepalive_{addr_id(d['address'])}"] in [
                list(i) for i in dev.get("identifiers", [])]
            R.check(ok, f"device {d['name']}: identifiers and mac connection",
                    f"manufacturer={dev.get('manufacturer')!r} model={dev.get('model')!r} "
                    f"sw={dev.get('sw_version')!r} connections={conns}")

    def check_values(self, states: dict, label: str, since: float = 0) -> None:
        for ok, eid, name, detail in self.value_matches(states, since):
            R.check(ok, f"{label}: {eid} = daemon's reading {name}", detail)
        for d in ADVERTISERS:
            recent = self.records.for_device(d["name"], since)[-3:]
            sources = {r.get("source") for r in recent}
            attempts = [r.get("attempts") for r in recent]
            R.check(recent and sources == {"advertisement"} and attempts == [0] * len(recent),
                    f"{label}: {d['name']}'s records are from advertisements, never a connection",
                    f"sources {sources}, formats {sorted({str(r.get('format')) for r in recent})}, attempts {attempts}")

    def value_matches(self, states: dict, since: float = 0) -> list:
        """Each reading entity's state equals what the daemon recorded in one of its last 3 records after `since`
        (monotonic); taken after the states, so the record HA shows is among them."""
        out = []
        for d in DEVICES + ADVERTISERS:
            passive = d in ADVERTISERS
            recs = [r for r in self.records.for_device(d["name"], since) if r.get("readings")]
            recent = recs[-3:]
            for reading, (dc, unit, sc) in d["readings"].items():
                uid = f"keepalive_{addr_id(d['address'])}_{reading}"
                eid = self.entity_ids[uid]
                state = states[eid]["state"]
                values = [r["readings"].get(reading, {}).get("value") for r in recent if reading in r["readings"]]
                if sc is None:
                    ok = state in [str(v) for v in values]
                else:
                    ok = numeric(state) is not None and any(
                        v is not None and abs(numeric(state) - float(v)) < 1e-9 for v in values)
                out.append((ok, eid, f"{d['name']}.{reading}", f"HA {state!r}, records {values}"))
            for reading in d.get("binary", {}):
                uid = f"keepalive_{addr_id(d['address'])}_{reading}"
                eid = self.entity_ids[uid]
                state = states[eid]["state"]
                values = [r["readings"].get(reading, {}).get("value") for r in recent if reading in r["readings"]]
                ok = any(isinstance(v, bool) and state == ("on" if v else "off") for v in values)
                out.append((ok, eid, f"{d['name']}.{reading}", f"HA {state!r}, records {values}"))
            if passive:
                # the signal strength diagnostic is the records' rssi (one per tick: what was heard last)
                eid = self.entity_ids[f"keepalive_{addr_id(d['address'])}_advertisement_rssi"]
                state = states[eid]["state"]
                values = [r.get("rssi") for r in recent]
                ok = numeric(state) is not None and any(
                    v is not None and abs(numeric(state) - float(v)) < 1e-9 for v in values)
                out.append((ok, eid, f"{d['name']}.rssi", f"HA {state!r}, records {values}"))
        return out

    def check_button(self) -> None:
        d = DEVICES[1]
        uid = f"keepalive_{addr_id(d['address'])}_poll"
        eid = self.entity_ids[uid]
        # Press right after a scheduled poll of the device ended: a command that arrives during that poll waits for
        # it inside its own window (PollEngine.pollNow), and ess's poll (~2.1 s) plus the wait can exceed the
        # window's budget (3.3 s), which the daemon logs as a warning: a race of the harness, not what is checked.
        t_wait = time.monotonic()
        wait_for(f"a scheduled poll of {d['name']} to end", lambda: [
            r for r in self.records.for_device(d["name"], t_wait) if r.get("trigger") == "schedule"], 3 * INTERVAL_S, 0.05)
        t = time.monotonic()
        status, body = self.ha.post("/api/services/button/press", {"entity_id": eid})
        R.check(status == 200, f"POST /api/services/button/press {eid}", f"HTTP {status}")
        try:
            recs, s = wait_for("a trigger=command record",
                               lambda: [r for r in self.records.for_device(d["name"], t)
                                        if r.get("trigger") == "command"], 20)
            R.check(True, f"button {eid} -> record with \"trigger\":\"command\" for {d['name']}",
                    f"after {s:.1f}s, seq {recs[0].get('seq')}, result {recs[0].get('result')}")
            R.timing("button press to command record", s)
        except Fatal as e:
            R.check(False, f"button {eid} -> trigger=command record", str(e))
        st = self.ha.states().get(eid, {})
        R.check(st.get("state") not in (None, "unknown", "unavailable"),
                f"{eid} state is the press time", repr(st.get("state")))

    def check_expire_after(self) -> None:
        """SIGSTOP the daemon (its MQTT connection stays, so no last will): the entities fed by state messages must
        expire (expire_after = 3 x interval) while the others stay available; SIGCONT brings them back."""
        expiring = [u for u, e in self.expected_unique_ids().items() if self.fed_by_state(u, e)]
        staying = [u for u, e in self.expected_unique_ids().items()
                   if e["kind"] == "button" or (e["kind"] == "diagnostic" and not self.fed_by_state(u, e))]
        proc = P.procs["daemon"]
        wall_stop = time.time()
        os.kill(proc.pid, signal.SIGSTOP)
        t = time.monotonic()
        last = self.monitor.since(0, rf"^{TOPIC_PREFIX}/{GATEWAY}/[^/]+/state$")
        last_t = max(m[0] for m in last) if last else t
        try:
            _, s = wait_for("the state-fed entities to expire", lambda: self.unavailable_count(expiring) == len(expiring),
                            3 * INTERVAL_S + 20, 0.5)
            after_last = time.monotonic() - last_t
            R.check(3 * INTERVAL_S - 1 <= after_last <= 3 * INTERVAL_S + 8,
                    f"SIGSTOP: all {len(expiring)} state-fed entities expired (expire_after honoured)",
                    f"{after_last:.1f}s after the last state message; expire_after should be {3 * INTERVAL_S}s")
            R.check(self.unavailable_count(staying) == 0,
                    f"SIGSTOP: the {len(staying)} entities without expire_after stayed available",
                    f"{self.unavailable_count(staying)} unavailable")
        except Fatal as e:
            R.check(False, "SIGSTOP: state-fed entities expire", f"{e}; {self.unavailable_count(expiring)}/"
                    f"{len(expiring)} unavailable")
        finally:
            os.kill(proc.pid, signal.SIGCONT)
            # what the freeze itself causes (windows expired, Disconnect timed out) is logged right after SIGCONT
            self.frozen = (wall_stop, time.time() + 8)
        t_cont = time.monotonic()
        try:
            (_, _, states), s = wait_for("the entities back after SIGCONT", lambda: self.unavailable_count(expiring) == 0
                                         and self.all_entities_ready(values_since=t_cont), 3 * INTERVAL_S + 20, 0.5)
            R.check(True, "SIGCONT: entities available again, values from records after SIGCONT", f"after {s:.1f}s")
        except Fatal as e:
            R.check(False, "SIGCONT: entities available again", str(e))

    def check_log(self) -> None:
        pattern = re.compile(r"(WARNING|ERROR|CRITICAL)")
        ours = re.compile(r"mqtt|keepalive|gw-test|gw-passive|homeassistant/(sensor|binary_sensor|button|event)|c0ffee|"
                          r"device class|device_class|unit of measurement|state class|state_class|discovery",
                          re.I)
        bad, other = [], []
        for i in range(1, self.ha_starts + 1):
            path = os.path.join(self.tmp, f"ha-{i}.log")
            if not os.path.exists(path):
                continue
            for line in open(path, encoding="utf-8", errors="replace"):
                head = line[:200]
                if not pattern.search(head):
                    continue
                (bad if ours.search(line) else other).append(f"ha-{i}.log: {line.rstrip()[:400]}")
        daemon_bad, frozen = [], 0
        for i in range(1, self.daemon_starts + 1):
            path = os.path.join(self.tmp, f"daemon-{i}.err")
            if os.path.exists(path):
                for l in open(path, errors="replace"):
                    if not re.match(r"\S+ (warning|error|critical) ", l):
                        continue
                    try:
                        at = datetime.fromisoformat(l.split(" ", 1)[0].replace("Z", "+00:00")).timestamp()
                    except ValueError:
                        at = 0
                    if self.frozen[0] <= at <= self.frozen[1]:
                        frozen += 1
                        continue
                    daemon_bad.append(f"daemon-{i}.err: {l.rstrip()[:300]}")
                notices = [l.rstrip()[:200] for l in open(path, errors="replace") if re.match(r"\S+ notice ", l)]
                if notices:
                    R.note(f"daemon-{i}.err notice lines ({len(notices)}): " + " | ".join(notices[:3]))
        if frozen:
            R.note(f"{frozen} daemon warning/error lines caused by the SIGSTOP freeze itself (ignored)")
        R.check(not daemon_bad, "daemon log: no warning/error lines (outside the SIGSTOP freeze)",
                "\n    " + "\n    ".join(daemon_bad) if daemon_bad else "")
        R.check(not bad, "HA log: no warning/error about MQTT, discovery or our entities",
                "\n    " + "\n    ".join(bad) if bad else "")
        if other:
            R.note(f"{len(other)} other warning/error lines in HA's log (not ours):\n    " + "\n    ".join(other[:15]))

    # -- scenario -----------------------------------------------------------------------------------------------
    def run(self) -> None:
        self.ha_version = self.args.ha_version
        token = prepare_ha_config(self.ha_dir, self.http_port, self.mqtt_port, self.ha_version)
        self.ha = HA(self.http_port, token)
        log(f"temp dir {self.tmp}; mosquitto 127.0.0.1:{self.mqtt_port}; HA http 127.0.0.1:{self.http_port}")
        self.start_mosquitto()
        self.start_simulator()

        t_ha = self.start_ha()
        birth = self.wait_ha_birth(t_ha)
        R.timing("HA start #1: MQTT connected (birth message)", birth - t_ha)
        net = self.ha.ws({"type": "network"})[0]
        enabled = sorted(a["name"] for a in net.get("adapters", []) if a.get("enabled"))
        R.check(enabled == ["lo"] and net.get("configured_adapters") == ["lo"],
                "HA network settings: only the lo adapter enabled",
                f"enabled={enabled} configured={net.get('configured_adapters')}")
        status, cfg = self.ha.get("/api/config")
        R.check(status == 200 and "mqtt" in cfg.get("components", []),
                "HA /api/config: mqtt loaded", f"version {cfg.get('version')}, "
                f"{len(cfg.get('components', []))} components")
        if status == 200:
            forbidden = {"cloud", "zeroconf", "ssdp", "dhcp", "bluetooth", "default_config"} & set(cfg["components"])
            R.check(not forbidden, "HA did not load network-discovery/cloud integrations", ", ".join(sorted(forbidden)))

        t_d = time.monotonic()
        self.start_daemon()
        (ents, devs, states), s = wait_for("every expected entity with a state", self.all_entities_ready,
                                           self.args.entity_timeout, 1)
        R.timing("daemon start to every entity in HA with a state", time.monotonic() - t_d)
        self.check_entities(ents, devs, states, "start")
        self.check_devices(ents, devs)
        self.check_values(states, "start")
        self.check_button()
        self.check_expire_after()

        # -- HA restart: discovery must come back (retained and re-sent on homeassistant/status online)
        log("restarting Home Assistant")
        t_stop = time.monotonic()
        rc = P.stop("hass", signal.SIGTERM, 60)
        R.timing("HA stop", time.monotonic() - t_stop)
        R.check(rc == 0, "HA stopped cleanly", f"exit {rc}")
        # Wipe the retained discovery configs while HA is down, so that the entities can come back only through
        # the daemon's re-announcement on HA's birth message (not through the broker's retained copies).
        config_rx = rf"^{DISCOVERY_PREFIX}/(sensor|binary_sensor|button)/{GATEWAY}/.*/config$"
        topics = sorted({m[1] for m in self.monitor.since(0, config_rx) if m[2]})
        for topic in topics:
            self.monitor.client.publish(topic, b"", qos=1, retain=True).wait_for_publish(5)
        R.note(f"wiped {len(topics)} retained discovery configs while HA was down")
        # And HA's restored states (MQTT sensors with expire_after restore their last value at start): without them
        # an entity shows a value only once a state message reached it after the restart.
        restore = os.path.join(self.ha_dir, ".storage", "core.restore_state")
        if os.path.exists(restore):
            os.remove(restore)
            R.note("removed .storage/core.restore_state while HA was down (no restored values)")
        t_ha = self.start_ha()
        birth = self.wait_ha_birth(t_ha)
        try:
            configs, s = wait_for(
                "the daemon to re-send its discovery configs after HA's birth",
                lambda: (lambda got: got if len(got) >= len(self.expected_unique_ids()) else None)(
                    [m for m in self.monitor.since(birth, config_rx) if m[2]]), 20)
            R.check(len(configs) >= len(self.expected_unique_ids()),
                    "daemon re-sent discovery after homeassistant/status online",
                    f"{len(configs)} configs {s:.1f}s after the birth message")
        except Fatal as e:
            R.check(False, "daemon re-sent discovery after homeassistant/status online", str(e))
        t_back = time.monotonic()
        (ents, devs, states), s = wait_for("every entity back after the HA restart, with a fresh state",
                                           lambda: self.all_entities_ready(values_since=birth),
                                           self.args.entity_timeout, 1)
        R.timing("HA restart: birth to every entity back with a fresh state", time.monotonic() - birth)
        self.check_entities(ents, devs, states, "after HA restart")
        self.check_values(states, "after HA restart", since=birth)

        # -- availability: SIGKILL the daemon -> gateway status last will -> unavailable
        avail_uids = [u for u, e in self.expected_unique_ids().items()
                      if e["kind"] in ("reading", "diagnostic", "button")]
        t_kill = time.monotonic()
        P.stop("daemon", signal.SIGKILL)
        try:
            _, s = wait_for("every device entity unavailable after SIGKILL",
                            lambda: self.unavailable_count(avail_uids) == len(avail_uids), 30, 0.5)
            R.check(True, f"SIGKILL: all {len(avail_uids)} device entities unavailable", f"after {s:.1f}s")
            R.timing("SIGKILL to every device entity unavailable", s)
        except Fatal as e:
            R.check(False, "SIGKILL: every device entity unavailable",
                    f"{e}; {self.unavailable_count(avail_uids)}/{len(avail_uids)} unavailable")
        gw = self.ha.states().get(self.entity_ids[gateway_id() + "_status"], {})
        R.check(gw.get("state") == "off", "gateway connectivity binary_sensor off after SIGKILL", repr(gw.get("state")))
        will = self.monitor.since(t_kill, rf"^{TOPIC_PREFIX}/{GATEWAY}/status$")
        R.note(f"status messages after the kill: {[(m[2].decode(), m[3]) for m in will]}")

        # -- the daemon back: available again
        t_back = time.monotonic()
        self.start_daemon()
        try:
            _, s = wait_for("every device entity available again", lambda: (
                self.unavailable_count(avail_uids) == 0 and self.all_entities_ready(values_since=t_back)), 60, 1)
            R.check(True, "daemon restarted: entities available again, values from the new daemon's records",
                    f"after {s:.1f}s")
            R.timing("daemon restart to every entity available and fresh", s)
        except Fatal as e:
            R.check(False, "daemon restarted: entities available again", str(e))
        self.check_passive()
        self.check_log()
        self.control_micro_units()

    # -- a passive device: binary sensors, events, advertisement readings -------------------------------------
    def passive_state(self, suffix: str) -> dict:
        ents, _ = self.registry()
        ent = ents.get(f"keepalive_{addr_id(PASSIVE_ADDRESS)}_{suffix}")
        return self.ha.states().get(ent["entity_id"], {}) if ent else {}

    def feed_step(self, packet_id: int) -> None:
        """Asks the feed for its next packet (a poll command for `tag`) and waits for its state message."""
        state_topic = rf"^{TOPIC_PREFIX}/{PASSIVE_GATEWAY}/tag/state$"
        t = time.monotonic()
        self.monitor.client.publish(f"{TOPIC_PREFIX}/{PASSIVE_GATEWAY}/tag/poll", b"next", qos=1).wait_for_publish(5)
        marker = f'"packet_id":{packet_id},'.encode()
        wait_for(f"the feed's record of packet {packet_id}",
                 lambda: [m for m in self.monitor.since(t, state_topic) if marker in m[2]], 20)
        time.sleep(1.5)  # HA handles the message

    def check_passive(self) -> None:
        """A passive device through real HA: each reading's entity with HA's domain, class and unit; binary sensors
        on and off from the record's true/false; one event per new packet, none for a repeated one or for `none`."""
        feed_dir = os.path.join(self.tmp, "feed-spool")
        os.makedirs(feed_dir, exist_ok=True)
        env = dict(os.environ, KEEPALIVE_HA_FEED_PORT=str(self.mqtt_port), KEEPALIVE_HA_FEED_DIR=feed_dir,
                   PATH="/opt/swift/usr/bin:" + os.environ.get("PATH", ""))
        out = open(os.path.join(self.tmp, "feed.out"), "w")
        P.start("feed", ["swift", "test", "--skip-build", "--filter", "HomeAssistantPassiveFeed"], cwd=self.args.repo,
                env=env, stdout=out, stderr=subprocess.STDOUT)
        aid = addr_id(PASSIVE_ADDRESS)
        uids = {f"keepalive_{aid}_{k}": k for k in PASSIVE}

        def ready():
            try:
                ents, devs = self.registry()
                states = self.ha.states()
            except (Fatal, aiohttp.ClientError, asyncio.TimeoutError, OSError):
                return None
            if not all(u in ents for u in uids):
                return None
            for u, k in uids.items():
                st = states.get(ents[u]["entity_id"])
                if st is None or (PASSIVE[k][0] != "event" and st["state"] in ("unknown", "unavailable")):
                    return None
            return ents, devs, states

        try:
            (ents, devs, states), s = wait_for("the passive device's entities", ready, 120, 1)
        except Fatal as e:
            ents, _ = self.registry()
            states = self.ha.states()
            missing = [k for u, k in uids.items() if u not in ents]
            stateless = {k: states.get(ents[u]["entity_id"], {}).get("state") for u, k in uids.items() if u in ents}
            R.check(False, "passive device: every entity in HA with a state",
                    f"{e}; missing {missing}; states {stateless}")
            return
        R.timing("feed start to every passive entity in HA", s)
        mine = {u for u, e in ents.items() if u.startswith(f"keepalive_{aid}_")}
        R.check(mine == set(uids), "passive: exactly the expected entities (no poll button, window or link time)",
                f"extra {sorted(mine - set(uids))}, missing {sorted(set(uids) - mine)}")
        for uid, key in uids.items():
            domain, dc, unit, sc, want = PASSIVE[key]
            ent = ents[uid]
            eid = ent["entity_id"]
            st = states[eid]
            attrs = st["attributes"]
            problems = []
            if not eid.startswith(domain + "."):
                problems.append(f"domain {eid}")
            if attrs.get("device_class") != dc:
                problems.append(f"device_class {attrs.get('device_class')!r} != {dc!r}")
            if not same_unit(attrs.get("unit_of_measurement"), unit):
                problems.append(f"unit {spell(attrs.get('unit_of_measurement'))} != {spell(unit)}")
            if attrs.get("state_class") != sc:
                problems.append(f"state_class {attrs.get('state_class')!r} != {sc!r}")
            if domain == "sensor":
                problems += ha_accepts(attrs.get("device_class"), attrs.get("unit_of_measurement"),
                                       attrs.get("state_class"))
            if st["state"] != want and not (numeric(st["state"]) is not None and numeric(want) is not None
                                            and abs(numeric(st["state"]) - numeric(want)) < 1e-9):
                problems.append(f"state {st['state']!r} != {want!r}")
            if key == "button" and attrs.get("event_types") != BUTTON_EVENTS:
                problems.append(f"event_types {attrs.get('event_types')}")
            if key == "dimmer" and attrs.get("event_types") != ["rotate_left", "rotate_right"]:
                problems.append(f"event_types {attrs.get('event_types')}")
            dev = devs.get(ent.get("device_id"), {})
            if dev.get("name") != "tag":
                problems.append(f"device {dev.get('name')!r}")
            R.check(not problems, f"passive: {eid}", "; ".join(problems) or
                    f"state={st['state']!r} dc={attrs.get('device_class')} "
                    f"unit={spell(attrs.get('unit_of_measurement'))} sc={attrs.get('state_class')}")
            self.entity_rows.append((eid, uid, st["state"], attrs.get("device_class"),
                                     attrs.get("unit_of_measurement"), attrs.get("state_class"),
                                     ent.get("entity_category")))

        # packet 2: a press, the door open, motion
        self.feed_step(2)
        button, door, motion = (self.passive_state(k) for k in ("button", "door", "motion"))
        R.check(button.get("attributes", {}).get("event_type") == "press" and button.get("state") not in
                ("unknown", "unavailable", None), "passive: a button press fires the event entity once",
                f"state {button.get('state')!r}, event_type {button.get('attributes', {}).get('event_type')!r}")
        R.check(door.get("state") == "on" and motion.get("state") == "on", "passive: door and motion on",
                f"door {door.get('state')!r}, motion {motion.get('state')!r}")
        fired_at = button.get("state")
        dimmer_before = self.passive_state("dimmer").get("state")
        R.check(dimmer_before == "unknown", "passive: dimmer `none` fired no event", repr(dimmer_before))
        # packet 2 again: no second event
        self.feed_step(2)
        again = self.passive_state("button")
        R.check(again.get("state") == fired_at, "passive: the repeated packet fired no second event",
                f"{fired_at!r} -> {again.get('state')!r}")
        # packet 3: a double press, the dimmer turned left 3 steps, the door closed
        self.feed_step(3)
        button, dimmer, door = (self.passive_state(k) for k in ("button", "dimmer", "door"))
        R.check(button.get("attributes", {}).get("event_type") == "double_press" and button.get("state") != fired_at,
                "passive: a new packet's double press fires again",
                f"state {button.get('state')!r}, event_type {button.get('attributes', {}).get('event_type')!r}")
        da = dimmer.get("attributes", {})
        R.check(da.get("event_type") == "rotate_left" and da.get("steps") == 3,
                "passive: the dimmer event with its steps", f"event_type {da.get('event_type')!r}, steps {da.get('steps')!r}")
        R.check(door.get("state") == "off", "passive: door off again", repr(door.get("state")))
        events = self.monitor.since(0, rf"^{TOPIC_PREFIX}/{PASSIVE_GATEWAY}/tag/event/")
        R.note(f"passive: event messages on the broker: {[(m[1].rsplit('/', 1)[1], m[2].decode(), m[3]) for m in events]}")
        # the feed ends after one more command
        self.monitor.client.publish(f"{TOPIC_PREFIX}/{PASSIVE_GATEWAY}/tag/poll", b"end", qos=1).wait_for_publish(5)
        try:
            wait_for("the feed to finish", lambda: P.procs["feed"].poll() is not None, 30)
        except Fatal:
            pass
        rc = P.stop("feed")
        R.check(rc == 0, "passive: the feed ran to its end", f"exit {rc}; see feed.out")

    def control_micro_units(self) -> None:
        """A control, not a check of the daemon: the same conductivity sensor published by the harness with each
        spelling of micro, to show which one this HA accepts (the fix for a unit it refuses)."""
        log_path = os.path.join(self.tmp, f"ha-{self.ha_starts}.log")
        offset = os.path.getsize(log_path)
        for tag, mu in (("micro_sign", "\u00b5"), ("greek_mu", "\u03bc")):
            uid = f"ha_check_control_{tag}"
            config = {"name": f"control {tag}", "unique_id": uid, "state_topic": f"ha-check/{tag}",
                      "device_class": "conductivity", "unit_of_measurement": mu + "S/cm", "state_class": "measurement",
                      "device": {"identifiers": ["ha_check_control"], "name": "ha-check control"}}
            self.monitor.client.publish(f"{DISCOVERY_PREFIX}/sensor/ha_check_control/{tag}/config",
                                        json.dumps(config, ensure_ascii=False).encode(), qos=1).wait_for_publish(5)

            def seen():
                ents, _ = self.registry()
                if uid not in ents:
                    return None
                self.monitor.client.publish(f"ha-check/{tag}", b"567", qos=1).wait_for_publish(5)
                st = self.ha.states().get(ents[uid]["entity_id"])
                return st if st and st["state"] == "567" else None

            try:
                st, _ = wait_for(f"control entity {tag}", seen, 15, 0.5)
                unit = st["attributes"].get("unit_of_measurement")
                problems = ha_accepts("conductivity", unit, "measurement")
                R.note(f"control {tag}: published {spell(mu + 'S/cm')} -> HA entity {st['entity_id']} unit "
                       f"{spell(unit)}: " + ("; ".join(problems) if problems else "accepted by this HA"))
            except Fatal:
                R.note(f"control {tag}: published {spell(mu + 'S/cm')} -> no entity (HA refused the config)")
        time.sleep(1)  # let HA's log catch up (notes only)
        with open(log_path, encoding="utf-8", errors="replace") as f:
            f.seek(offset)
            for line in f:
                if re.search(r"WARNING|ERROR", line[:80]):
                    R.note(f"control log line: {line.rstrip()[:260]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", required=True)
    ap.add_argument("--keepalive", required=True)
    ap.add_argument("--mosquitto", default=shutil.which("mosquitto") or "/usr/sbin/mosquitto")
    ap.add_argument("--ha-version", default="")
    ap.add_argument("--ha-timeout", type=float, default=240)
    ap.add_argument("--entity-timeout", type=float, default=90)
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--repo", default=os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")),
                    help="the package, for the passive device's feed (swift test --skip-build)")
    args = ap.parse_args()

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    h = Harness(args)
    fatal = None
    try:
        h.run()
    except (Fatal, KeyboardInterrupt) as e:
        fatal = str(e) or repr(e)
        R.check(False, "harness", fatal)
    except Exception as e:  # report and clean up
        import traceback
        traceback.print_exc()
        fatal = repr(e)
        R.check(False, "harness (exception)", fatal)
    finally:
        if h.monitor:
            try:
                h.monitor.close()
            except Exception:
                pass
        P.stop_all()
        if fatal and os.path.exists(os.path.join(h.tmp, "ha-1.log")):
            try:
                h.check_log()
            except Exception:
                pass

    total = time.monotonic() - R.t0
    print("\n" + "=" * 100)
    print("SUMMARY")
    print("=" * 100)
    for what, s in R.timings:
        print(f"  time  {what:<60} {s:7.1f}s")
    print(f"  time  {'whole run':<60} {total:7.1f}s")
    if getattr(h, "entity_rows", None):
        print("\n  entities (as Home Assistant has them, last check):")
        print(f"  {'entity_id':<45} {'state':<22} {'device_class':<14} {'unit':<7} {'state_class':<17} category")
        for eid, uid, state, dc, unit, sc, cat in h.entity_rows:
            print(f"  {eid:<45} {str(state)[:22]:<22} {str(dc):<14} {spell(unit):<7} {str(sc):<17} {cat}")
    for n in R.notes:
        print("  note: " + n)
    leftovers = []
    for pid in P.started_pids:
        try:
            os.killpg(pid, 0)
            leftovers.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    R.check(not leftovers, "every process group the harness started is gone", str(leftovers))
    failed = R.failed
    print(f"\n{len(R.checks) - len(failed)} passed, {len(failed)} failed")
    for ok, what, detail in failed:
        print(f"  FAILED: {what}: {detail}")
    if args.keep or failed:
        print(f"  files kept in {h.tmp}")
    else:
        shutil.rmtree(h.tmp, ignore_errors=True)
    print("RESULT: " + ("PASS" if not failed else "FAIL"))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
