#!/bin/busybox sh
# /init of ringfab's QEMU test guest. ringfab-qemu-tests puts it into the initramfs with static
# busybox, the vfio modules (modules/N-name.ko, N = load order), the kernel's NIC drivers
# (modules/nic/, loaded later by the guest program) and the guest programs.
# Everything it prints goes to the serial console, which the host runner reads.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "ringfab-init: userspace after $(cut -d' ' -f1 /proc/uptime) s, kernel $(uname -r)"
# No udev in the guest: nothing loads by itself, and the NICs stay without a driver until the
# guest program binds them to vfio-pci.
for m in /modules/*.ko; do
  insmod "$m" || echo "ringfab-init: insmod $m failed"
done
# Loopback, for fi_pingpong's control connection (TCP to 127.0.0.1).
ip link set lo up || echo "ringfab-init: ip link set lo up failed"
/ringfab-qemu-guest
echo "ringfab-init: guest program exited with status $?, uptime $(cut -d' ' -f1 /proc/uptime) s"
poweroff -f
