#!/usr/bin/env bash
# Instructions per frame per direction spent in a driver, at batch 1, 8 and 32, measured by
# callgrind (which counts instructions exactly, whatever else the machine does) against the
# NIC's do-nothing device (`ringfab_emu::null`). For each batch it runs the benchmark twice with
# different frame counts and divides the difference, which cancels bring-up and start-up; from
# each direction's inclusive cost it subtracts the device's own (its `complete_tx` /
# `complete_rx`, matched by the name's tail).
#
#   drivers/suite/benches/instructions.sh [igb|e1000e|virtio-net …]   (default: all three;
#                                                                      needs valgrind)
set -euo pipefail
cd "$(dirname "$0")/../../.."
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
nics=("$@")
[ ${#nics[@]} -gt 0 ] || nics=(igb e1000e virtio-net)
bin=$(cargo bench -p ringfab-nic-suite --bench datapath --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]=="datapath" and m.get("executable"): print(m["executable"])')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
incl() { # inclusive instruction count of the function whose name ends in $2, from profile $1
  callgrind_annotate --inclusive=yes "$1" 2>/dev/null | awk -v f="$2" 'index($0, f) && $0 !~ /\[/ {next} index($0, f) {gsub(",", "", $1); print $1; exit}'
}
for nic in "${nics[@]}"; do
  echo "$nic"
  printf '%-6s %14s %14s\n' batch "TX instr/frame" "RX instr/frame"
  for batch in 1 8 32; do
    for frames in 64000 128000; do
      valgrind --tool=callgrind --callgrind-out-file="$out/cg.$batch.$frames" "$bin" --nic "$nic" \
        --null-only --batch "$batch" --frames "$frames" >/dev/null 2>&1
    done
    per() { # per-frame cost of function $1 minus device function $2
      local a b c d
      a=$(incl "$out/cg.$batch.128000" "::$1"); b=$(incl "$out/cg.$batch.64000" "::$1")
      c=$(incl "$out/cg.$batch.128000" "::$2"); d=$(incl "$out/cg.$batch.64000" "::$2")
      python3 -c "print(f'{(($a-$b)-($c-$d))/64000:.1f}')"
    }
    printf '%-6s %14s %14s\n' "$batch" "$(per tx_batch complete_tx)" "$(per rx_batch complete_rx)"
  done
done
