# Shared by the validation scripts (validate_emulated.sh, compare_arch.sh, gossip_compress/run.sh,
# hosts8/run.sh, hosts8/ps_duplex/idle/run.sh, duplex/run.sh), sourced.
sim_runs_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# sim_runs_start FRUGAL OUT: F, the binary's absolute path; OUT made and entered (the records are
# written there); mpirun allowed to run as root.
sim_runs_start() {
  F="$(readlink -f "$1")"
  mkdir -p "$2" && cd "$2"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

# gossip_compress_run NAME (choco, dcd) sets `flags` (the run's strategy flags, as frugal train and
# frugal simulate take them), `label`, and `rates` (the `frugal bench compress` records of its
# compressor, for simulate --bench-compress).
gossip_compress_run() {
  case $1 in
    choco) flags=(--arch gossip:topology=ring,algorithm=choco,gamma=0.05 --compress topk:ratio=0.01)
           label="CHOCO-SGD, top-k 1%"
           rates="$sim_runs_dir/../compress_bench/bench_sparse.jsonl" ;;
    dcd) flags=(--arch gossip:topology=ring,algorithm=dcd --compress qsgd:levels=64)
         label="DCD-PSGD, QSGD 64 levels"
         rates="$sim_runs_dir/../compress_bench/bench_quant.jsonl" ;;
  esac
}

# summary_ms RECORD: a run's median step, mean step (global batch over samples per second) and
# compute per step, in ms, from its summary.
summary_ms() {
  grep '"event":"summary"' "$1" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(
    d["step_seconds_median"]*1e3, d["global_batch"]/d["samples_per_second"]*1e3,
    d["compute_seconds"]/d["steps"]*1e3)'
}

# err SIMULATED MEASURED: the error in percent, signed.
err() { /usr/bin/python3 -c "print(f'{($1-$2)/$2*100:+.1f}%')"; }
