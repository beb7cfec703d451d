// Column-aligned text tables for the terminal: left-aligned first column, right-aligned numbers.
#pragma once

#include <string>
#include <vector>

namespace phasealloc::cli {

class text_table {
 public:
  explicit text_table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string percent(double fraction);
std::string nanoseconds(std::uint64_t ns);

}  // namespace phasealloc::cli
