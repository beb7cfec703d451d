# Engine and policy tests (included from tests/CMakeLists.txt).
phasealloc_test(NAME engine_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/engine_test.cpp
  DEPS phasealloc::engine phasealloc::policies phasealloc::model_device LABELS "unit;engine")
phasealloc_test(NAME conf_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/conf_test.cpp
  DEPS phasealloc::engine phasealloc::policies LABELS "unit;engine")
phasealloc_test(NAME engine_scenario_test SRCS ${CMAKE_CURRENT_LIST_DIR}/scenario/engine_scenario_test.cpp
  DEPS phasealloc::engine phasealloc::policies phasealloc::model_device LABELS "scenario;engine" TIMEOUT 1800)
phasealloc_test(NAME engine_stress_test SRCS ${CMAKE_CURRENT_LIST_DIR}/scenario/engine_stress_test.cpp
  DEPS phasealloc::engine phasealloc::policies phasealloc::model_device LABELS "scenario;engine;threads")
phasealloc_test(NAME size_classes_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/size_classes_test.cpp
  DEPS phasealloc::policies LABELS "unit;policy")
phasealloc_test(NAME phasealloc_policy_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/phasealloc_policy_test.cpp
  DEPS phasealloc::engine phasealloc::policies phasealloc::model_device LABELS "unit;policy")
phasealloc_test(NAME host_pool_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/host_pool_test.cpp
  DEPS phasealloc::engine phasealloc::model_device LABELS "unit;engine")
# Sizes and memory fractions at their extremes, under every policy: values, never aborts.
phasealloc_test(NAME engine_extremes_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/engine_extremes_test.cpp
  DEPS phasealloc::engine phasealloc::policies phasealloc::model_device LABELS "unit;engine")
# The deferred merge decides and books exactly as merging at once; the live table.
phasealloc_test(NAME deferred_free_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/deferred_free_test.cpp
  DEPS phasealloc::engine phasealloc::policies phasealloc::model_device LABELS "unit;engine")
phasealloc_test(NAME live_table_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/live_table_test.cpp
  DEPS phasealloc::engine LABELS "unit;engine")
target_include_directories(live_table_test PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src)
# The pool index (exact-size bins beside an ordered set) answers as one ordered set would.
phasealloc_test(NAME block_pool_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/block_pool_test.cpp
  DEPS phasealloc::engine LABELS "unit;engine")
target_include_directories(block_pool_test PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src)
# The growth rules of policy.hpp, each set alone by a test policy: one decision each.
phasealloc_test(NAME growth_rules_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/growth_rules_test.cpp
  DEPS phasealloc::engine phasealloc::model_device LABELS "unit;engine")
# The engine's snapshot as PyTorch's segment list (one segment per mapped run).
phasealloc_test(NAME snapshot_runs_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/snapshot_runs_test.cpp
  DEPS phasealloc::engine LABELS "unit;engine")
