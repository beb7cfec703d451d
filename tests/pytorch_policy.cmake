# Tests of the `pytorch` policy (included from tests/CMakeLists.txt).
phasealloc_test(NAME pytorch_rounding_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/pytorch_rounding_test.cpp
  DEPS phasealloc::engine phasealloc::policies phasealloc::model_device LABELS "unit;policy")
phasealloc_test(NAME pytorch_policy_test SRCS ${CMAKE_CURRENT_LIST_DIR}/unit/pytorch_policy_test.cpp
  DEPS phasealloc::engine phasealloc::policies phasealloc::model_device LABELS "unit;policy")
