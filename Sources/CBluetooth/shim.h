// The parts of libbluetooth that Swift's importer cannot use directly, re-exported under a `cbluetooth_`
// prefix. Everything else (bachk, str2ba, ba2str, bt_compidtostr, hci_devinfo) imports as it is.
#ifndef CBLUETOOTH_SHIM_H
#define CBLUETOOTH_SHIM_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>

// HCIGETDEVLIST is an _IOR() macro, which Swift does not import, and struct hci_dev_list_req ends in a
// flexible array: so the whole "list the controllers" dance lives here. Fills up to `capacity` entries of
// `out` and returns how many; returns -1 with errno set when the kernel refuses (EAFNOSUPPORT: no Bluetooth
// in this kernel; EPERM/EACCES: not allowed).
static inline int cbluetooth_device_list(struct hci_dev_info *out, int capacity) {
    if (capacity <= 0 || capacity > HCI_MAX_DEV) {
        errno = EINVAL;
        return -1;
    }
    int socket_fd = socket(AF_BLUETOOTH, SOCK_RAW | SOCK_CLOEXEC, BTPROTO_HCI);
    if (socket_fd < 0) {
        return -1;
    }
    struct hci_dev_list_req *request = calloc(1, sizeof(*request) + capacity * sizeof(struct hci_dev_req));
    if (request == NULL) {
        close(socket_fd);
        errno = ENOMEM;
        return -1;
    }
    request->dev_num = (uint16_t)capacity;
    if (ioctl(socket_fd, HCIGETDEVLIST, (void *)request) < 0) {
        int saved = errno;
        free(request);
        close(socket_fd);
        errno = saved;
        return -1;
    }
    int count = 0;
    for (int index = 0; index < request->dev_num && count < capacity; index++) {
        memset(&out[count], 0, sizeof(out[count]));
        out[count].dev_id = request->dev_req[index].dev_id;
        if (ioctl(socket_fd, HCIGETDEVINFO, (void *)&out[count]) == 0) {
            count++;
        }
    }
    free(request);
    close(socket_fd);
    return count;
}

// hci_test_bit() is a static inline taking `void *`; this spells the one test the diagnostics need.
static inline int cbluetooth_device_is_up(const struct hci_dev_info *info) {
    return (info->flags & (1U << HCI_UP)) != 0;
}

#endif
