# Synthesized-trace tests (included from tests/CMakeLists.txt).
phasealloc_test(NAME synth_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/synth_test.cpp
  DEPS phasealloc::synth LABELS "unit;synth")
phasealloc_test(NAME synth_knob_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/synth_knob_test.cpp
  DEPS phasealloc::synth LABELS "unit;synth")
