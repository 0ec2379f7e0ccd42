# Installs the build tree BUILD_DIR into WORK_DIR/prefix, configures and builds the consumer
# project CONSUMER_DIR against that prefix only, and runs it. Fails on any step's error, when
# find_package(frugal) resolves to anything but the fresh prefix, or when the consumer's output
# lacks its checks.
foreach(var BUILD_DIR WORK_DIR CONSUMER_DIR WITH_TORCH CXX_COMPILER C_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_test.cmake: -D${var}=... is required")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/consumer-build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run_step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${name} failed (${code}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(NOT EXISTS ${prefix}/include/frugal/status.h)
  message(FATAL_ERROR "the install put no include/frugal/status.h under ${prefix}")
endif()

set(configure_args -S ${CONSUMER_DIR} -B ${consumer_build} -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCONSUMER_WITH_TORCH=${WITH_TORCH})
if(COMPILER_LAUNCHER)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER_LAUNCHER=${COMPILER_LAUNCHER})
endif()
run_step("configuring the consumer" ${CMAKE_COMMAND} ${configure_args})
string(REGEX MATCH "frugal_DIR=[^\n]*" found "${step_output}")
if(NOT found STREQUAL "frugal_DIR=${prefix}/lib/cmake/frugal")
  message(FATAL_ERROR "find_package(frugal) did not use the fresh prefix: '${found}'")
endif()

run_step("building the consumer" ${CMAKE_COMMAND} --build ${consumer_build} -j2)
run_step("running the consumer" ${consumer_build}/consumer)
message("${step_output}")
set(expected "allreduce over 2 ranks: 3 3 3 3\ncompressors: 22\n")
if(WITH_TORCH)
  string(APPEND expected "torch: parameters broadcast from rank 0, consistent\n")
endif()
if(NOT step_output STREQUAL expected)
  message(FATAL_ERROR "the consumer printed\n${step_output}\ninstead of\n${expected}")
endif()
