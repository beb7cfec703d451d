# simcuda: the simulated CUDA GPU (tools/simcuda). Its own tests, phasealloc's CUDA devices on it,
# and real PyTorch on it (pytest, with the interpreter named by PHASEALLOC_TEST_PYTHON: the venv
# tools/dev.sh makes with the torch wheel).
if(NOT TARGET simcuda)
  return()
endif()

set(simcuda_runtime_libs simcuda_cudart simcuda_cuda simcuda)
foreach(name fault_test events_test stub_test graph_test)
  phasealloc_test(NAME simcuda_${name}
    SRCS simcuda/${name}.cpp
    DEPS ${simcuda_runtime_libs} CUDA::toolkit
    LABELS unit simcuda)
  target_include_directories(simcuda_${name} PRIVATE ${CMAKE_SOURCE_DIR}/tools/simcuda/include)
endforeach()
phasealloc_test(NAME simcuda_cublas_test
  SRCS simcuda/cublas_test.cpp
  DEPS simcuda_cublas simcuda_cublasLt ${simcuda_runtime_libs} CUDA::toolkit
  LABELS unit simcuda)
target_include_directories(simcuda_cublas_test PRIVATE ${CMAKE_SOURCE_DIR}/tools/simcuda/include)
phasealloc_test(NAME simcuda_config_test SRCS simcuda/config_test.cpp DEPS simcuda LABELS unit simcuda)
phasealloc_test(NAME simcuda_cupti_test SRCS simcuda/cupti_test.cpp DEPS simcuda_cupti simcuda LABELS unit simcuda)

# phasealloc's cuda_runtime and cuda_vmm devices run the device conformance suite on the simulator
# (the same binary that needs a GPU otherwise); here a device that cannot be made is a failure.
if(TARGET cuda_device_conformance_test)
  add_test(NAME cuda_device_conformance_on_simcuda COMMAND cuda_device_conformance_test)
  set_tests_properties(cuda_device_conformance_on_simcuda PROPERTIES
    LABELS "conformance;simcuda" TIMEOUT 600
    ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:simcuda_cudart>:$<TARGET_FILE:simcuda_cuda>;SIMCUDA_GPU=quiet:1,memory:8GiB;PHASEALLOC_CONFORMANCE_REQUIRE_DEVICE=1")
endif()

set(PHASEALLOC_TEST_PYTHON "" CACHE FILEPATH "A Python with torch==2.15.* for the simcuda PyTorch tests")
if(PHASEALLOC_TEST_PYTHON)
  add_test(NAME simcuda_torch
    COMMAND ${PHASEALLOC_TEST_PYTHON} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/simcuda
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(simcuda_torch PROPERTIES
    LABELS "python;simcuda" TIMEOUT 1800
    ENVIRONMENT "PHASEALLOC_SIMCUDA_DIR=${SIMCUDA_LIB_DIR};SIMCUDA_REQUIRE=1")
  # tests/gpu (phasealloc swapped into real PyTorch, started as users start jobs) on the simulator.
  if(TARGET phasealloc_torch)
    add_test(NAME gpu_tests_on_simcuda
      COMMAND ${PHASEALLOC_TEST_PYTHON} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/gpu
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(gpu_tests_on_simcuda PROPERTIES
      LABELS "python;simcuda" TIMEOUT 1800
      ENVIRONMENT "PHASEALLOC_LIBRARY=$<TARGET_FILE:phasealloc_torch>;PHASEALLOC_SIMCUDA_DIR=${SIMCUDA_LIB_DIR};PHASEALLOC_GPU_TESTS=sim")
  endif()
else()
  message(STATUS "simcuda: PHASEALLOC_TEST_PYTHON not set, the PyTorch-on-simulator tests are not registered "
                 "(tools/dev.sh test sets it to its venv)")
endif()

# phasealloc export read by the real torch.cuda._memory_viz: its stats are the replay's numbers.
if(PHASEALLOC_TEST_PYTHON AND TARGET phasealloc)
  add_test(NAME export_memory_viz_test
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/export_memory_viz_test.sh $<TARGET_FILE:phasealloc> ${PHASEALLOC_TEST_PYTHON}
            ${SIMCUDA_LIB_DIR} ${CMAKE_SOURCE_DIR}/interpose/python/bin/phasealloc-run
            ${CMAKE_SOURCE_DIR}/tools/data/ppo-125m.patrace ${CMAKE_CURRENT_BINARY_DIR}/export_memory_viz)
  set_tests_properties(export_memory_viz_test PROPERTIES LABELS "python;simcuda" TIMEOUT 900)
endif()
