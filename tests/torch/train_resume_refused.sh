#!/usr/bin/env bash
# Tier-2 test: `frugal train --resume` refuses a checkpoint of another configuration (model, world
# size, strategy) and a truncated, corrupted or foreign one with one line on stderr naming the file
# and the field, exit code 2, before any rank starts, and changes nothing: the checkpoint's files
# keep their bytes and no --json output is written.
#   train_resume_refused.sh FRUGAL
set -uo pipefail
frugal=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(--batch-size 32 --overlap none --progress none)

fail() {
  echo "FAIL: $*"
  exit 1
}

"$frugal" train --np 2 "${flags[@]}" --model mlp --max-steps 10 --checkpoint-dir "$work/ckpt" \
  --checkpoint-every 5 >"$work/save.out" 2>&1 || { cat "$work/save.out"; fail "saving failed"; }
ckpt="$work/ckpt/ckpt-000000000010"
[ -f "$ckpt/MANIFEST" ] || fail "no checkpoint at step 10"
cp -r "$work/ckpt" "$work/pristine"

# refused NAME EXPECTED_REGEX ARGS... (with --resume): exit 2, one stderr line matching, nothing
# changed in $ckdir.
ckdir=$work/ckpt
refused() {
  local name=$1 expected=$2
  shift 2
  rm -f "$work/out.json"
  local before
  before=$(cd "$ckdir" && find . -type f -print0 | sort -z | xargs -0 md5sum)
  local model=(--model mlp)
  [[ " $* " == *" --model "* ]] && model=()
  "$frugal" train "${flags[@]}" "${model[@]}" --max-steps 20 --json "$work/out.json" "$@" >"$work/$name.out" 2>"$work/$name.err"
  local code=$?
  echo "$name: exit $code: $(cat "$work/$name.err")"
  [ "$code" -eq 2 ] || fail "$name: exit code $code, expected 2"
  [ "$(wc -l <"$work/$name.err")" -eq 1 ] || fail "$name: stderr is not one line"
  grep -Eq -- "$expected" "$work/$name.err" || fail "$name: stderr does not match '$expected'"
  [ -e "$work/out.json" ] && fail "$name: --json was written"
  [ "$(cd "$ckdir" && find . -type f -print0 | sort -z | xargs -0 md5sum)" = "$before" ] ||
    fail "$name: the checkpoint directory changed"
}
restore() { rm -rf "$work/ckpt" && cp -r "$work/pristine" "$work/ckpt"; }

manifest="checkpoint $ckpt/MANIFEST"
refused model "^frugal: --resume $work/ckpt: $manifest: field 'identity/model' is 'mlp', this run has 'cnn'$" \
  --np 2 --resume "$work/ckpt" --model cnn
refused world "$manifest: field 'world_size' is 2, this run has 3$" --np 3 --resume "$work/ckpt"
refused strategy "$manifest: field 'identity/sync' is 'bsp', this run has 'local:period=4" \
  --np 2 --resume "$work/ckpt" --sync local:period=4
refused compressor "$manifest: field 'identity/compress' is 'none', this run has 'efsign:ef=1'" \
  --np 2 --resume "$work/ckpt" --compress efsign

rank1="$ckpt/rank-00001.state"
size=$(stat -c %s "$rank1")
truncate -s $((size - 100)) "$rank1"
refused truncated "checkpoint $rank1: truncated or extended: $((size - 100)) bytes, the manifest says $size$" --np 2 \
  --resume "$work/ckpt"
restore
printf '\x55' | dd of="$rank1" bs=1 seek=200 conv=notrunc status=none
cmp -s "$rank1" "$work/pristine/ckpt-000000000010/rank-00001.state" && fail "the byte was not changed"
refused corrupted "checkpoint $rank1: corrupted: CRC [0-9a-f]{8}, the manifest says [0-9a-f]{8}$" --np 2 \
  --resume "$work/ckpt"
restore
head -c 300 /dev/urandom >"$ckpt/MANIFEST"
refused foreign "$manifest: not a frugal checkpoint file \(bad magic\)$" --np 2 --resume "$work/ckpt"
restore
mkdir -p "$work/empty"
refused empty "--resume $work/empty: no committed checkpoint in $work/empty" --np 2 \
  --resume "$work/empty"

# The parameter server (3 workers, 1 server): the server's file is part of the set; another server
# count, sharding, synchronization or pull compressor is refused.
"$frugal" train --np 4 "${flags[@]}" --model mlp --max-steps 6 --arch ps:servers=1 \
  --checkpoint-dir "$work/ps" --checkpoint-every 3 >"$work/ps_save.out" 2>&1 ||
  { cat "$work/ps_save.out"; fail "saving the parameter server's checkpoint failed"; }
[ -f "$work/ps/ckpt-000000000006/rank-00003.state" ] || fail "no file of the server (rank 3)"
ckdir=$work/ps
manifest="checkpoint $work/ps/ckpt-000000000006/MANIFEST"
refused ps_servers "$manifest: field 'identity/arch' is 'ps:servers=1,shard-mb=0.125', this run has 'ps:servers=2,shard-mb=0.125'$" \
  --np 4 --resume "$work/ps" --arch ps:servers=2
refused ps_sharding "$manifest: field 'identity/arch' is 'ps:servers=1,shard-mb=0.125', this run has 'ps:servers=1,shard-mb=0.01'$" \
  --np 4 --resume "$work/ps" --arch ps:servers=1,shard-mb=0.01
refused ps_sync "$manifest: field 'identity/sync' is 'bsp', this run has 'lag" \
  --np 4 --resume "$work/ps" --arch ps:servers=1 --sync lag
refused ps_pull "$manifest: field 'identity/ps_pull_compress' is '', this run has 'qsgd'$" \
  --np 4 --resume "$work/ps" --arch ps:servers=1 --compress-pull qsgd
echo PASS
