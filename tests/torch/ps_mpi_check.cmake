# Runs `frugal train --arch ps:servers=2` under a real mpirun (2 workers + 2 servers) and the same
# training with ring all-reduce on 2 ranks, and checks the parameter server's run: exit code, the
# start line, identical replicas, the exact bytes of its pushes, and the same model as all-reduce
# BSP (its test loss to float tolerance); then Local SGD over 1 server against Local SGD over
# all-reduce: the bytes of its model deltas and the same test loss to float tolerance; then FedAvg
# over 1 server against FedAvg over all-reduce: the bytes of its pushes and the same model, bit for
# bit.
#   cmake -DFRUGAL=path -DMPIEXEC=mpirun -DJSON=file -P ps_mpi_check.cmake
set(steps 12)
set(common train --model mlp --batch-size 32 --max-steps ${steps} --momentum 0.9 --nesterov
    --weight-decay 0.0001 --progress none)

function(run_train np json consistent)
  file(REMOVE "${json}")
  execute_process(
    COMMAND ${MPIEXEC} -np ${np} --oversubscribe --mca pml ob1 --mca btl tcp,vader,self
            --timeout 240 ${FRUGAL} ${common} --json ${json} ${ARGN}
    RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  message(STATUS "np ${np} ${ARGN}: exit ${code}\nstdout:\n${out}\nstderr:\n${err}")
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "exit code ${code}")
  endif()
  if(NOT out MATCHES "params consistent +${consistent}")
    message(FATAL_ERROR "the summary table does not say params consistent ${consistent}")
  endif()
  file(STRINGS "${json}" records)
  list(GET records -1 summary)
  set(summary "${summary}" PARENT_SCOPE)
  set(out "${out}" PARENT_SCOPE)
endfunction()

# The summary's bytes_sent_per_worker equals `expected`; `what` names the run in the failure.
function(expect_bytes summary expected what)
  string(JSON bytes GET "${summary}" bytes_sent_per_worker)
  if(NOT bytes EQUAL expected)
    message(FATAL_ERROR "${what}bytes_sent_per_worker = ${bytes}, expected ${expected}")
  endif()
endfunction()

run_train(2 "${JSON}.allreduce" yes)
set(allreduce "${summary}")
run_train(4 "${JSON}" yes --arch ps:servers=2)
set(ps "${summary}")
# The start line names what carries the gradients (the servers), as the summary does, not the
# workers' all-reduce reducer.
if(NOT out MATCHES "frugal train: mlp, 2 workers x batch 32, bsp, ps:servers=2,shard-mb=0.125, lr ")
  message(FATAL_ERROR "the start line does not name the parameter server as the exchange")
endif()

string(JSON arch GET "${ps}" arch)
if(NOT arch STREQUAL "ps:servers=2,shard-mb=0.125")
  message(FATAL_ERROR "arch = '${arch}'")
endif()
string(JSON workers GET "${ps}" workers)
if(NOT workers EQUAL 2)
  message(FATAL_ERROR "workers = ${workers}, expected 2 (4 ranks, 2 of them servers)")
endif()
# mlp: 6 tensors cut into keys of at most 128 KiB (32768 floats): 7 + 1 + 2 + 1 + 1 + 1 = 13 keys; each push
# is a 52-byte header and the floats.
math(EXPR expected "${steps} * (13 * 52 + 4 * 269322)")
expect_bytes("${ps}" "${expected}" "")
string(JSON a GET "${allreduce}" test_loss)
string(JSON b GET "${ps}" test_loss)
# CMake has no floating-point arithmetic: the losses in millionths, compared within 1e-4.
function(micro value out)
  if(NOT value MATCHES "^([0-9]+)\\.([0-9]*)")
    message(FATAL_ERROR "not a plain decimal: ${value}")
  endif()
  set(whole "${CMAKE_MATCH_1}")
  string(SUBSTRING "${CMAKE_MATCH_2}000000" 0 6 fraction)
  string(REGEX REPLACE "^0+([0-9])" "\\1" fraction "${fraction}")
  math(EXPR result "${whole} * 1000000 + ${fraction}")
  set(${out} ${result} PARENT_SCOPE)
endfunction()
# Test losses `a` and `b` within `millionths`.
function(expect_near a b millionths what)
  micro("${a}" a_micro)
  micro("${b}" b_micro)
  math(EXPR difference "${a_micro} - ${b_micro}")
  if(difference GREATER ${millionths} OR difference LESS -${millionths})
    message(FATAL_ERROR "${what}: test loss ${b} over the parameter server, ${a} over all-reduce")
  endif()
endfunction()
expect_near("${a}" "${b}" 100 "bsp")

# Local SGD, period 4: three averages of the workers' models in 12 steps; the last one ends the
# run, so every worker holds the same model.
run_train(2 "${JSON}.local_allreduce" yes --sync local:period=4)
set(local_allreduce "${summary}")
run_train(3 "${JSON}.local" yes --arch ps:servers=1 --sync local:period=4)
set(local_ps "${summary}")
math(EXPR expected "3 * (13 * 52 + 4 * 269322)")
expect_bytes("${local_ps}" "${expected}" "local: ")
string(JSON a GET "${local_allreduce}" test_loss)
string(JSON b GET "${local_ps}" test_loss)
expect_near("${a}" "${b}" 10 "local:period=4")

# FedAvg, 4 clients on 2 workers, all of them every round, 3 rounds: over 1 server the same
# global model as over all-reduce, bit for bit (two workers: the same float sums), and per round
# one push per key and worker (a 52-byte header and the floats).
set(common train --model mlp --batch-size 32 --momentum 0.9 --epochs 3 --progress none
    --sync fedavg:clients=4,fraction=1,local-steps=3)
run_train(2 "${JSON}.fedavg_allreduce" yes)
set(fedavg_allreduce "${summary}")
run_train(3 "${JSON}.fedavg" yes --arch ps:servers=1)
set(fedavg_ps "${summary}")
math(EXPR expected "3 * (13 * 52 + 4 * 269322)")
expect_bytes("${fedavg_ps}" "${expected}" "fedavg: ")
string(JSON a GET "${fedavg_allreduce}" params_hash)
string(JSON b GET "${fedavg_ps}" params_hash)
if(NOT a STREQUAL b)
  message(FATAL_ERROR "fedavg: params hash ${b} over the parameter server, ${a} over all-reduce")
endif()
