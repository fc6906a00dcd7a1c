# The layering check must be able to fail: runs cmake/check_layers.cmake on small trees written
# here (an upward include, a relative include across directories, a cycle, a clean tree) and on
# the real source tree, and checks each verdict and message.
# cmake -DCHECKER=... -DWORK=<scratch dir> -DREAL_LAYERS=... -DREAL_ROOT=... -P test_check_layers.cmake
cmake_minimum_required(VERSION 3.25)
set(failures 0)

# check(<case> <layers text> <expect: pass | fail> <regex the output must match or "">) runs the
# checker on ${WORK}/<case> with the files written before the call.
function(check case layers expect regex)
  file(WRITE "${WORK}/${case}/layers.txt" "${layers}")
  execute_process(COMMAND ${CMAKE_COMMAND} -DLAYERS=${WORK}/${case}/layers.txt -DROOT=${WORK}/${case}
                          -P ${CHECKER}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(verdict pass)
  if(NOT rc EQUAL 0)
    set(verdict fail)
  endif()
  if(NOT verdict STREQUAL expect OR (regex AND NOT "${out}${err}" MATCHES "${regex}"))
    message(SEND_ERROR "case ${case}: expected ${expect} matching '${regex}', got ${verdict}:\n${out}${err}")
    math(EXPR failures "${failures} + 1")
    set(failures ${failures} PARENT_SCOPE)
  else()
    message(STATUS "case ${case}: ${verdict} as expected")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK}")
set(three "util|util|\ntensor|tensor|util\nmodels|models|tensor\n")
foreach(case clean upward relative)
  file(WRITE "${WORK}/${case}/include/qkv/util/error.h" "#pragma once\n")
  file(WRITE "${WORK}/${case}/include/qkv/models/model.h" "#pragma once\n#include \"qkv/util/error.h\"\n")
  file(WRITE "${WORK}/${case}/src/models/model.cpp" "#include \"qkv/models/model.h\"\n#include <vector>\n")
endforeach()
file(WRITE "${WORK}/clean/src/tensor/tensor.cpp" "#include \"qkv/util/error.h\"\n")
file(WRITE "${WORK}/upward/src/tensor/tensor.cpp" "#include \"qkv/util/error.h\"\n#include \"qkv/models/model.h\"\n")
file(WRITE "${WORK}/relative/src/tensor/tensor.cpp" "#include \"../models/model_private.h\"\n")
check(clean "${three}" pass "")
check(upward "${three}" fail "src/tensor/tensor.cpp \\(layer tensor\\): includes \"qkv/models/model.h\" of layer models")
check(relative "${three}" fail "src/tensor/tensor.cpp: relative include \"../models/model_private.h\"")
file(WRITE "${WORK}/cycle/src/util/a.cpp" "\n")
check(cycle "util|util|tensor\ntensor|tensor|util\n" fail "cycle")

execute_process(COMMAND ${CMAKE_COMMAND} -DLAYERS=${REAL_LAYERS} -DROOT=${REAL_ROOT} -P ${CHECKER}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(SEND_ERROR "the source tree breaks the layering:\n${out}${err}")
  math(EXPR failures "${failures} + 1")
endif()
if(failures GREATER 0)
  message(FATAL_ERROR "layering check: ${failures} case(s) wrong")
endif()
