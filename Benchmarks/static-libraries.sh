#!/bin/sh
# Prepares DIR for the shipped binary's link (the Makefile's install target and Benchmarks/run.py call it; the
# release build then runs with PKG_CONFIG_PATH=DIR/pkgconfig and -Xswiftc -LDIR):
#
#   libstdc++.a, libdbus-1.a, libyaml.a, libbluetooth.a   links to the system's static archives
#   pkgconfig/dbus-1.pc, yaml-0.1.pc, bluez.pc             the system's files without -L${libdir}
#   libkeepalive-sd-listen.a                               libdbus's two libsystemd functions (below)
#
# Why: every shared library costs resident memory before it runs a line: the loader reads its symbol tables and
# relocates its data. libdbus-1.so (0.3 MiB resident) brings libsystemd and what it loads (libgcrypt,
# libgpg-error, libzstd, liblzma, liblz4, libcap: 0.8 MiB) for two functions; libstdc++.so (which the static
# Swift runtime links) 1.1 MiB. Linked from their archives only what runs is mapped, laid out with the rest
# (Benchmarks/NOTES.md, "RSS").
#
# How: SwiftPM passes -L${libdir} from each system library's .pc file ahead of any -L of ours, so -ldbus-1 would
# find the shared library first; the rewritten .pc files drop it, and DIR (searched before the compiler's own
# directories) has only archives. libstdc++ is asked for by the runtime's static-stdlib-args.lnk (-lstdc++;
# the driver ignores -static-libstdc++), and found here the same way.
#
# libdbus's archive calls sd_listen_fds and sd_is_socket in one place: a D-Bus *server* listening on a
# `systemd:` address (socket activation of dbus-daemon). A client never listens. The two functions here answer
# what libsystemd answers to a process started without sockets: none were passed.
set -eu
dir=${1:?usage: static-libraries.sh DIR CLANG}
clang=${2:?usage: static-libraries.sh DIR CLANG}

mkdir -p "$dir/pkgconfig"
archive() { # NAME PATH: DIR/NAME -> PATH, which must exist
    if [ ! -f "$2" ]; then
        echo "static-libraries.sh: no $1 at $2 (Debian: $3)" >&2
        exit 1
    fi
    ln -sfn "$2" "$dir/$1"
}
archive libstdc++.a "$("$clang" -print-file-name=libstdc++.a)" libstdc++-12-dev
for module in dbus-1:dbus-1:libdbus-1-dev yaml-0.1:yaml:libyaml-dev bluez:bluetooth:libbluetooth-dev; do
    package=${module%%:*}; rest=${module#*:}; library=${rest%%:*}; apt=${rest#*:}
    libdir=$(pkg-config --variable=libdir "$package")
    archive "lib$library.a" "$libdir/lib$library.a" "$apt"
    pc=$(pkg-config --path "$package")
    sed -e 's/-L\${libdir} *//' -e '/^Libs\.private:/d' "$pc" > "$dir/pkgconfig/$package.pc"
done
sed -i 's/^Libs: -ldbus-1\b/& -lkeepalive-sd-listen/' "$dir/pkgconfig/dbus-1.pc"
grep -q -- '-lkeepalive-sd-listen' "$dir/pkgconfig/dbus-1.pc" || {
    echo "static-libraries.sh: unexpected Libs line in $(pkg-config --path dbus-1)" >&2
    exit 1
}

cat > "$dir/sd-listen.c" <<'EOF'
#include <errno.h>
/* libsystemd's answer when the process was started without sockets (no LISTEN_FDS): none. */
int sd_listen_fds(int unset_environment) { (void)unset_environment; return 0; }
/* Only asked about a descriptor sd_listen_fds returned, so never reached. */
int sd_is_socket(int fd, int family, int type, int listening) {
    (void)fd; (void)family; (void)type; (void)listening;
    return -ENOSYS;
}
EOF
"$clang" -O2 -fPIC -c "$dir/sd-listen.c" -o "$dir/sd-listen.o"
rm -f "$dir/libkeepalive-sd-listen.a"
ar rcs "$dir/libkeepalive-sd-listen.a" "$dir/sd-listen.o"
