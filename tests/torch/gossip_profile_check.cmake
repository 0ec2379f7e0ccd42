# A gossip run's trace is a compute profile: `frugal train --np 2 --arch gossip:topology=ring
# --timeline TRACE` (D-PSGD keeps its gradients, the trace marks each one ready; its start line
# names the gossip spec once), then `frugal simulate --timeline TRACE --model mlp` takes its
# per-layer times from that trace and prints the step of D-PSGD on 2 workers.
#   cmake -DFRUGAL=path -DTRACE=file -P gossip_profile_check.cmake
file(REMOVE "${TRACE}")
execute_process(
  COMMAND ${FRUGAL} train --np 2 --model mlp --batch-size 32 --max-steps 6
          --arch gossip:topology=ring --progress none --timeline ${TRACE}
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
message(STATUS "train: exit ${code}\nstdout:\n${out}\nstderr:\n${err}")
if(NOT code EQUAL 0)
  message(FATAL_ERROR "frugal train: exit code ${code}")
endif()
# The start line names the synchronization, then the gossip spec once, as what carries the
# exchanges.
set(start "frugal train: mlp, 2 workers x batch 32, bsp, ")
string(APPEND start "gossip:topology=ring,mixing=metropolis,algorithm=dpsgd,order=cta, lr ")
string(FIND "${out}" "\n${start}" at)
if(at EQUAL -1 AND NOT out MATCHES "^${start}")
  message(FATAL_ERROR "no start line '${start}...'")
endif()
string(REGEX MATCHALL "gossip:topology" specs "${out}")
list(LENGTH specs count)
if(NOT count EQUAL 2)
  message(FATAL_ERROR "the gossip spec appears ${count} times, expected once on the start line "
                      "and once in the summary's reduction row")
endif()
execute_process(
  COMMAND ${FRUGAL} simulate --timeline ${TRACE} --model mlp --workers 2 --bandwidth-gbit 1
          --arch gossip:topology=ring
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
message(STATUS "simulate: exit ${code}\nstdout:\n${out}\nstderr:\n${err}")
if(NOT code EQUAL 0)
  message(FATAL_ERROR "frugal simulate: exit code ${code}")
endif()
# method, Gbit/s, workers, step (ms), compute (ms): a compute above zero, from the trace.
if(NOT out MATCHES "\nnone +1 +2 +[0-9]+\\.[0-9]+ +([0-9]+\\.[0-9]+)")
  message(FATAL_ERROR "no simulated step of 2 workers at 1 Gbit/s")
endif()
if(NOT CMAKE_MATCH_1 GREATER 0)
  message(FATAL_ERROR "simulated compute ${CMAKE_MATCH_1} ms, expected > 0")
endif()
