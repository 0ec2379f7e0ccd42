# Shell helpers of the tests that run `frugal train` under a real mpirun and keep each run's
# output in "$work"/NAME.out. Sourced; the sourcing script sets frugal, mpirun, np and work.

run() {  # FLAGS...: frugal train on np ranks, pinned to the TCP and shared-memory transports
  "$mpirun" -np "$np" --oversubscribe --mca pml ob1 --mca btl tcp,vader,self --timeout 240 \
    "$frugal" train --progress none "$@"
}

fail() {  # MESSAGE: says why, shows every run's output, and ends the test
  echo "FAIL: $*"
  for f in "$work"/*.out; do echo "--- $f"; cat "$f"; done
  exit 1
}
