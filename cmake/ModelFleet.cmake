# Small helpers so every target is declared the same way.

set(MODELFLEET_WARNINGS -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
if(CMAKE_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # In a unity batch every source is an included file, so gcc takes a class of a .cc that holds a
  # type of that file's anonymous namespace for a header's class shared between translation
  # units, which it is not.
  list(APPEND MODELFLEET_WARNINGS -Wno-subobject-linkage)
endif()
if(MODELFLEET_WERROR)
  list(APPEND MODELFLEET_WARNINGS -Werror)
endif()
file(REMOVE ${CMAKE_BINARY_DIR}/fuzz_targets.txt)
set(MODELFLEET_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
# The sanitized tests and corpus replays are compiled without optimisation: they run small inputs,
# and -O0 compiles them about three times faster than -O2, which is most of a cold CI build's time.
set(MODELFLEET_SANITIZE_COMPILE_FLAGS ${MODELFLEET_SANITIZE_FLAGS} -O0)

# Targets declared after this in the calling directory and its subdirectories compile at -O1: code
# off the serving path (the unit tests, the operator, the Kubernetes client, the local cluster's
# tools), where -O2 costs about 40 % more compile time and buys nothing a user would measure.
# The runtime, the server, the router, the sync sidecar and the libraries they share keep -O2.
macro(mf_compile_off_serving_path)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-O1>)
endmacro()

function(mf_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${MODELFLEET_WARNINGS}>)
endfunction()

# mf_library(NAME SOURCES ... DEPS ...): a static library rooted at src/ for includes.
function(mf_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${A_SOURCES})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR}/src ${CMAKE_BINARY_DIR}/src)
  target_link_libraries(${name} PUBLIC ${A_DEPS})
  mf_warnings(${name})
endfunction()

# mf_binary(NAME SOURCES ... DEPS ...)
function(mf_binary name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${A_DEPS})
  mf_warnings(${name})
endfunction()

# mf_test(NAME SOURCES ... DEPS ... [TIMEOUT s] [LABELS ...]): a GoogleTest binary run by ctest.
function(mf_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 120)
  endif()
  add_executable(${name} ${A_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  mf_warnings(${name})
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS "unit;${A_LABELS}")
endfunction()

# mf_test_without_sanitizers(NAME ...): mf_test's arguments, for tests a sanitized twin
# (mf_sanitized_test) runs too: built only when MODELFLEET_SANITIZED_TESTS is off, so the tests
# still run there, and a default build compiles them once.
function(mf_test_without_sanitizers name)
  if(MODELFLEET_SANITIZED_TESTS)
    return()
  endif()
  mf_test(${name} ${ARGN})
endfunction()

# A test binary whose files each define small helpers of the same names in their anonymous
# namespaces, which one unity batch cannot hold, compiles file by file (the CUDA backend's tests).
# Fuzzers do too: most have one file.
function(mf_tests_file_by_file target)
  set_target_properties(${target} PROPERTIES UNITY_BUILD OFF)
endfunction()

# A sanitized test or fuzzer compiles its parser sources itself (instrumented) and may still link a
# library built from the same sources. In a unity build a library's archive member holds a whole
# batch of files, so one symbol it is pulled in for brings the batch's other definitions along,
# the parser's too: the test's own (instrumented) definitions, linked first, are the ones kept.
function(mf_allow_own_parser_copies target)
  if(CMAKE_UNITY_BUILD)
    target_link_options(${target} PRIVATE -Wl,--allow-multiple-definition)
  endif()
endfunction()

# mf_sanitized_test(NAME SOURCES ... DEPS ... [TIMEOUT s]): a test of code that parses untrusted
# bytes, built with ASan+UBSan. SOURCES must list the parser sources themselves (not only a library
# that contains them) so that the parser is instrumented; DEPS should be uninstrumented third-party
# libraries or header-only targets.
function(mf_sanitized_test name)
  if(NOT MODELFLEET_SANITIZED_TESTS)
    return()
  endif()
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;DEPS" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  add_executable(${name} ${A_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_BINARY_DIR}/src ${CMAKE_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_options(${name} PRIVATE ${MODELFLEET_SANITIZE_COMPILE_FLAGS})
  target_link_options(${name} PRIVATE ${MODELFLEET_SANITIZE_FLAGS})
  mf_allow_own_parser_copies(${name})
  mf_warnings(${name})
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS "sanitized"
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1;UBSAN_OPTIONS=print_stacktrace=1")
endfunction()

# mf_sanitized_library(NAME SOURCES ... DEPS ...): parser sources compiled once with the sanitizers
# (or with libFuzzer's coverage in scripts/fuzz.sh's build), for every sanitized test and fuzz
# target of those parsers to link instead of each compiling its own copy (up to six did). An object
# library: its objects come before any archive on a consumer's link line, so they are the
# definitions kept where the consumer also links a plain library built from the same sources.
function(mf_sanitized_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} OBJECT EXCLUDE_FROM_ALL ${A_SOURCES})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR}/src ${CMAKE_BINARY_DIR}/src ${CMAKE_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${A_DEPS})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND MODELFLEET_LIBFUZZER)
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer-no-link,address,undefined)
  elseif(MODELFLEET_SANITIZED_TESTS)
    target_compile_options(${name} PRIVATE ${MODELFLEET_SANITIZE_COMPILE_FLAGS})
  endif()
  mf_warnings(${name})
endfunction()

# The replay driver of every fuzz target's corpus test (gcc builds), compiled once.
if(NOT (CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND MODELFLEET_LIBFUZZER))
  add_library(mf_fuzz_replay_main OBJECT ${CMAKE_SOURCE_DIR}/tests/fuzz/replay_main.cc)
  if(MODELFLEET_SANITIZED_TESTS)
    target_compile_options(mf_fuzz_replay_main PRIVATE ${MODELFLEET_SANITIZE_COMPILE_FLAGS})
  endif()
  mf_warnings(mf_fuzz_replay_main)
endif()

# mf_fuzzer(NAME SOURCES ... DEPS ... CORPUS dir): a libFuzzer entry point (LLVMFuzzerTestOneInput).
# With gcc (the main build) it links a replay driver and ctest runs it with ASan+UBSan over the
# seed corpus, so every committed crash reproducer stays fixed. scripts/fuzz.sh builds the same
# sources with clang -fsanitize=fuzzer for real fuzzing.
function(mf_fuzzer name)
  cmake_parse_arguments(A "" "CORPUS" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_BINARY_DIR}/src ${CMAKE_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${A_DEPS})
  mf_tests_file_by_file(${name})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND MODELFLEET_LIBFUZZER)
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    mf_allow_own_parser_copies(${name})
    # scripts/fuzz.sh reads "target binary corpus" lines from here.
    file(APPEND ${CMAKE_BINARY_DIR}/fuzz_targets.txt "${name} ${CMAKE_CURRENT_BINARY_DIR}/${name} ${A_CORPUS}\n")
  else()
    target_link_libraries(${name} PRIVATE mf_fuzz_replay_main)
    mf_allow_own_parser_copies(${name})
    if(MODELFLEET_SANITIZED_TESTS)
      target_compile_options(${name} PRIVATE ${MODELFLEET_SANITIZE_COMPILE_FLAGS})
      target_link_options(${name} PRIVATE ${MODELFLEET_SANITIZE_FLAGS})
    endif()
    add_test(NAME ${name}_corpus COMMAND ${name} ${A_CORPUS})
    set_tests_properties(${name}_corpus PROPERTIES TIMEOUT 300 LABELS "fuzz;sanitized")
  endif()
  mf_warnings(${name})
endfunction()
