#!/usr/bin/env bash
# Instructions per entry of the CQ read on an endpoint, at batch 1, 16 and 64, measured by
# callgrind against the NIC's do-nothing device (`ringfab_emu::null`), Msg format. As
# drivers/suite/benches/instructions.sh: each figure runs the benchmark twice with different entry
# counts and divides the difference, which cancels bring-up and start-up.
#
#   read       — inclusive cost of `cq_read_all` (every `cq.read` call and the loop around it)
#                per entry, with the receives already complete;
#   read_owned — the same for `cq_read_owned_all` (`cq.read_owned`: sources and buffers back);
#   cycle      — inclusive cost of `cq_cycle` (post a batch of receives, the doorbell with the
#                last, read them back with `read_owned`) per message, minus the device's own
#                `complete_rx`; also split into post and read;
#   send       — inclusive cost of `cq_send_batch` (send a batch with `Endpoint::sendmsg`, the
#                doorbell with the last) per message, minus the device's own `complete_tx`
#                (the benchmark's `--mode send`);
#   send read  — inclusive cost of `cq_read_owned_all` in the same send measurement per message:
#                the read of the send completions with `read_owned`, the buffers handed back;
#   empty      — inclusive cost of `cq_read_empty` per call: `cq.read` of the receive CQ with
#                room for a batch when nothing has completed (`Err(Again)`), what a polling loop
#                pays per call while it waits (the benchmark's `--mode empty`; nothing posted).
#
# With --raw, the raw layer instead (`Path::post_recvs`, `cq.read`): read and cycle. With
# --one-cq, the endpoint's sends report to its receive CQ (the benchmark's `--one-cq`). With
# --plain, the endpoint on plain IPv4/UDP (the benchmark's `--layer plain`; no send column:
# its sends wait for ARP), the null igb and e1000e devices marking the IPv4 header checksum
# verified as their models do; --plain --unmarked without the marks (the lane sums the IPv4
# header). With --send, only the send measurement: send and send read; --send-batch, the same
# with each batch sent by one `Endpoint::send_batch` call (the benchmark's `--post batch` in
# its send mode). With --empty, only the
# empty read (the last column of the endpoint and plain tables). With --post-batch, only the
# cycle, its receives posted with one `Endpoint::recv_batch` call per batch instead of
# `recvmsg` per buffer (the benchmark's `--post batch`): cycle, post and read, per message;
# --post-each, the same columns with `recvmsg` per buffer, to compare (either with --plain: on
# plain UDP).
#
#   core/benches/instructions.sh [--raw|--one-cq|--plain [--unmarked]|--send|--send-batch|--empty|--post-batch|--post-each [--plain]] [igb|e1000e|virtio-net …]
#   (default: igb; needs valgrind)
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
layer=endpoint extra=() only_send= only_empty= only_cycle=
if [ "${1:-}" = --send ]; then only_send=each; shift; fi
if [ "${1:-}" = --send-batch ]; then only_send=batch; extra+=(--post batch); shift; fi
if [ "${1:-}" = --empty ]; then only_empty=1; shift; fi
if [ "${1:-}" = --post-batch ]; then only_cycle=batch; shift; fi
if [ "${1:-}" = --post-each ]; then only_cycle=each; shift; fi
if [ "${1:-}" = --raw ]; then layer=raw; shift; fi
if [ "${1:-}" = --plain ]; then layer=plain; shift; fi
if [ "$layer" = plain ] && [ "${1:-}" = --unmarked ]; then extra=(--unmarked); shift; fi
if [ "${1:-}" = --one-cq ]; then extra=(--one-cq); shift; fi
if [ -n "$only_cycle" ]; then extra+=(--post "$only_cycle"); fi
nics=("$@")
[ ${#nics[@]} -gt 0 ] || nics=(igb)
bin=$(cargo bench -p ringfab --bench cq --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]=="cq" and m.get("executable"): print(m["executable"])')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
incl() { # inclusive instruction count of the function whose name contains $2, from profile $1
  # The function list only (--auto=no: no annotated source, whose lines also name functions).
  # The list names a function's object file only when it changes from the line before, so the
  # first line naming the function is taken whatever follows it.
  callgrind_annotate --auto=no --inclusive=yes "$1" 2>/dev/null |
    awk -v f="$2" 'index($0, f) {gsub(",", "", $1); print $1; exit}'
}
small=76800 large=153600 # multiples of 192 (the read measurements' round) and of every batch
per() { # per-entry cost in profiles $1.$small / $1.$large of function $2 minus function $3 (optional)
  local a b c=0 d=0
  a=$(incl "$1.$large" "::$2"); b=$(incl "$1.$small" "::$2")
  if [ -n "${3:-}" ]; then c=$(incl "$1.$large" "::$3"); d=$(incl "$1.$small" "::$3"); fi
  python3 -c "print(f'{(($a-$b)-(${c:-0}-${d:-0}))/($large-$small):.1f}')"
}
profile() { # profile $1 of mode $2 at batch $3 on NIC $4
  for n in $small $large; do
    valgrind --tool=callgrind --callgrind-out-file="$1.$n" "$bin" --layer "$layer" --nic "$4" \
      --mode "$2" --format msg --batch "$3" --entries "$n" "${extra[@]}" >/dev/null 2>&1
  done
}
for nic in "${nics[@]}"; do
  echo "$nic ($layer${extra:+, ${extra[*]#--}})"
  if [ -n "$only_send" ]; then
    printf '%-6s %10s %14s\n' batch "send/msg" "send read/msg"
    for batch in 1 16 64; do
      profile "$out/send.$batch" send "$batch" "$nic"
      # One `send_batch` call per batch is `cq_resend_batch`, `sendmsg` per buffer `cq_send_batch`.
      send_fn=cq_send_batch
      [ "$only_send" = batch ] && send_fn=cq_resend_batch
      printf '%-6s %10s %14s\n' "$batch" \
        "$(per "$out/send.$batch" "$send_fn" complete_tx)" \
        "$(per "$out/send.$batch" cq_read_owned_all)"
    done
    continue
  fi
  if [ -n "$only_empty" ]; then
    printf '%-6s %12s\n' batch "empty/call"
    for batch in 1 16 64; do
      profile "$out/empty.$batch" empty "$batch" "$nic"
      printf '%-6s %12s\n' "$batch" "$(per "$out/empty.$batch" cq_read_empty)"
    done
    continue
  fi
  if [ -n "$only_cycle" ]; then
    printf '%-6s %14s %13s %13s\n' batch "cycle/msg" "(post/msg" "read/msg)"
    for batch in 1 16 64; do
      profile "$out/cycle.$batch" cycle "$batch" "$nic"
      # The batched post is `cq_repost_batch`, the per-buffer one `cq_post_batch`.
      post_fn=cq_post_batch
      [ "$only_cycle" = batch ] && post_fn=cq_repost_batch
      printf '%-6s %14s %13s %13s\n' "$batch" \
        "$(per "$out/cycle.$batch" cq_cycle complete_rx)" \
        "$(per "$out/cycle.$batch" "$post_fn" complete_rx)" \
        "$(per "$out/cycle.$batch" cq_read_owned_all)"
    done
    continue
  fi
  if [ "$layer" = raw ]; then
    printf '%-6s %12s %14s %13s %13s\n' batch "read/entry" "cycle/op" "(post/op" "read/op)"
  else
    printf '%-6s %12s %16s %14s %13s %13s %10s %14s %11s\n' batch "read/entry" "read_owned/entry" "cycle/msg" "(post/msg" "read/msg)" "send/msg" "send read/msg" "empty/call"
  fi
  for batch in 1 16 64; do
    profile "$out/read.$batch" read "$batch" "$nic"
    profile "$out/cycle.$batch" cycle "$batch" "$nic"
    if [ "$layer" = raw ]; then
      printf '%-6s %12s %14s %13s %13s\n' "$batch" \
        "$(per "$out/read.$batch" cq_read_all)" \
        "$(per "$out/cycle.$batch" cq_raw_cycle complete_rx)" \
        "$(per "$out/cycle.$batch" cq_raw_post_batch complete_rx)" \
        "$(per "$out/cycle.$batch" cq_read_all)"
    else
      profile "$out/owned.$batch" read-owned "$batch" "$nic"
      profile "$out/empty.$batch" empty "$batch" "$nic"
      send=- send_read=-
      if [ "$layer" = endpoint ]; then
        profile "$out/send.$batch" send "$batch" "$nic"
        send=$(per "$out/send.$batch" cq_send_batch complete_tx)
        send_read=$(per "$out/send.$batch" cq_read_owned_all)
      fi
      printf '%-6s %12s %16s %14s %13s %13s %10s %14s %11s\n' "$batch" \
        "$(per "$out/read.$batch" cq_read_all)" \
        "$(per "$out/owned.$batch" cq_read_owned_all)" \
        "$(per "$out/cycle.$batch" cq_cycle complete_rx)" \
        "$(per "$out/cycle.$batch" cq_post_batch complete_rx)" \
        "$(per "$out/cycle.$batch" cq_read_owned_all)" \
        "$send" "$send_read" \
        "$(per "$out/empty.$batch" cq_read_empty)"
    fi
  done
done
