# Replay tests (included from tests/CMakeLists.txt).
phasealloc_test(NAME replay_fidelity_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/replay_fidelity_test.cpp
  DEPS phasealloc::replay phasealloc::importers LABELS "unit;replay")
target_compile_definitions(replay_fidelity_test PRIVATE PHASEALLOC_SHARED_TRACES_DIR="${PHASEALLOC_SHARED_TRACES_DIR}")

# phasealloc export --policy: the pickle holds the layout the replay placed (tools/export).
phasealloc_test(NAME placed_export_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/placed_export_test.cpp
  DEPS phasealloc::export phasealloc::importers LABELS "unit;replay")
target_compile_definitions(placed_export_test PRIVATE PHASEALLOC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

# phasealloc export refuses bad input with a message that names what was wrong (exit status 1).
if(TARGET phasealloc)
  set(export_refuses [=[out=$("$0" export "$1" "$2" --policy "$3" 2>&1); rc=$?; echo "$out"; [ "$rc" = 1 ] && echo "$out" | grep -q -- "$4"]=])
  add_test(NAME export_refuses_unknown_policy
    COMMAND sh -c "${export_refuses}" $<TARGET_FILE:phasealloc> ${CMAKE_SOURCE_DIR}/tools/data/ppo-125m.patrace
            ${CMAKE_CURRENT_BINARY_DIR}/refused.pickle bogus "unknown policy 'bogus'.*valid policies")
  add_test(NAME export_refuses_malformed_trace
    COMMAND sh -c "${export_refuses}" $<TARGET_FILE:phasealloc> ${CMAKE_CURRENT_LIST_DIR}/replay.cmake
            ${CMAKE_CURRENT_BINARY_DIR}/refused.pickle pytorch "replay.cmake: byte 0: expected a phasealloc trace")
  set_tests_properties(export_refuses_unknown_policy export_refuses_malformed_trace PROPERTIES LABELS "unit;replay")
endif()

# Every real-code trace (tools/data/real) replays under the three allocators.
if(TARGET phasealloc)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  file(GLOB real_traces CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tools/data/real/*.patrace.gz)
  add_test(NAME replay_real_traces
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/replay_real_traces.py $<TARGET_FILE:phasealloc> ${real_traces})
  set_tests_properties(replay_real_traces PROPERTIES LABELS "replay" TIMEOUT 900)
  # The same-shape synth presets stay within 5% of the real-code traces.
  add_test(NAME synth_presets_match_real_traces
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/bench/synth_vs_real.py $<TARGET_FILE:phasealloc> --check)
  set_tests_properties(synth_presets_match_real_traces PROPERTIES LABELS "replay;synth" TIMEOUT 600)
  # The native traces recorded on a GPU (tools/data/real/gpu): the model reserves what the GPU did.
  file(GLOB gpu_native_traces CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tools/data/real/gpu/*-native.patrace.gz)
  add_test(NAME replay_gpu_traces_match_the_gpu
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/replay_gpu_traces.py $<TARGET_FILE:phasealloc>
            ${gpu_native_traces})
  set_tests_properties(replay_gpu_traces_match_the_gpu PROPERTIES LABELS "replay" TIMEOUT 300)
endif()

# The CLI on inputs that do not start from an empty allocator (tests/cli/replay_fidelity_case.sh).
if(TARGET phasealloc)
  foreach(case kineto)
    add_test(NAME cli_replay_fidelity_${case}
      COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli/replay_fidelity_case.sh ${case} $<TARGET_FILE:phasealloc> ${CMAKE_SOURCE_DIR}
              ${CMAKE_CURRENT_BINARY_DIR}/replay_fidelity)
    set_tests_properties(cli_replay_fidelity_${case} PROPERTIES LABELS "unit;cli;replay" TIMEOUT 300)
  endforeach()
endif()

# Colocation headroom: reserved while each phase runs, and what each transition returned.
phasealloc_test(NAME replay_headroom_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/replay_headroom_test.cpp
  DEPS phasealloc::replay LABELS "unit;replay")
target_compile_definitions(replay_headroom_test PRIVATE PHASEALLOC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

# Colocated processes share one simulated GPU (tests/data/colocate).
phasealloc_test(NAME replay_colocate_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/replay_colocate_test.cpp
  DEPS phasealloc::replay LABELS "unit;replay")
target_compile_definitions(replay_colocate_test PRIVATE PHASEALLOC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
if(TARGET phasealloc)
  foreach(case outcome bad_input)
    add_test(NAME cli_replay_colocate_${case}
      COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli/replay_colocate_case.sh ${case} $<TARGET_FILE:phasealloc> ${CMAKE_SOURCE_DIR}
              ${CMAKE_CURRENT_BINARY_DIR}/replay_colocate)
    set_tests_properties(cli_replay_colocate_${case} PROPERTIES LABELS "unit;cli;replay" TIMEOUT 300)
  endforeach()
endif()

# phasealloc tune: the front, the recommendation, the line to paste (tools/cli/tune_search.hpp).
if(TARGET phasealloc_cli_core)
  phasealloc_test(NAME tune_search_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/tune_search_test.cpp
    DEPS phasealloc_cli_core LABELS "unit;cli;policy")
endif()
if(TARGET phasealloc)
  foreach(case outcome bad_input)
    add_test(NAME cli_tune_${case}
      COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli/tune_case.sh ${case} $<TARGET_FILE:phasealloc> ${CMAKE_SOURCE_DIR}
              ${CMAKE_CURRENT_BINARY_DIR}/tune)
    set_tests_properties(cli_tune_${case} PROPERTIES LABELS "unit;cli;policy;replay" TIMEOUT 300)
  endforeach()
endif()
