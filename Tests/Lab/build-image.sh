#!/usr/bin/env bash
# Builds the lab guest: a minimal Debian bookworm root (ext4 image), its kernel and initrd.
#
#   Tests/Lab/build-image.sh        prints the image directory on its last line of stdout
#
# The image lands in ${KEEPALIVE_LAB_CACHE:-$HOME/.cache/keepalive-lab}/<hash>/ (vmlinuz, initrd.img,
# root.ext4, recipe.sha256), where <hash> covers every file that goes into the guest: a second run with the
# same recipe only prints the directory. The build happens in a temporary directory beside it and is renamed
# into place last, so an interrupted build never leaves a directory that looks complete. A lock serializes
# concurrent builds of the same cache. Root is needed (debootstrap, chroot); host packages are installed with
# apt when missing, so a fresh Debian 12 machine (CI) can run it.
#
# Environment: KEEPALIVE_LAB_CACHE (cache root), KEEPALIVE_LAB_MIRROR (Debian mirror; default: the first
# bookworm URI in /etc/apt/sources.list*), KEEPALIVE_LAB_KEEP (completed images kept, default 3).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${KEEPALIVE_LAB_CACHE:-$HOME/.cache/keepalive-lab}"
keep="${KEEPALIVE_LAB_KEEP:-3}"

log() { echo "build-image: $*" >&2; }
die() { echo "build-image: error: $*" >&2; exit 1; }

# Everything that ends up in the guest. Changing any of these files (or this script) makes a new image.
recipe=(build-image.sh init peripheral.py labd.py system-bus.conf main.conf)

# Guest packages, and why:
#   linux-image-amd64  a kernel with the bluetooth and hci_vhci modules (the host kernel has no Bluetooth)
#   dbus               the guest's system bus, which bluetoothd needs and the host reaches over TCP
#   bluez              bluetoothd itself: the component under test
#   bluez-test-tools   btvirt: two emulated LE controllers (hci0 central, hci1 peripheral) on /dev/vhci
#   python3-dbus       peripheral.py and labd.py (GATT application, advertisement, lab control service)
#   python3-gi         GLib main loop for python3-dbus
#   kmod               modprobe hci_vhci / virtio_net (no udev runs in the guest)
#   socat              a TCP→unix-socket bridge for clients that only speak EXTERNAL auth (busctl, dbus-fast)
#   iproute2           configures the guest's NIC for qemu user networking (no DHCP client in the guest)
#   systemd            not booted (the lab's own init runs): systemd-sysusers and systemd-analyze for the .deb's
#                      install test (Tests/Deb/run.sh), which installs the package into this root under an overlay
# Installed with apt in the chroot, with the kernel (debootstrap does not resolve virtual dependencies such as
# python3-cryptography's python3-cffi-backend-api-min, and fails on it):
#   python3-cryptography  AES-CCM for the peripheral's encrypted BTHome advertisement
packages=(dbus bluez bluez-test-tools python3-dbus python3-gi kmod socat iproute2 systemd)
kernel_packages=(linux-image-amd64 python3-cryptography)
suite=bookworm

[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap and chroot); run it as root or with sudo"

recipe_hash() {
    local file
    for file in "${recipe[@]}"; do
        [[ -f "$here/$file" ]] || die "recipe file $here/$file is missing"
        printf '%s\n' "$file"
        cat "$here/$file"
    done | sha256sum | cut -c1-16
}
hash="$(recipe_hash)"
final="$cache/$hash"

image_complete() { [[ -f "$1/recipe.sha256" && -f "$1/root.ext4" && -f "$1/vmlinuz" && -f "$1/initrd.img" ]]; }

# The common case: nothing to do.
if image_complete "$final"; then
    touch "$final/recipe.sha256"   # marks it recently used, for pruning
    echo "$final"
    exit 0
fi

# Host tools. debootstrap and mkfs.ext4 build the image; the other scripts need qemu and gdbus, installed here
# too so that one apt run covers the lab.
source "$here/host-packages.sh"
install_missing_packages build-image debootstrap e2fsprogs qemu-system-x86 libglib2.0-bin debian-archive-keyring util-linux

# The Debian mirror this machine already uses: deb822 (.sources) or one-line format, first bookworm entry.
find_mirror() {
    local file
    for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [[ -f "$file" ]] || continue
        if [[ "$file" == *.sources ]]; then
            # Stanzas are separated by blank lines; keep the URI of a stanza whose Suites has plain "bookworm".
            awk -v suite="$suite" '
                /^[[:space:]]*$/ { if (uri != "" && found) { print uri; exit } uri = ""; found = 0; next }
                tolower($1) == "uris:" { uri = $2 }
                tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == suite) found = 1 }
                END { if (uri != "" && found) print uri }' "$file"
        else
            # deb [options] URI suite components...
            sed -E 's/\[[^]]*\]//' "$file" | awk -v suite="$suite" '$1 == "deb" && $3 == suite { print $2 }'
        fi
    done | grep -m1 -E '^https?://' || true
}
mirror="${KEEPALIVE_LAB_MIRROR:-$(find_mirror)}"
[[ -n "$mirror" ]] || die "no Debian $suite mirror found in /etc/apt/sources.list*; set KEEPALIVE_LAB_MIRROR"

mkdir -p "$cache"
exec 9>"$cache/.lock"
log "waiting for the build lock ($cache/.lock)"
flock 9
# Someone else may have built it while we waited.
if image_complete "$final"; then
    echo "$final"
    exit 0
fi

work="$(mktemp -d "$cache/.build-$hash.XXXXXX")"
rootfs="$work/rootfs"
cleanup() {
    local status=$?
    # Anything still mounted inside the chroot must go before the directory can.
    for mountpoint in "$rootfs/proc" "$rootfs/sys" "$rootfs/dev/pts" "$rootfs/dev"; do
        mountpoint -q "$mountpoint" 2>/dev/null && umount -l "$mountpoint" || true
    done
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

started=$SECONDS
log "debootstrap $suite from $mirror into $work (minbase + ${packages[*]})"
# The kernel comes in a second step, after the initramfs configuration exists: debootstrap would otherwise
# build a large generic initrd first and then we'd build it again.
debootstrap --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" "$suite" "$rootfs" "$mirror" \
    > "$work/debootstrap.log" 2>&1 || { tail -30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }

# A small initrd with only what mounting the root needs; the init script loads the rest itself.
mkdir -p "$rootfs/etc/initramfs-tools/conf.d"
cat > "$rootfs/etc/initramfs-tools/conf.d/lab.conf" <<'EOF'
MODULES=list
COMPRESS=gzip
EOF
printf '%s\n' virtio_pci virtio_blk ext4 > "$rootfs/etc/initramfs-tools/modules"
# No daemon may start inside the chroot.
printf '#!/bin/sh\nexit 101\n' > "$rootfs/usr/sbin/policy-rc.d"
chmod 755 "$rootfs/usr/sbin/policy-rc.d"

mount -t proc proc "$rootfs/proc"
mount -t sysfs sys "$rootfs/sys"
mount --bind /dev "$rootfs/dev"
log "installing ${kernel_packages[*]} in the chroot"
chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${kernel_packages[@]}" > "$work/kernel.log" 2>&1 || { tail -30 "$work/kernel.log" >&2; die "kernel install failed"; }
chroot "$rootfs" apt-get clean
umount "$rootfs/dev" "$rootfs/sys" "$rootfs/proc"

# The lab's own files. The dbus configuration is a full file of its own (passed with --config-file), so the
# Debian defaults in /usr/share/dbus-1 stay untouched.
install -d -m755 "$rootfs/lab"
install -m755 "$here/init" "$rootfs/lab/init"
install -m755 "$here/peripheral.py" "$rootfs/lab/peripheral.py"
install -m755 "$here/labd.py" "$rootfs/lab/labd.py"
install -m644 "$here/system-bus.conf" "$rootfs/lab/system-bus.conf"
install -m644 "$here/main.conf" "$rootfs/etc/bluetooth/main.conf"
echo keepalive-lab > "$rootfs/etc/hostname"
# dbus-daemon refuses to start without a machine id.
chroot "$rootfs" dbus-uuidgen --ensure=/etc/machine-id
rm -f "$rootfs/var/lib/dbus/machine-id"
ln -s /etc/machine-id "$rootfs/var/lib/dbus/machine-id"

# Things the guest never reads: smaller image (about 600 → 290 MB), faster mkfs. Kernel modules for hardware
# the guest does not have go too; bluetooth, crypto, net and virtio stay whole (bluetooth loads crypto modules
# on demand, which modules.dep does not show), and depmod runs again.
rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* \
    "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/sbin/policy-rc.d
for modules in "$rootfs"/lib/modules/*/kernel; do
    (cd "$modules" && rm -rf sound net/wireless net/mac80211 drivers/{gpu,media,net/wireless,net/ethernet} \
        drivers/{infiniband,staging,scsi,usb,iio,hid,input,isdn,md,mtd,nvme,target,ata,firewire,mmc,pcmcia} \
        drivers/{hwmon,thunderbolt,edac} fs/{btrfs,xfs,ocfs2,nfs,nfsd,ceph,cifs,smb,gfs2,f2fs,ubifs,jfs})
    chroot "$rootfs" depmod "$(basename "$(dirname "$modules")")"
done

kernel="$(ls "$rootfs"/boot/vmlinuz-* | sort -V | tail -1)"
initrd="$(ls "$rootfs"/boot/initrd.img-* | sort -V | tail -1)"
[[ -f "$kernel" && -f "$initrd" ]] || die "no kernel or initrd in $rootfs/boot"
cp "$kernel" "$work/vmlinuz"
cp "$initrd" "$work/initrd.img"

# mkfs.ext4 -d fills the file system from a directory: no loop device, no mount. 25 % + 64 MiB of headroom
# covers the guest's writes, which go to qemu's snapshot file anyway.
used_kib="$(du -sk "$rootfs" | cut -f1)"
size_mib=$((used_kib * 5 / 4 / 1024 + 64))
log "making a ${size_mib} MiB ext4 image"
mkfs.ext4 -q -F -L lab-root -d "$rootfs" "$work/root.ext4" "${size_mib}M" >"$work/mkfs.log" 2>&1 \
    || { cat "$work/mkfs.log" >&2; die "mkfs.ext4 failed"; }
rm -rf "$rootfs"

echo "$hash" > "$work/recipe.sha256"
mv -T "$work" "$final"
trap - EXIT
log "built $final in $((SECONDS - started)) s"

# Old recipes' images: keep the most recently used few.
ls -1dt "$cache"/*/recipe.sha256 2>/dev/null | tail -n +"$((keep + 1))" | while read -r marker; do
    old="$(dirname "$marker")"
    log "pruning old image $old"
    rm -rf "$old"
done

echo "$final"
