# No input aborts the CLI. One test per row of the issue's table; each runs the CLI on a
# bad input and checks the exit status and the message (tests/cli/bad_input_case.sh).
if(TARGET phasealloc)
  foreach(case huge_alloc synth_vocab_overflow memory_fraction_nan memory_fraction_tiny sweep_jobs synth_layers
               invalid_traces empty_inputs not_regular_files gzip)
    add_test(NAME cli_bad_input_${case}
      COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli/bad_input_case.sh ${case} $<TARGET_FILE:phasealloc> ${CMAKE_SOURCE_DIR}
              ${CMAKE_CURRENT_BINARY_DIR}/bad_input)
    set_tests_properties(cli_bad_input_${case} PROPERTIES LABELS "unit;cli" TIMEOUT 300)
  endforeach()
endif()
