# Replay tests (included from tests/CMakeLists.txt).
phasealloc_test(NAME replay_fidelity_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/replay_fidelity_test.cpp
  DEPS phasealloc::replay phasealloc::importers LABELS "unit;replay")
target_compile_definitions(replay_fidelity_test PRIVATE PHASEALLOC_SHARED_TRACES_DIR="${PHASEALLOC_SHARED_TRACES_DIR}")
