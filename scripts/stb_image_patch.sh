#!/usr/bin/env bash
# stb_image_patch.sh SRC DST: DST = SRC (libstb-dev's stb_image.h, v2.27) with three guards
# of upstream stb_image 2.28 in its JPEG entropy decoder, so that a corrupt scan cannot
# reach undefined behaviour (src/image.c includes DST, never SRC):
#   - stbi__extend_receive, stbi__jpeg_get_bits, stbi__jpeg_get_bit: when the scan's data
#     ends (a marker) in the middle of a code, return 0 instead of consuming bits that are
#     not there. v2.27 drives code_bits negative, and the next refill shifts by 32 or more
#     (a crafted CMYK JPEG: UBSan "shift exponent 32" in stbi__grow_buffer_unsafe).
#   - the fast AC paths: a combined code + magnitude longer than the bits available is an
#     error ("bad huffman code"), for the same reason.
#   - stbi__jpeg_huff_decode: a symbol index outside the 256-entry table is an error.
#   - a DHT table of more than 256 codes is an error ("bad DHT header"): v2.27 writes
#     past its 257-entry size table (src/image.c's marker walk rejects such a table
#     too, but stb_image must be safe on its own: it may split a file into segments
#     differently).
# and one of ours: the decoder state (stbi__jpeg: Huffman and quantisation tables) is
# allocated zeroed (calloc; STBI_FREE is free), so a table the file never defines reads
# as zeros, not as uninitialised memory (src/image.c rejects scans using an undefined
# Huffman table; this keeps anything it misses deterministic).
# Each guard is checked to have been inserted where v2.27 needs it; a header whose text
# differs (another stb version) stops the build with a message instead of going unpatched.
set -euo pipefail
src=$1 dst=$2
[[ -r $src ]] || { echo "stb_image_patch.sh: $src not found (install libstb-dev, or run scripts/deps.sh)" >&2; exit 1; }
sed -e 's/^\(   if (j->code_bits < n) stbi__grow_buffer_unsafe(j);\)$/\1\n   if (j->code_bits < n) return 0; \/\/ vitrain: out of bits (upstream 2.28)/' \
    -e 's/^\(   if (j->code_bits < 1) stbi__grow_buffer_unsafe(j);\)$/\1\n   if (j->code_bits < 1) return 0; \/\/ vitrain: out of bits (upstream 2.28)/' \
    -e 's/^\( *\)\(s = r & 15; \/\/ combined length\)$/\1\2\n\1if (s > j->code_bits) return stbi__err("bad huffman code", "Combined length longer than code bits available"); \/\/ vitrain (upstream 2.28)/' \
    -e 's/^\( *\)\(L -= 17;\)$/\1if (n > 256) return stbi__err("bad DHT header", "Corrupt JPEG"); \/\/ vitrain (upstream 2.28)\n\1\2/' \
    -e 's/stbi__malloc(sizeof(stbi__jpeg))/calloc(1, sizeof(stbi__jpeg)) \/* vitrain: zeroed tables *\//' \
    -e 's/^\(   c = ((j->code_buffer >> (32 - k)) & stbi__bmask\[k\]) + h->delta\[k\];\)$/\1\n   if (c < 0 || c >= 256) return -1; \/\/ vitrain: symbol id out of bounds (upstream 2.28)/' \
    "$src" > "$dst.tmp"
count() { grep -c -F -- "$1" "$dst.tmp" || true; }
ok=1
[[ $(count 'if (j->code_bits < n) return 0; // vitrain') -eq 2 ]] || ok=0
[[ $(count 'if (j->code_bits < 1) return 0; // vitrain') -eq 1 ]] || ok=0
[[ $(count 'Combined length longer than code bits available"); // vitrain') -eq 2 ]] || ok=0
[[ $(count 'if (c < 0 || c >= 256) return -1; // vitrain') -eq 1 ]] || ok=0
[[ $(count 'calloc(1, sizeof(stbi__jpeg)) /* vitrain: zeroed tables */') -eq 3 ]] || ok=0
[[ $(count 'if (n > 256) return stbi__err("bad DHT header", "Corrupt JPEG"); // vitrain') -eq 1 ]] || ok=0
if [[ $ok -ne 1 ]]; then
    rm -f "$dst.tmp"
    echo "stb_image_patch.sh: $src is not the stb_image v2.27 text the guards are written for;" \
         "check its JPEG entropy decoder and update this script" >&2
    exit 1
fi
mv "$dst.tmp" "$dst"
