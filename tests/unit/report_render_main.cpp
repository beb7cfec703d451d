// Writes an HTML report from synthetic results, for the headless-browser render test.
// Usage: report_render_main OUT.html [full|single|many|empty]
#include <cstdio>
#include <string>
#include <string_view>

#include "phasealloc/report/report.hpp"
#include "report_fixtures.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.html [full|single|many|empty]\n", argv[0]);
    return 2;
  }
  const std::string_view variant = argc > 2 ? argv[2] : "full";
  phasealloc::report_testing::synthetic_options options;
  if (variant == "single") {
    options.policies = {"pytorch"};
    options.add_oom_policy = false;
  } else if (variant == "many") {  // past the ten colours: dashed lines, a wide bar chart
    options.policies.clear();
    for (int i = 0; i < 11; ++i) options.policies.push_back("phasealloc:release=adaptive,max_split_size_mb=" + std::to_string(64 << (i % 4)) + ",variant=" + std::to_string(i));
  } else if (variant == "empty") {
    options.events = 0;
  } else if (variant != "full") {
    std::fprintf(stderr, "unknown variant '%.*s'\n", static_cast<int>(variant.size()), variant.data());
    return 2;
  }
  const auto written = phasealloc::write_html_report(argv[1], phasealloc::report_testing::make_synthetic_report(options));
  if (!written) {
    std::fprintf(stderr, "report_render_main: %s\n", written.error().c_str());
    return 1;
  }
  return 0;
}
