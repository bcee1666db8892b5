#!/usr/bin/env bash
# Builds keepalive_<version>_<arch>.deb from a shipped build of the daemon (the binary `make install` installs).
#
#   packaging/deb/build.sh BINARY [OUTPUT_DIRECTORY] [VERSION]
#
# The version is the binary's own (`keepalive --version`), so the package and the command never disagree; a
# VERSION given must begin with it (a rebuild, e.g. 0.6.0+rebuild1). Depends: is computed from the binary by
# dpkg-shlibdeps, never written by hand. Files go where Debian 12 looks for a package's files (/usr/bin,
# /lib/systemd/system, /usr/lib/sysusers.d, /usr/share/dbus-1/system.d, /lib/udev/rules.d); the unit is
# udev/keepalive.service with /usr/bin for /usr/local/bin. Needs dpkg-dev and fakeroot.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
die() { echo "deb: error: $*" >&2; exit 1; }

binary="${1:?usage: build.sh BINARY [OUTPUT_DIRECTORY] [VERSION]}"
output="${2:-.}"
[[ -x "$binary" ]] || die "$binary is not an executable"
for tool in dpkg-deb dpkg-shlibdeps fakeroot; do
    command -v "$tool" >/dev/null || die "$tool is missing (apt install dpkg-dev fakeroot)"
done

own_version="$("$binary" --version | head -1)"
version="${3:-$own_version}"
[[ "$version" == "$own_version"* ]] || die "version $version does not begin with the binary's own, $own_version"
arch="$(dpkg --print-architecture)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
package="$work/keepalive"

# The files, owned by root (dpkg-deb --root-owner-group), modes set here.
install -D -m755 "$binary" "$package/usr/bin/keepalive"
# Symbols and debug sections are not needed to run it (resident memory is the same: they are never mapped).
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$package/usr/bin/keepalive"
install -d -m755 "$package/lib/systemd/system"
sed -e 's|/usr/local/bin/keepalive|/usr/bin/keepalive|g' \
    -e 's|file:///usr/local/share/doc/keepalive/README.md|man:keepalive(1) file:///usr/share/doc/keepalive/README.md|' \
    "$root/udev/keepalive.service" > "$package/lib/systemd/system/keepalive.service"
chmod 644 "$package/lib/systemd/system/keepalive.service"
install -D -m644 "$root/udev/keepalive.sysusers.conf" "$package/usr/lib/sysusers.d/keepalive.conf"
install -D -m644 "$root/udev/io.keepalive.conf" "$package/usr/share/dbus-1/system.d/io.keepalive.conf"
install -D -m644 "$root/udev/70-keepalive.rules" "$package/lib/udev/rules.d/70-keepalive.rules"
install -D -m644 "$root/Examples/keepalive.yaml" "$package/etc/keepalive/keepalive.yaml"
doc="$package/usr/share/doc/keepalive"
install -D -m644 "$root/README.md" "$doc/README.md"
gzip -9n "$doc/README.md"
install -D -m644 "$here/copyright" "$doc/copyright"
# An example, not active: the operator copies it to /etc/polkit-1/rules.d/ to let the healing ladder restart
# bluetoothd (README, "Healing").
install -D -m644 "$root/udev/50-keepalive-restart-bluetooth.rules" "$doc/examples/50-keepalive-restart-bluetooth.rules"
install -D -m644 "$here/lintian-overrides" "$package/usr/share/lintian/overrides/keepalive"
install -D -m644 "$here/keepalive.1" "$package/usr/share/man/man1/keepalive.1"
gzip -9n "$package/usr/share/man/man1/keepalive.1"

# A native package's changelog: this build, dated by the commit it was built from.
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
date="$(git -C "$root" log -1 --format=%aD 2>/dev/null || date -R)"
maintainer="keepalive developers <keepalive@lists.keepalive.dev>"
cat > "$work/changelog" <<EOF
keepalive ($version) unstable; urgency=medium

  * Built from commit $commit; CHANGELOG.md in the source says what changed.

 -- $maintainer  $date
EOF
install -m644 "$work/changelog" "$doc/changelog"
gzip -9n "$doc/changelog"

# Depends: what the binary loads, with the versions its symbols need.
mkdir -p "$work/shlibs/debian"
printf 'Source: keepalive\n\nPackage: keepalive\nArchitecture: any\n' > "$work/shlibs/debian/control"
depends="$(cd "$work/shlibs" && dpkg-shlibdeps -O "$package/usr/bin/keepalive" 2>/dev/null \
    | sed -n 's/^shlibs:Depends=//p')"
[[ -n "$depends" ]] || die "dpkg-shlibdeps found no dependencies for $binary"
# Packed relative relocations (DT_RELR, the shipped link's -z pack-relative-relocs) need glibc 2.36: the loader
# refuses the binary before, but Debian 12's libc6 symbols file does not list GLIBC_ABI_DT_RELR, so
# dpkg-shlibdeps cannot know it.
if readelf -V "$package/usr/bin/keepalive" | grep -q GLIBC_ABI_DT_RELR; then
    current="$(sed -n 's/.*libc6 (>= \([0-9.]*\)).*/\1/p' <<<"$depends")"
    if [[ -n "$current" ]] && dpkg --compare-versions "$current" lt 2.36; then
        depends="${depends/libc6 (>= $current)/libc6 (>= 2.36)}"
    fi
fi

# Built-Using: the source packages whose archives the shipped link took (Benchmarks/static-libraries.sh). The
# GPL of libbluetooth asks that their source stay available with the binary, and a security update of one of
# them needs a rebuild of keepalive: the field says both. (Debian 13's Static-Built-Using is unknown to Debian 12.)
static_built_using=""
for archive in "$root"/.build-static/lib{stdc++,dbus-1,yaml,bluetooth}.a; do
    [[ -e "$archive" ]] || die "$archive is missing: build the binary as make install does"
    owner="$(dpkg -S "$(readlink -f "$archive")" | cut -d: -f1)"
    source="$(dpkg-query -W -f='${source:Package} (= ${source:Version})' "$owner")"
    static_built_using="${static_built_using:+$static_built_using, }$source"
done

install -d -m755 "$package/DEBIAN"
for script in postinst prerm postrm; do install -m755 "$here/$script" "$package/DEBIAN/$script"; done
echo /etc/keepalive/keepalive.yaml > "$package/DEBIAN/conffiles"
installed_size="$(du -sk --apparent-size --exclude=DEBIAN "$package" | cut -f1)"
cat > "$package/DEBIAN/control" <<EOF
Package: keepalive
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_size
Depends: $depends
Recommends: bluez
Suggests: libmosquitto1, libssl3
Built-Using: $static_built_using
Section: net
Priority: optional
Homepage: https://keepalive.dev
Description: keeps BLE sensors polled from a Linux gateway, through BlueZ
 keepalive polls each configured Bluetooth Low Energy sensor on a grid of its
 own, each poll inside a bounded window (connect, read, write, listen,
 disconnect), through BlueZ over D-Bus. It writes one JSON line per device per
 tick, and with an MQTT broker (libmosquitto1) publishes the readings through a
 crash-safe spool, with Home Assistant discovery. Sensors that only advertise
 (BTHome, pvvx, ATC1441, MiBeacon, RuuviTag) are heard without a connection;
 encrypted ones need libssl3's libcrypto.
 .
 The service starts only once /etc/keepalive/keepalive.yaml names a real device.
EOF
(cd "$package" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) \
    > "$package/DEBIAN/md5sums"
chmod 644 "$package/DEBIAN/md5sums" "$package/DEBIAN/control" "$package/DEBIAN/conffiles"

mkdir -p "$output"
deb="$output/keepalive_${version}_${arch}.deb"
fakeroot dpkg-deb --root-owner-group -Zxz --build "$package" "$deb" >/dev/null
echo "$deb"
