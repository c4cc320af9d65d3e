/work/main/target-a/release/deps/ringfab_emu-2fb104a154a54f9a.d: hal/emu/src/lib.rs hal/emu/src/device.rs hal/emu/src/e1000e/mod.rs hal/emu/src/e1000e/model.rs hal/emu/src/e1000e/pci.rs hal/emu/src/e1000e/queues.rs hal/emu/src/e1000e/regs.rs hal/emu/src/engine.rs hal/emu/src/fault.rs hal/emu/src/igb/mod.rs hal/emu/src/igb/device.rs hal/emu/src/igb/model.rs hal/emu/src/igb/pci.rs hal/emu/src/igb/queues.rs hal/emu/src/igb/regs.rs hal/emu/src/iommu.rs hal/emu/src/null/mod.rs hal/emu/src/null/intel.rs hal/emu/src/null/virtio.rs hal/emu/src/pcap.rs hal/emu/src/pci.rs hal/emu/src/platform.rs hal/emu/src/toeplitz.rs hal/emu/src/virtio/mod.rs hal/emu/src/virtio/model.rs hal/emu/src/wait.rs hal/emu/src/wire.rs

/work/main/target-a/release/deps/libringfab_emu-2fb104a154a54f9a.rlib: hal/emu/src/lib.rs hal/emu/src/device.rs hal/emu/src/e1000e/mod.rs hal/emu/src/e1000e/model.rs hal/emu/src/e1000e/pci.rs hal/emu/src/e1000e/queues.rs hal/emu/src/e1000e/regs.rs hal/emu/src/engine.rs hal/emu/src/fault.rs hal/emu/src/igb/mod.rs hal/emu/src/igb/device.rs hal/emu/src/igb/model.rs hal/emu/src/igb/pci.rs hal/emu/src/igb/queues.rs hal/emu/src/igb/regs.rs hal/emu/src/iommu.rs hal/emu/src/null/mod.rs hal/emu/src/null/intel.rs hal/emu/src/null/virtio.rs hal/emu/src/pcap.rs hal/emu/src/pci.rs hal/emu/src/platform.rs hal/emu/src/toeplitz.rs hal/emu/src/virtio/mod.rs hal/emu/src/virtio/model.rs hal/emu/src/wait.rs hal/emu/src/wire.rs

/work/main/target-a/release/deps/libringfab_emu-2fb104a154a54f9a.rmeta: hal/emu/src/lib.rs hal/emu/src/device.rs hal/emu/src/e1000e/mod.rs hal/emu/src/e1000e/model.rs hal/emu/src/e1000e/pci.rs hal/emu/src/e1000e/queues.rs hal/emu/src/e1000e/regs.rs hal/emu/src/engine.rs hal/emu/src/fault.rs hal/emu/src/igb/mod.rs hal/emu/src/igb/device.rs hal/emu/src/igb/model.rs hal/emu/src/igb/pci.rs hal/emu/src/igb/queues.rs hal/emu/src/igb/regs.rs hal/emu/src/iommu.rs hal/emu/src/null/mod.rs hal/emu/src/null/intel.rs hal/emu/src/null/virtio.rs hal/emu/src/pcap.rs hal/emu/src/pci.rs hal/emu/src/platform.rs hal/emu/src/toeplitz.rs hal/emu/src/virtio/mod.rs hal/emu/src/virtio/model.rs hal/emu/src/wait.rs hal/emu/src/wire.rs

hal/emu/src/lib.rs:
hal/emu/src/device.rs:
hal/emu/src/e1000e/mod.rs:
hal/emu/src/e1000e/model.rs:
hal/emu/src/e1000e/pci.rs:
hal/emu/src/e1000e/queues.rs:
hal/emu/src/e1000e/regs.rs:
hal/emu/src/engine.rs:
hal/emu/src/fault.rs:
hal/emu/src/igb/mod.rs:
hal/emu/src/igb/device.rs:
hal/emu/src/igb/model.rs:
hal/emu/src/igb/pci.rs:
hal/emu/src/igb/queues.rs:
hal/emu/src/igb/regs.rs:
hal/emu/src/iommu.rs:
hal/emu/src/null/mod.rs:
hal/emu/src/null/intel.rs:
hal/emu/src/null/virtio.rs:
hal/emu/src/pcap.rs:
hal/emu/src/pci.rs:
hal/emu/src/platform.rs:
hal/emu/src/toeplitz.rs:
hal/emu/src/virtio/mod.rs:
hal/emu/src/virtio/model.rs:
hal/emu/src/wait.rs:
hal/emu/src/wire.rs:
