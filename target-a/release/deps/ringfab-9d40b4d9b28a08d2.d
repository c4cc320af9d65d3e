/work/main/target-a/release/deps/ringfab-9d40b4d9b28a08d2.d: core/src/lib.rs core/src/av.rs core/src/cntr.rs core/src/cq/mod.rs core/src/cq/attr.rs core/src/cq/aux.rs core/src/cq/entry.rs core/src/cq/errdata.rs core/src/cq/queue.rs core/src/cq/read.rs core/src/cq/slot.rs core/src/cq/strerror.rs core/src/cq/wait.rs core/src/domain.rs core/src/ep/mod.rs core/src/ep/alias.rs core/src/ep/control.rs core/src/ep/recv.rs core/src/ep/send.rs core/src/ep/setup.rs core/src/error.rs core/src/flags.rs core/src/info.rs core/src/mr.rs core/src/path/mod.rs core/src/path/cancel.rs core/src/path/fast_lane.rs core/src/path/fault.rs core/src/path/framed.rs core/src/path/gather.rs core/src/path/handle.rs core/src/path/header.rs core/src/path/multi.rs core/src/path/op.rs core/src/path/poll.rs core/src/path/post.rs core/src/path/raw.rs core/src/path/shared.rs core/src/path/sink.rs core/src/path/slot.rs core/src/path/srx.rs core/src/path/state.rs core/src/path/verdict.rs core/src/proto.rs core/src/raw.rs core/src/sep.rs core/src/srx.rs core/src/storage.rs core/src/stx.rs

/work/main/target-a/release/deps/libringfab-9d40b4d9b28a08d2.rlib: core/src/lib.rs core/src/av.rs core/src/cntr.rs core/src/cq/mod.rs core/src/cq/attr.rs core/src/cq/aux.rs core/src/cq/entry.rs core/src/cq/errdata.rs core/src/cq/queue.rs core/src/cq/read.rs core/src/cq/slot.rs core/src/cq/strerror.rs core/src/cq/wait.rs core/src/domain.rs core/src/ep/mod.rs core/src/ep/alias.rs core/src/ep/control.rs core/src/ep/recv.rs core/src/ep/send.rs core/src/ep/setup.rs core/src/error.rs core/src/flags.rs core/src/info.rs core/src/mr.rs core/src/path/mod.rs core/src/path/cancel.rs core/src/path/fast_lane.rs core/src/path/fault.rs core/src/path/framed.rs core/src/path/gather.rs core/src/path/handle.rs core/src/path/header.rs core/src/path/multi.rs core/src/path/op.rs core/src/path/poll.rs core/src/path/post.rs core/src/path/raw.rs core/src/path/shared.rs core/src/path/sink.rs core/src/path/slot.rs core/src/path/srx.rs core/src/path/state.rs core/src/path/verdict.rs core/src/proto.rs core/src/raw.rs core/src/sep.rs core/src/srx.rs core/src/storage.rs core/src/stx.rs

/work/main/target-a/release/deps/libringfab-9d40b4d9b28a08d2.rmeta: core/src/lib.rs core/src/av.rs core/src/cntr.rs core/src/cq/mod.rs core/src/cq/attr.rs core/src/cq/aux.rs core/src/cq/entry.rs core/src/cq/errdata.rs core/src/cq/queue.rs core/src/cq/read.rs core/src/cq/slot.rs core/src/cq/strerror.rs core/src/cq/wait.rs core/src/domain.rs core/src/ep/mod.rs core/src/ep/alias.rs core/src/ep/control.rs core/src/ep/recv.rs core/src/ep/send.rs core/src/ep/setup.rs core/src/error.rs core/src/flags.rs core/src/info.rs core/src/mr.rs core/src/path/mod.rs core/src/path/cancel.rs core/src/path/fast_lane.rs core/src/path/fault.rs core/src/path/framed.rs core/src/path/gather.rs core/src/path/handle.rs core/src/path/header.rs core/src/path/multi.rs core/src/path/op.rs core/src/path/poll.rs core/src/path/post.rs core/src/path/raw.rs core/src/path/shared.rs core/src/path/sink.rs core/src/path/slot.rs core/src/path/srx.rs core/src/path/state.rs core/src/path/verdict.rs core/src/proto.rs core/src/raw.rs core/src/sep.rs core/src/srx.rs core/src/storage.rs core/src/stx.rs

core/src/lib.rs:
core/src/av.rs:
core/src/cntr.rs:
core/src/cq/mod.rs:
core/src/cq/attr.rs:
core/src/cq/aux.rs:
core/src/cq/entry.rs:
core/src/cq/errdata.rs:
core/src/cq/queue.rs:
core/src/cq/read.rs:
core/src/cq/slot.rs:
core/src/cq/strerror.rs:
core/src/cq/wait.rs:
core/src/domain.rs:
core/src/ep/mod.rs:
core/src/ep/alias.rs:
core/src/ep/control.rs:
core/src/ep/recv.rs:
core/src/ep/send.rs:
core/src/ep/setup.rs:
core/src/error.rs:
core/src/flags.rs:
core/src/info.rs:
core/src/mr.rs:
core/src/path/mod.rs:
core/src/path/cancel.rs:
core/src/path/fast_lane.rs:
core/src/path/fault.rs:
core/src/path/framed.rs:
core/src/path/gather.rs:
core/src/path/handle.rs:
core/src/path/header.rs:
core/src/path/multi.rs:
core/src/path/op.rs:
core/src/path/poll.rs:
core/src/path/post.rs:
core/src/path/raw.rs:
core/src/path/shared.rs:
core/src/path/sink.rs:
core/src/path/slot.rs:
core/src/path/srx.rs:
core/src/path/state.rs:
core/src/path/verdict.rs:
core/src/proto.rs:
core/src/raw.rs:
core/src/sep.rs:
core/src/srx.rs:
core/src/storage.rs:
core/src/stx.rs:
