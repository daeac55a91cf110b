# BRAID_SANITIZE: build every C/C++ target (library objects, tests, tools, launcher, mp_rank)
# with GCC/Clang sanitizers, e.g. -DBRAID_SANITIZE=address,undefined or -DBRAID_SANITIZE=thread.
# Host-side only: nvcc-compiled code would be uninstrumented (TSan reports races through it that
# are not there), so a sanitizer build needs -DBRAID_ENABLE_CUDA=OFF. tests/run.sh builds both
# trees through tests/sanitize/run.sh, which also sets the runtime options.
set(BRAID_SANITIZE "" CACHE STRING "Sanitizers for every C/C++ target (-fsanitize= list: address,undefined or thread; empty: none)")

if(BRAID_SANITIZE)
  if(BRAID_ENABLE_CUDA)
    message(FATAL_ERROR "BRAID_SANITIZE=${BRAID_SANITIZE} instruments host code only; configure with "
                        "-DBRAID_ENABLE_CUDA=OFF (the kernels' nvcc-compiled code cannot be instrumented)")
  endif()
  string(REPLACE "," ";" braid_sanitizers "${BRAID_SANITIZE}")
  if("thread" IN_LIST braid_sanitizers AND ("address" IN_LIST braid_sanitizers OR "leak" IN_LIST braid_sanitizers))
    message(FATAL_ERROR "BRAID_SANITIZE=${BRAID_SANITIZE}: thread cannot be combined with address or leak; "
                        "build two trees (address,undefined and thread)")
  endif()
  # Frame pointers for readable stacks; a UBSan finding aborts the test instead of only printing.
  set(braid_sanitize_flags -fsanitize=${BRAID_SANITIZE} -fno-omit-frame-pointer)
  if("undefined" IN_LIST braid_sanitizers)
    list(APPEND braid_sanitize_flags -fno-sanitize-recover=undefined)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${braid_sanitize_flags}>")
  add_link_options(${braid_sanitize_flags})
  message(STATUS "Sanitizers: ${braid_sanitize_flags}")
  # tests-asan / tests-tsan: the test programs of that label (braid_sanitizer_labels adds them),
  # so that a tree builds only what `ctest -L <label>` runs.
  add_custom_target(tests-asan)
  add_custom_target(tests-tsan)
endif()

# braid_sanitizer_labels(<gtest target> LABELS <label>... [EXCLUDE <regex>] [ONLY <regex>]): the
# labels for the tests gtest_discover_tests found in <target> (its default TEST_LIST,
# <target>_TESTS), except those whose ctest name matches EXCLUDE (or does not match ONLY). `ctest -L asan` / `ctest -L tsan` pick them in a
# sanitizer tree. LABELS replaces the tests' labels: name the ones gtest_discover_tests gave too.
# (CMake 3.25 cannot pass a list-valued property through gtest_discover_tests, and the tests
# exist only once ctest reads the discovery's output, so a script read after it sets them.)
function(braid_sanitizer_labels target)
  cmake_parse_arguments(arg "" "EXCLUDE;ONLY" "LABELS" ${ARGN})
  string(MD5 variant "${ARGN}")  # a target may be labelled in parts (EXCLUDE/ONLY), one script each
  set(script "${CMAKE_CURRENT_BINARY_DIR}/${target}_sanitizer_labels_${variant}.cmake")
  string(JOIN ";" labels ${arg_LABELS})
  set(body "foreach(t IN LISTS ${target}_TESTS)\n")
  if(arg_EXCLUDE)
    string(APPEND body "  if(t MATCHES [==[${arg_EXCLUDE}]==])\n    continue()\n  endif()\n")
  endif()
  if(arg_ONLY)
    string(APPEND body "  if(NOT t MATCHES [==[${arg_ONLY}]==])\n    continue()\n  endif()\n")
  endif()
  string(APPEND body "  set_tests_properties(\"\${t}\" PROPERTIES LABELS \"${labels}\")\nendforeach()\n")
  file(WRITE "${script}" "${body}")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${script}")
  foreach(label IN LISTS arg_LABELS)
    if(TARGET tests-${label})
      add_dependencies(tests-${label} ${target})
    endif()
  endforeach()
endfunction()
