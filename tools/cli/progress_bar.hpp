// A one-line progress bar on stderr, drawn only when stderr is a terminal.
#pragma once

#include <cstddef>
#include <string>

namespace phasealloc::cli {

class progress_bar {
 public:
  progress_bar(std::string label, bool enabled);
  ~progress_bar();
  void update(std::size_t done, std::size_t total);

 private:
  std::string label_;
  bool enabled_;
  int last_percent_ = -1;
};

}  // namespace phasealloc::cli
