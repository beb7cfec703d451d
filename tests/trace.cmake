# Tests of the trace format, the recorder and the importers. Included from tests/CMakeLists.txt
# (include(trace.cmake)); paths are relative to this file so any top level can include it.
set(PHASEALLOC_SHARED_TRACES_DIR "${CMAKE_CURRENT_LIST_DIR}/data/snapshots" CACHE PATH
    "Folder of real PyTorch snapshots read by snapshot_importer_test (skipped when absent)")
set(phasealloc_trace_tests ${CMAKE_CURRENT_LIST_DIR}/unit)

phasealloc_test(NAME trace_format_test
  SRCS ${phasealloc_trace_tests}/trace_format_test.cpp
  DEPS phasealloc::trace
  LABELS unit)
if(NOT TARGET nlohmann_json::nlohmann_json)
  find_package(nlohmann_json 3 REQUIRED)  # trace_records_test reads the header line back
endif()
phasealloc_test(NAME trace_records_test
  SRCS ${phasealloc_trace_tests}/trace_records_test.cpp
  DEPS phasealloc::trace nlohmann_json::nlohmann_json
  LABELS unit)
phasealloc_test(NAME flat_id_map_test
  SRCS ${phasealloc_trace_tests}/flat_id_map_test.cpp
  DEPS phasealloc::trace
  LABELS unit)
phasealloc_test(NAME trace_recorder_test
  SRCS ${phasealloc_trace_tests}/trace_recorder_test.cpp
  DEPS phasealloc::trace
  LABELS unit)
phasealloc_test(NAME pickle_reader_test
  SRCS ${phasealloc_trace_tests}/pickle_reader_test.cpp
  DEPS phasealloc::importers phasealloc::snapshot_writers
  LABELS unit)
phasealloc_test(NAME snapshot_importer_test
  SRCS ${phasealloc_trace_tests}/snapshot_importer_test.cpp
  DEPS phasealloc::importers phasealloc::snapshot_writers
  LABELS unit)
phasealloc_test(NAME kineto_importer_test
  SRCS ${phasealloc_trace_tests}/kineto_importer_test.cpp
  DEPS phasealloc::importers phasealloc::snapshot_writers
  LABELS unit)
phasealloc_test(NAME rmm_log_importer_test
  SRCS ${phasealloc_trace_tests}/rmm_log_importer_test.cpp
  DEPS phasealloc::importers phasealloc::snapshot_writers
  LABELS unit)
phasealloc_test(NAME snapshot_exporter_test
  SRCS ${phasealloc_trace_tests}/snapshot_exporter_test.cpp
  DEPS phasealloc::importers phasealloc::snapshot_writers
  LABELS unit)

foreach(test snapshot_importer_test snapshot_exporter_test)
  target_compile_definitions(${test} PRIVATE PHASEALLOC_SHARED_TRACES_DIR="${PHASEALLOC_SHARED_TRACES_DIR}")
endforeach()
foreach(test kineto_importer_test rmm_log_importer_test)
  target_compile_definitions(${test} PRIVATE PHASEALLOC_TEST_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/data")
endforeach()

# Profiler traces with a baseline, two devices and the recorded Total Reserved.
phasealloc_test(NAME kineto_baseline_test
  SRCS ${phasealloc_trace_tests}/kineto_baseline_test.cpp
  DEPS phasealloc::importers phasealloc::snapshot_writers phasealloc::replay
  LABELS unit)

# Snapshots that do not start from an empty allocator seed the pytorch model with their layout.
phasealloc_test(NAME snapshot_layout_test
  SRCS ${phasealloc_trace_tests}/snapshot_layout_test.cpp
  DEPS phasealloc::importers phasealloc::snapshot_writers phasealloc::replay
  LABELS unit)
