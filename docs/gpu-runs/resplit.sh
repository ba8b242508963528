#!/usr/bin/env bash
# Re-split the bundle that ../shared/gpu/build-payload.sh left in DEST into parts of SIZE,
# so that one part plus the working tree stays under the 64 MiB a device call carries
# (the tree is about 17 MiB, build-payload's parts 60 MiB). The checksum is unchanged;
# DEST/bin/payload.nparts is rewritten.   usage: resplit.sh DEST [SIZE, default 45M]
set -euo pipefail
DEST=$1 SIZE=${2:-45M}
tmp=$(mktemp -d)
cat "$DEST"/p[0-9][0-9]/payload.tar.xz.part* > "$tmp/payload.tar.xz"
[ "$(sha256sum < "$tmp/payload.tar.xz" | cut -d' ' -f1)" = "$(cat "$DEST/bin/payload.sha256")" ] \
  || { echo "checksum mismatch: rebuild the bundle" >&2; exit 3; }
rm -rf "$DEST"/p[0-9][0-9]
(cd "$tmp" && split -b "$SIZE" -d -a 2 payload.tar.xz payload.tar.xz.part && rm payload.tar.xz)
i=0
for f in "$tmp"/payload.tar.xz.part*; do
  i=$((i + 1)); d=$(printf "%s/p%02d" "$DEST" "$i"); mkdir -p "$d"; mv "$f" "$d/"
done
rmdir "$tmp"
echo "$i" > "$DEST/bin/payload.nparts"
echo "parts: $i of $SIZE in $DEST/p01.."
