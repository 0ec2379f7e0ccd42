# The compressed gossip runs of `validate_emulated.sh BUILD gossip-compress` and
# `compare_arch.sh BUILD gossip-compress`: gossip_compress_run NAME sets `flags` (the run's
# strategy flags, as frugal train and frugal simulate take them) and `label`.
gossip_compress_run() {
  case $1 in
    choco) flags=(--arch gossip:topology=ring,algorithm=choco,gamma=0.05 --compress topk:ratio=0.01)
           label="CHOCO-SGD, top-k 1%" ;;
    dcd) flags=(--arch gossip:topology=ring,algorithm=dcd --compress qsgd:levels=64)
         label="DCD-PSGD, QSGD 64 levels" ;;
  esac
}
