#!/usr/bin/env bash
# The .deb as an operator gets it: installed with apt into a clean Debian 12 root, then checked.
#
#   Tests/Deb/run.sh PACKAGE.deb SHIPPED_BINARY
#
# The root is the qemu lab's image (Tests/Lab/build-image.sh: debootstrap bookworm with dbus, bluez and systemd,
# cached), mounted read-only under an overlay whose upper layer is thrown away at the end: every run starts clean
# and the image is never changed. Checked, in order:
#   1. `apt-get install ./keepalive_*.deb` resolves and installs it (no network: what it needs is in the root);
#   2. `keepalive --version` is the package's version; `run --check` passes on the installed configuration;
#      `run --condition` keeps the service from starting on it (only simulated devices), and lets it start once a
#      real device is named;
#   3. every file in place with its owner and mode; /etc/keepalive/keepalive.yaml a conffile;
#   4. the `keepalive` system user exists, in the `bluetooth` group;
#   5. `systemd-analyze verify` accepts the installed unit;
#   6. an upgrade to a second build keeps an edited conffile;
#   7. purge removes /var/lib/keepalive and the configuration, and leaves the user (Debian policy).
# Root is needed (mount, chroot). Prints one line per check; exits 1 if any failed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
package="$(readlink -f "${1:?usage: run.sh PACKAGE.deb SHIPPED_BINARY}")"
binary="$(readlink -f "${2:?usage: run.sh PACKAGE.deb SHIPPED_BINARY}")"
[[ $(id -u) -eq 0 ]] || { echo "deb-check: needs root (mount, chroot)" >&2; exit 2; }

failures=0
check() { # DESCRIPTION COMMAND...: runs COMMAND, prints ok or FAILED with its output
    local what=$1 output
    shift
    if output="$("$@" 2>&1)"; then
        echo "ok      $what"
    else
        echo "FAILED  $what"
        printf '%s\n' "$output" | tail -15 | sed 's/^/        /'
        failures=$((failures + 1))
    fi
}

image="$("$root/Tests/Lab/build-image.sh")/root.ext4"
work="$(mktemp -d /tmp/keepalive-deb-check.XXXXXX)"
chroot_dir="$work/root"
cleanup() {
    local status=$?
    for mountpoint in "$chroot_dir/dev" "$chroot_dir/sys" "$chroot_dir/proc" "$chroot_dir" "$work/lower"; do
        mountpoint -q "$mountpoint" 2>/dev/null && umount -l "$mountpoint" || true
    done
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
mkdir -p "$work/lower" "$work/upper" "$work/overlay-work" "$chroot_dir"
mount -o loop,ro "$image" "$work/lower"
mount -t overlay overlay -o "lowerdir=$work/lower,upperdir=$work/upper,workdir=$work/overlay-work" "$chroot_dir"
mount -t proc proc "$chroot_dir/proc"
mount -t sysfs sys "$chroot_dir/sys"
mount --bind /dev "$chroot_dir/dev"
# No daemon starts inside the chroot (no systemd runs there either: the maintainer scripts must cope).
printf '#!/bin/sh\nexit 101\n' > "$chroot_dir/usr/sbin/policy-rc.d"
chmod 755 "$chroot_dir/usr/sbin/policy-rc.d"
in_root() { chroot "$chroot_dir" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }

version="$(dpkg-deb -f "$package" Version)"
cp "$package" "$chroot_dir/tmp/"
deb="/tmp/$(basename "$package")"

# 1. Installed by apt, dependencies resolved from what the root has.
check "apt-get install ./$(basename "$package")" in_root apt-get install -y -q "$deb"

# 2. The command, the configuration, the condition.
check "keepalive --version is $version" \
    bash -c "[ \"\$(chroot '$chroot_dir' keepalive --version | head -1)\" = '$version' ]"
check "keepalive run --check on the installed configuration" \
    in_root keepalive run --check --config /etc/keepalive/keepalive.yaml
check "run --condition keeps the service from starting on the example (exit 1)" \
    bash -c "chroot '$chroot_dir' keepalive run --condition --config /etc/keepalive/keepalive.yaml; [ \$? -eq 1 ]"
cat > "$chroot_dir/tmp/real.yaml" <<'EOF'
devices:
  - {name: greenhouse, address: A4:C1:38:0B:2D:11, read: [2a19]}
EOF
check "run --condition lets it start once a real device is named (exit 0)" \
    in_root keepalive run --condition --config /tmp/real.yaml

# 3. Files, owners, modes; the conffile.
expect_file() { # PATH MODE: exists, owned by root, with MODE
    local stat
    stat="$(stat -c '%a %U:%G' "$chroot_dir$1")" || return 1
    [[ "$stat" == "$2 root:root" ]] || { echo "$1: $stat, expected $2 root:root"; return 1; }
}
for entry in /usr/bin/keepalive:755 /lib/systemd/system/keepalive.service:644 \
    /usr/lib/sysusers.d/keepalive.conf:644 /usr/share/dbus-1/system.d/io.keepalive.conf:644 \
    /lib/udev/rules.d/70-keepalive.rules:644 /etc/keepalive/keepalive.yaml:644 \
    /usr/share/doc/keepalive/copyright:644 /usr/share/doc/keepalive/README.md.gz:644 \
    /usr/share/doc/keepalive/examples/50-keepalive-restart-bluetooth.rules:644 \
    /usr/share/man/man1/keepalive.1.gz:644; do
    check "${entry%%:*} (${entry##*:}, root)" expect_file "${entry%%:*}" "${entry##*:}"
done
check "/etc/keepalive/keepalive.yaml is a conffile" \
    bash -c "chroot '$chroot_dir' dpkg-query -W -f='\${Conffiles}' keepalive | grep -q '/etc/keepalive/keepalive.yaml'"
check "the polkit rule is an example, not active" bash -c "[ ! -e '$chroot_dir/etc/polkit-1/rules.d/50-keepalive-restart-bluetooth.rules' ]"

# 4. The user.
check "the keepalive user exists, home /var/lib/keepalive" \
    bash -c "chroot '$chroot_dir' getent passwd keepalive | grep -q ':/var/lib/keepalive:'"
check "keepalive is in the bluetooth group" bash -c "chroot '$chroot_dir' id -nG keepalive | grep -qw bluetooth"

# 5. The unit as systemd reads it.
# --man=no: the root has no man-db (the page itself is checked above).
check "systemd-analyze verify keepalive.service" \
    in_root systemd-analyze verify --man=no /lib/systemd/system/keepalive.service
check "the unit runs /usr/bin/keepalive, with the condition" \
    bash -c "grep -q '^ExecStart=/usr/bin/keepalive run' '$chroot_dir/lib/systemd/system/keepalive.service' \
        && grep -q '^ExecCondition=/usr/bin/keepalive run --config /etc/keepalive/keepalive.yaml --condition' \
            '$chroot_dir/lib/systemd/system/keepalive.service'"

# 6. An upgrade keeps the operator's edits.
echo "# edited by the operator" >> "$chroot_dir/etc/keepalive/keepalive.yaml"
"$root/packaging/deb/build.sh" "$binary" "$work/second" "$version+rebuild1" > /dev/null
cp "$work/second/"*.deb "$chroot_dir/tmp/"
second="/tmp/$(basename "$work/second/"*.deb)"
check "apt-get install of a second build ($version+rebuild1)" in_root apt-get install -y -q "$second"
check "the upgrade kept the edited conffile" grep -q "edited by the operator" "$chroot_dir/etc/keepalive/keepalive.yaml"
check "the second build is installed" \
    bash -c "[ \"\$(chroot '$chroot_dir' dpkg-query -W -f='\${Version}' keepalive)\" = '$version+rebuild1' ]"

# 7. Purge: the state goes, the user stays.
mkdir -p "$chroot_dir/var/lib/keepalive/spool"
echo '{}' > "$chroot_dir/var/lib/keepalive/records.jsonl"
check "apt-get purge keepalive" in_root apt-get purge -y -q keepalive
check "purge removed /var/lib/keepalive" bash -c "[ ! -e '$chroot_dir/var/lib/keepalive' ]"
check "purge removed /etc/keepalive" bash -c "[ ! -e '$chroot_dir/etc/keepalive' ]"
check "purge removed the binary" bash -c "[ ! -e '$chroot_dir/usr/bin/keepalive' ]"
check "the keepalive user stays (Debian policy)" in_root getent passwd keepalive

installed_kib="$(dpkg-deb -f "$package" Installed-Size)"
echo "package $(basename "$package"): $(stat -c %s "$package") bytes, installed $installed_kib KiB"
if ((failures > 0)); then
    echo "deb-check: $failures check(s) failed"
    exit 1
fi
echo "deb-check: all checks passed"
