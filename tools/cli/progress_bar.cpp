#include "progress_bar.hpp"

#include <cstdio>
#include <unistd.h>

namespace phasealloc::cli {

progress_bar::progress_bar(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled && isatty(STDERR_FILENO) != 0) {}

progress_bar::~progress_bar() {
  if (enabled_ && last_percent_ >= 0) std::fputs("\r\033[K", stderr);
}

void progress_bar::update(std::size_t done, std::size_t total) {
  if (!enabled_ || total == 0) return;
  const int pct = static_cast<int>(100 * done / total);
  if (pct == last_percent_) return;
  last_percent_ = pct;
  constexpr int width = 30;
  const int filled = pct * width / 100;
  std::fprintf(stderr, "\r%-40.40s [%.*s%*s] %3d%%", label_.c_str(), filled, "##############################",
               width - filled, "", pct);
  std::fflush(stderr);
}

}  // namespace phasealloc::cli
