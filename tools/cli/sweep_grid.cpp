#include "sweep_grid.hpp"

#include <fmt/format.h>

namespace phasealloc::cli {

result<std::vector<std::string>, std::string> expand_grid(std::string_view grid, std::size_t limit) {
  std::vector<std::string> specs{""};
  std::size_t pos = 0;
  while (pos < grid.size()) {
    const std::size_t open = grid.find('{', pos);
    const std::size_t close_before = grid.find('}', pos);
    if (close_before < open) return fmt::format("'}}' without '{{' at offset {} in \"{}\"", close_before, grid);
    const std::string_view literal = grid.substr(pos, open == std::string_view::npos ? grid.size() - pos : open - pos);
    for (std::string& s : specs) s += literal;
    if (open == std::string_view::npos) break;
    const std::size_t close = grid.find('}', open);
    if (close == std::string_view::npos) return fmt::format("'{{' at offset {} is never closed in \"{}\"", open, grid);
    const std::string_view body = grid.substr(open + 1, close - open - 1);
    if (body.find('{') != std::string_view::npos) return fmt::format("nested '{{' at offset {} in \"{}\"", open, grid);
    std::vector<std::string_view> choices;
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = body.find(',', start);
      choices.push_back(body.substr(start, comma == std::string_view::npos ? body.size() - start : comma - start));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    for (std::string_view c : choices) {
      if (c.empty()) return fmt::format("empty choice in '{{{}}}' of \"{}\"", body, grid);
    }
    if (specs.size() * choices.size() > limit) return fmt::format("the grid \"{}\" has more than {} points", grid, limit);
    std::vector<std::string> next;
    next.reserve(specs.size() * choices.size());
    for (const std::string& s : specs) {
      for (std::string_view c : choices) next.push_back(s + std::string(c));
    }
    specs = std::move(next);
    pos = close + 1;
  }
  return specs;
}

}  // namespace phasealloc::cli
