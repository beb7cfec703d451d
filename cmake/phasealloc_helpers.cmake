# One declarative helper per target kind (abseil's absl_cc_library, fmt's add_fmt_test).
include_guard(GLOBAL)

# The compiler warnings of phasealloc's own code, written here only: every target the project
# compiles gets them through phasealloc_warnings (the helpers below call it for theirs).
# PHASEALLOC_WARNINGS_AS_ERRORS (CMakeLists.txt) makes them errors; tools/dev.sh fails a build that
# prints one. C++ sources only: the C a generator writes (simcuda's stubs) is not held to them.
function(phasealloc_warnings target)
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wpedantic>")
endfunction()

# Applies -fsanitize=<list> to everything built after this call.
function(phasealloc_apply_sanitizers list)
  if(NOT list)
    return()
  endif()
  string(REPLACE ";" "," flags "${list}")
  add_compile_options(-fsanitize=${flags} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${flags})
  add_compile_definitions(PHASEALLOC_SANITIZED=1)
endfunction()

# A piece is missing that leaves some targets or tests out: a STATUS line, or the configure step
# fails under PHASEALLOC_REQUIRE_ALL_TESTS (CI), where every test must be registered.
function(phasealloc_missing_piece text)
  if(PHASEALLOC_REQUIRE_ALL_TESTS)
    message(FATAL_ERROR "${text} (PHASEALLOC_REQUIRE_ALL_TESTS is on: every test must be registered)")
  endif()
  message(STATUS "${text}")
endfunction()

# phasealloc_library(NAME name SRCS ... DEPS ... [PUBLIC_INCLUDE dir])
# Creates phasealloc_<name> and the alias phasealloc::<name>; the alias is the form to link.
function(phasealloc_library)
  cmake_parse_arguments(arg "" "NAME;PUBLIC_INCLUDE" "SRCS;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target phasealloc_${arg_NAME})
  add_library(${target} STATIC ${arg_SRCS})
  add_library(phasealloc::${arg_NAME} ALIAS ${target})
  if(arg_PUBLIC_INCLUDE)
    target_include_directories(${target} PUBLIC ${arg_PUBLIC_INCLUDE})
  endif()
  target_link_libraries(${target} PUBLIC ${arg_DEPS} PRIVATE ${arg_PRIVATE_DEPS})
  phasealloc_warnings(${target})
endfunction()

# phasealloc_test(NAME name [SRCS ...] DEPS ... [LABELS ...] [TIMEOUT s] [DEFINES ...] [INCLUDES ...])
# Builds <name> with GoogleTest from SRCS (default: unit/<name>.cpp beside the calling list file),
# with DEFINES and INCLUDES private to it, and registers it (TIMEOUT default 600).
function(phasealloc_test)
  cmake_parse_arguments(arg "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS;DEFINES;INCLUDES" ${ARGN})
  if(NOT arg_SRCS)
    set(arg_SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/${arg_NAME}.cpp)
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 600)
  endif()
  add_executable(${arg_NAME} ${arg_SRCS})
  target_link_libraries(${arg_NAME} PRIVATE ${arg_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  phasealloc_warnings(${arg_NAME})
  target_compile_definitions(${arg_NAME} PRIVATE ${arg_DEFINES})
  target_include_directories(${arg_NAME} PRIVATE ${arg_INCLUDES})
  phasealloc_command_test(NAME ${arg_NAME} COMMAND ${arg_NAME} LABELS ${arg_LABELS} TIMEOUT ${arg_TIMEOUT})
endfunction()

# phasealloc_command_test(NAME name COMMAND ... [LABELS ...] [TIMEOUT s] [ENVIRONMENT VAR=value ...]
#                         [WORKING_DIRECTORY dir] [SKIP_RETURN_CODE code] [COST c])
# Registers a command (a script, a pytest run, a program on inputs) with CTest; properties left out
# stay CTest's defaults. The one way a test is registered: phasealloc_test and phasealloc_bench call
# it, and so does every folder that registers its own (interpose/, bench/, tools/simcuda/tests).
function(phasealloc_command_test)
  cmake_parse_arguments(arg "" "NAME;TIMEOUT;WORKING_DIRECTORY;SKIP_RETURN_CODE;COST" "COMMAND;LABELS;ENVIRONMENT" ${ARGN})
  if(arg_WORKING_DIRECTORY)
    add_test(NAME ${arg_NAME} COMMAND ${arg_COMMAND} WORKING_DIRECTORY ${arg_WORKING_DIRECTORY})
  else()
    add_test(NAME ${arg_NAME} COMMAND ${arg_COMMAND})
  endif()
  set_tests_properties(${arg_NAME} PROPERTIES LABELS "${arg_LABELS}")
  foreach(property TIMEOUT ENVIRONMENT SKIP_RETURN_CODE COST)
    if(DEFINED arg_${property})
      set_tests_properties(${arg_NAME} PROPERTIES ${property} "${arg_${property}}")
    endif()
  endforeach()
endfunction()

# phasealloc_bench(NAME name SRCS ... DEPS ...)
# Builds <name> with Google Benchmark and registers a short smoke run labelled 'bench'.
function(phasealloc_bench)
  cmake_parse_arguments(arg "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${arg_NAME} ${arg_SRCS})
  target_link_libraries(${arg_NAME} PRIVATE ${arg_DEPS} benchmark::benchmark)
  phasealloc_warnings(${arg_NAME})
  if(PHASEALLOC_BUILD_TESTS)
    phasealloc_command_test(NAME ${arg_NAME}_smoke COMMAND ${arg_NAME} --benchmark_min_time=0.01 LABELS bench TIMEOUT 600)
  endif()
endfunction()
