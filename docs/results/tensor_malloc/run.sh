#!/bin/bash
# The allocator under LibTorch's tensors: one frugal binary built on glibc's malloc, run as it is
# and with tcmalloc preloaded (what frugal_tensor_malloc links into the executables that train),
# interleaved, 3 rounds: frugal train --np 2 --model cnn --max-steps 100.
#   run.sh FRUGAL_BINARY_ON_GLIBC_MALLOC
set -u
frugal="$1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
for round in 1 2 3; do
  for alloc in glibc tcmalloc; do
    pre=""
    [ "$alloc" = tcmalloc ] && pre="LD_PRELOAD=$tc"
    env $pre "$frugal" train --np 2 --model cnn --max-steps 100 --progress none \
      --json "${alloc}_r$round.jsonl" > "${alloc}_r$round.txt" 2>&1
    echo "$alloc r$round: $(grep -E 'median step|compute / comm / eval|wall time' "${alloc}_r$round.txt" | tr -s ' ' | tr '\n' ' ')"
  done
done
