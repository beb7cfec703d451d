# phasealloc's features run with the real PyTorch wheel on simcuda, the simulated GPU (pytest, with
# the interpreter PHASEALLOC_TEST_PYTHON names: the venv tools/dev.sh makes). simcuda's own tests
# are beside it (tools/simcuda/tests).
if(NOT TARGET simcuda)
  return()
endif()

# phasealloc's cuda_runtime and cuda_vmm devices run the device conformance suite on the simulator
# (the same binary that needs a GPU otherwise); here a device that cannot be made is a failure.
if(TARGET cuda_device_conformance_test)
  add_test(NAME cuda_device_conformance_on_simcuda COMMAND cuda_device_conformance_test)
  set_tests_properties(cuda_device_conformance_on_simcuda PROPERTIES
    LABELS "conformance;simcuda" TIMEOUT 600
    ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:simcuda_cudart>:$<TARGET_FILE:simcuda_cuda>;SIMCUDA_GPU=quiet:1,memory:8GiB;PHASEALLOC_CONFORMANCE_REQUIRE_DEVICE=1")
endif()

if(NOT PHASEALLOC_TEST_PYTHON)
  message(STATUS "phasealloc: PHASEALLOC_TEST_PYTHON not set, the tests that run PyTorch are not registered "
                 "(tools/dev.sh test sets it to its venv)")
  return()
endif()

# One pytest run per feature: the dry run, the export read by torch's memory viewer, the oracle
# (the pytorch model against PyTorch's own allocator), the installed package, the launcher, and the
# bench scripts.
foreach(feature dryrun export oracle packaging launcher bench)
  add_test(NAME torch_${feature}
    COMMAND ${PHASEALLOC_TEST_PYTHON} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/${feature}
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(torch_${feature} PROPERTIES
    LABELS "python;simcuda" TIMEOUT 1800
    ENVIRONMENT "PHASEALLOC_SIMCUDA_DIR=${SIMCUDA_LIB_DIR};SIMCUDA_REQUIRE=1")
endforeach()

# tests/gpu (phasealloc swapped into real PyTorch, started as users start jobs) on the simulator.
if(TARGET phasealloc_torch)
  add_test(NAME gpu_tests_on_simcuda
    COMMAND ${PHASEALLOC_TEST_PYTHON} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/gpu
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(gpu_tests_on_simcuda PROPERTIES
    LABELS "python;simcuda" TIMEOUT 1800
    ENVIRONMENT "PHASEALLOC_LIBRARY=$<TARGET_FILE:phasealloc_torch>;PHASEALLOC_SIMCUDA_DIR=${SIMCUDA_LIB_DIR};PHASEALLOC_GPU_TESTS=sim")
endif()

# phasealloc export read by the real torch.cuda._memory_viz: its stats are the replay's numbers.
if(TARGET phasealloc)
  add_test(NAME export_memory_viz_test
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/export/export_memory_viz_test.sh $<TARGET_FILE:phasealloc> ${PHASEALLOC_TEST_PYTHON}
            ${SIMCUDA_LIB_DIR} ${CMAKE_SOURCE_DIR}/interpose/python/bin/phasealloc-run
            ${CMAKE_SOURCE_DIR}/tools/data/ppo-125m.patrace ${CMAKE_CURRENT_BINARY_DIR}/export_memory_viz)
  set_tests_properties(export_memory_viz_test PROPERTIES LABELS "python;simcuda" TIMEOUT 900)
endif()
