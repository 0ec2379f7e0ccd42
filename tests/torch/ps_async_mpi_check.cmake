# Runs `frugal train --arch ps:servers=1` under a real mpirun (3 workers + 1 server) with the
# consistency models where workers go at their own pace (asp, ssp, backup workers; rank 1 three
# times slower) and with lag, and checks each run: exit code, the summary's counts against the
# bytes of the pushes (keys of at most 4 MB: every push of a step is one of the model's 6 keys; a
# dense step is 6 x 52 + 4 x 269322 bytes, so 3 workers' pushes of P keys make P / 6 x 359200
# bytes per worker),
# the staleness figures in the summary and in every epoch record, and replicas that may differ
# (asp, ssp, backup: the averaged model is evaluated) or are identical (lag); asp's
# --staleness-policy drop:T and scale.
#   cmake -DFRUGAL=path -DMPIEXEC=mpirun -DJSON=file -P ps_async_mpi_check.cmake
set(common train --model mlp --batch-size 32 --epochs 2 --max-steps 150 --progress none
    --arch ps:servers=1,shard-mb=4)

function(run_train json sync)
  file(REMOVE "${json}")
  execute_process(
    COMMAND ${MPIEXEC} -np 4 --oversubscribe --mca pml ob1 --mca btl tcp,vader,self
            --timeout 240 ${FRUGAL} ${common} --json ${json} --sync ${sync} ${ARGN}
    RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  message(STATUS "--sync ${sync} ${ARGN}: exit ${code}\nstdout:\n${out}\nstderr:\n${err}")
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "exit code ${code}")
  endif()
  file(STRINGS "${json}" records)
  foreach(record IN LISTS records)
    string(JSON event GET "${record}" event)
    if(event STREQUAL "epoch")
      string(JSON p95 ERROR_VARIABLE missing GET "${record}" staleness_p95)
      if(missing)
        message(FATAL_ERROR "an epoch record without staleness_p95: ${record}")
      endif()
    endif()
  endforeach()
  list(GET records -1 summary)
  set(summary "${summary}" PARENT_SCOPE)
  set(out "${out}" PARENT_SCOPE)
endfunction()

function(pushes summary out)
  set(total 0)
  foreach(w 0 1 2)
    foreach(what applied dropped)
      string(JSON n GET "${summary}" worker${w}_${what})
      math(EXPR total "${total} + ${n}")
    endforeach()
  endforeach()
  set(${out} ${total} PARENT_SCOPE)
endfunction()

foreach(sync asp ssp:staleness=2 backup:workers=1)
  run_train("${JSON}" ${sync} --straggler 1:3)
  if(NOT out MATCHES "replicas differ between averages; the averaged model is evaluated")
    message(FATAL_ERROR "--sync ${sync}: the replicas may differ, the summary should say so")
  endif()
  string(JSON applied GET "${summary}" ps_pushes_applied)
  string(JSON dropped GET "${summary}" ps_pushes_dropped)
  pushes("${summary}" total)
  math(EXPR sum "${applied} + ${dropped}")
  if(NOT sum EQUAL total)
    message(FATAL_ERROR "--sync ${sync}: ${applied} + ${dropped} pushes, the workers' sum ${total}")
  endif()
  math(EXPR remainder "${total} % 6")
  math(EXPR expected "${total} / 6 * 359200")
  string(JSON bytes GET "${summary}" bytes_sent_per_worker)
  if(NOT remainder EQUAL 0 OR NOT bytes EQUAL expected)
    message(FATAL_ERROR "--sync ${sync}: ${total} pushes, bytes_sent_per_worker ${bytes}, "
                        "expected ${expected}")
  endif()
  string(JSON max GET "${summary}" staleness_max)
  if(sync MATCHES "^backup" AND NOT max EQUAL 0)
    message(FATAL_ERROR "backup applied a stale gradient (staleness_max ${max})")
  endif()
endforeach()

# --staleness-policy under asp with the straggler: drop:1 applies no update staler than 1 and
# drops some (the straggler's pushes come several versions late); scale applies them all.
run_train("${JSON}" asp --straggler 1:3 --staleness-policy drop:1)
string(JSON max GET "${summary}" staleness_max)
string(JSON dropped GET "${summary}" ps_pushes_dropped)
if(max GREATER 1 OR dropped EQUAL 0)
  message(FATAL_ERROR "drop:1: staleness_max ${max} (at most 1), ${dropped} pushes dropped (some)")
endif()
run_train("${JSON}" asp --straggler 1:3 --staleness-policy scale)
string(JSON max GET "${summary}" staleness_max)
string(JSON dropped GET "${summary}" ps_pushes_dropped)
if(max LESS 2 OR NOT dropped EQUAL 0)
  message(FATAL_ERROR "scale: staleness_max ${max} (stale pushes applied), ${dropped} dropped (none)")
endif()

run_train("${JSON}" lag)
if(NOT out MATCHES "params consistent +yes")
  message(FATAL_ERROR "--sync lag: the replicas should be identical")
endif()
string(JSON skipped GET "${summary}" ps_pushes_skipped)
string(JSON applied GET "${summary}" ps_pushes_applied)
math(EXPR total "${skipped} + ${applied}")
if(NOT total EQUAL 2700)  # 150 steps x 3 workers x 6 keys
  message(FATAL_ERROR "--sync lag: ${applied} uploads + ${skipped} skips, expected 2700 pushes")
endif()
