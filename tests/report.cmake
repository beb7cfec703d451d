# HTML report tests (included from tests/CMakeLists.txt).
phasealloc_test(NAME report_test SRCS unit/report_test.cpp DEPS phasealloc::report LABELS "unit;report")

# Renders a report from synthetic results in headless Chromium; skips (77) without chromium.
add_executable(report_render_main unit/report_render_main.cpp)
target_link_libraries(report_render_main PRIVATE phasealloc::report)
target_compile_options(report_render_main PRIVATE -Wall -Wextra)
add_test(NAME report_render_test
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/report_render_test.sh $<TARGET_FILE:report_render_main>
          ${CMAKE_CURRENT_BINARY_DIR}/report_render)
set_tests_properties(report_render_test PROPERTIES LABELS "report;browser" SKIP_RETURN_CODE 77 TIMEOUT 180)
