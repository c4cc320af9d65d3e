#!/usr/bin/env bash
# The bare-metal image's size (docs/perf.md, "Image size"): its text — the read-only bytes it
# loads, code and constants: `size`'s text column — against the budget, then where the code
# comes from.
#
# With LTO most of core and the driver is inlined into a few of the image's functions, so
# symbol sizes (`nm --size-sort -S`) credit the image with what core wrote. The breakdown is
# taken from the line table instead: every byte of `.text` counts for the source file of the
# instruction it belongs to (the innermost inlined one), found with `addr2line`, and is summed
# per crate and, for ringfab's core, per module. Bytes without line information are the
# precompiled `core`/`compiler_builtins` functions (memcpy and the like).
#
# usage: size.sh [ELF] [BUDGET_BYTES] [--breakdown]
# Exit status 1 if the text exceeds the budget (64 KiB by default).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
elf=${1:-"$root/target/bare-metal/x86_64-unknown-none/release/ringfab-bare-metal"}
budget=${2:-65536}
breakdown=${3:-}

text=$(size "$elf" | awk 'NR == 2 { print $1 }')
size -A "$elf" | awk '$1 ~ /^\.(text|rodata|note\.pvh|data|got|bss)$/ { printf "  %-10s %8d bytes\n", $1, $2 }'

if [ "$breakdown" = "--breakdown" ]; then
  code=$(size -A "$elf" | awk '$1 == ".text" { print $2 }')
  # Row addresses of the line table (end-of-sequence rows marked), each with its file.
  rows=$(objdump --dwarf=decodedline "$elf" | awk '$3 ~ /^0x/ { print $3, ($2 == "-" ? "end" : "row") }' \
    | sort -u -k1,1)
  files=$(printf '%s\n' "$rows" | awk '{ print $1 }' | addr2line -e "$elf")
  echo ".text by source, from the line table (bytes, share of .text):"
  paste -d' ' <(printf '%s\n' "$rows") <(printf '%s\n' "$files") | awk -v root="$root" -v code="$code" '
    function hex(s,   n, i) {
      n = 0; s = tolower(s); sub(/^0x/, "", s)
      for (i = 1; i <= length(s); i++) n = n * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
      return n
    }
    function owner(f) {
      sub(/:[0-9?]+.*$/, "", f)
      if (index(f, root "/core/src/") == 1) {
        m = substr(f, length(root "/core/src/") + 1)
        sub(/\.rs$/, "", m)
        return "ringfab (core) " m
      }
      if (index(f, root "/hal/") == 1) return "ringfab-hal"
      if (index(f, root "/drivers/igb/") == 1) return "ringfab-igb"
      if (index(f, root "/drivers/ring/") == 1) return "ringfab-ring"
      if (index(f, root "/examples/bare-metal/") == 1) return "the image (examples/bare-metal)"
      if (f ~ /\/library\/core\//) { sub(/.*\/library\/core\/src\//, "", f); return "Rust core (inlined generics) " f }
      if (f ~ /\/smoltcp-/) return "smoltcp"
      if (f ~ /\/spin-/) return "spin"
      if (f ~ /\/heapless-/) return "heapless"
      if (f ~ /\/tock-registers-/) return "tock-registers"
      return "other"
    }
    {
      a = hex($1)
      if (NR > 1 && kind != "end") { bytes[who] += a - addr; covered += a - addr }
      addr = a; kind = $2; who = owner($3)
    }
    END {
      bytes["no line information (precompiled core, compiler_builtins)"] = code - covered
      for (w in bytes) printf "%8d %5.1f%%  %s\n", bytes[w], 100 * bytes[w] / code, w
    }' | sort -rn
fi

if [ "$text" -gt "$budget" ]; then
  echo "text: $text bytes, over the budget of $budget bytes" >&2
  exit 1
fi
echo "text: $text bytes, within the budget of $budget bytes"
