#!/usr/bin/env bash
# Home Assistant end-to-end check for keepalive's MQTT discovery (see README.md beside this file).
#   ./run.sh            build keepalive, make/reuse the HA venv, run ha_check.py
# Env: HA_VENV (default ~/.cache/keepalive-ha-venv), HA_PYTHON (default ~/.pyenv/versions/3.13.0/bin/python),
#      HA_SPEC (default "homeassistant==2025.4.*"), KEEPALIVE_REPO (default: this repository), SKIP_BUILD=1, KEEP=1.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
HA_VENV="${HA_VENV:-$HOME/.cache/keepalive-ha-venv}"
HA_PYTHON="${HA_PYTHON:-$HOME/.pyenv/versions/3.13.0/bin/python}"
HA_SPEC="${HA_SPEC:-homeassistant==2025.4.*}"
REPO="${KEEPALIVE_REPO:-$(cd "$HERE/../.." && pwd)}"
STAMP="$HA_VENV/.ha-check-installed"

command -v mosquitto >/dev/null || [ -x /usr/sbin/mosquitto ] || { echo "mosquitto missing (apt-get install mosquitto)"; exit 2; }

# 1. the venv (cached; the stamp names the spec it was made for)
if [ ! -f "$STAMP" ] || [ "$(head -1 "$STAMP")" != "$HA_SPEC" ]; then
  echo "== creating $HA_VENV with $HA_PYTHON ($HA_SPEC)"
  start=$(date +%s)
  rm -rf "$HA_VENV"
  "$HA_PYTHON" -m venv "$HA_VENV"
  # A venv that cannot be made (PyPI unreachable) exits 3: CI reports the check as not run, never as passed.
  install_failed() { echo "== could not install $HA_SPEC from PyPI: the Home Assistant check did not run"; rm -rf "$HA_VENV"; exit 3; }
  "$HA_VENV/bin/pip" install -q --upgrade pip || install_failed
  # HA's own pins: pip alone backtracks for a very long time (home-assistant-bluetooth -> habluetooth>=3.0 ->
  # bluetooth-data-tools, building sdists one after another). The wheel ships homeassistant/package_constraints.txt
  # (what HA's own installs use): extract it and install with it as constraints.
  dl="$(mktemp -d)"
  trap 'rm -rf "$dl"' EXIT
  "$HA_VENV/bin/pip" download -q --no-deps "$HA_SPEC" -d "$dl" || install_failed
  "$HA_VENV/bin/python" - "$dl" <<'PY'
import glob, sys, zipfile
d = sys.argv[1]
z = zipfile.ZipFile(glob.glob(d + "/homeassistant-*.whl")[0])
open(d + "/constraints.txt", "wb").write(z.read("homeassistant/package_constraints.txt"))
PY
  # Besides the core: the requirements of the integrations HA always sets up (frontend is critical: without
  # it HA goes into recovery mode) and of mqtt; hass runs with --skip-pip so it never installs at run time.
  "$HA_VENV/bin/pip" install -q -c "$dl/constraints.txt" "$dl"/homeassistant-*.whl \
      "home-assistant-frontend" "paho-mqtt" "pycares<5" || install_failed
  end=$(date +%s)
  size=$(du -sm "$HA_VENV" | cut -f1)
  ver=$("$HA_VENV/bin/python" -c 'from homeassistant.const import __version__; print(__version__)')
  printf '%s\nversion %s\ninstalled in %ss\nsize %s MiB\n' "$HA_SPEC" "$ver" "$((end - start))" "$size" > "$STAMP"
  rm -rf "$dl"; trap - EXIT
fi
echo "== HA venv: $(tr '\n' ' ' < "$STAMP")"
HA_VERSION=$("$HA_VENV/bin/python" -c 'from homeassistant.const import __version__; print(__version__)')

# 2. keepalive (incremental; never cleans)
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  echo "== building keepalive"
  (cd "$REPO" && PATH=/opt/swift/usr/bin:$PATH swift build --product keepalive 2>&1 | tail -1)
  # the tests too: the passive device's feed runs from them (swift test --skip-build, HomeAssistantPassiveFeed)
  (cd "$REPO" && PATH=/opt/swift/usr/bin:$PATH swift build --build-tests 2>&1 | tail -1)
fi
BIN="$(cd "$REPO" && PATH=/opt/swift/usr/bin:$PATH swift build --product keepalive --show-bin-path)/keepalive"
[ -x "$BIN" ] || { echo "no keepalive binary at $BIN"; exit 2; }

# 3. the check (it starts and kills by PID every process it needs)
exec "$HA_VENV/bin/python" "$HERE/ha_check.py" --venv "$HA_VENV" --keepalive "$BIN" --ha-version "$HA_VERSION" \
  --repo "$REPO" \
  ${KEEP:+--keep} "$@"
