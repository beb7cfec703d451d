#include "replay_grid.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "progress_bar.hpp"

namespace phasealloc::cli {

result<std::vector<std::vector<replay_result>>, std::string> replay_grid(const std::vector<trace>& traces,
                                                                         const std::vector<std::string>& specs,
                                                                         const replay_options& options,
                                                                         std::size_t jobs, const std::string& label,
                                                                         bool progress) {
  std::vector<std::vector<replay_result>> out(specs.size(), std::vector<replay_result>(traces.size()));
  const std::size_t total = specs.size() * traces.size();
  if (total == 0) return out;
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  std::mutex mutex;  // the first error and the bar
  std::string first_error;
  progress_bar bar(label, progress);
  const auto worker = [&] {
    for (std::size_t k = next++; k < total; k = next++) {
      const std::size_t si = k / traces.size();
      const std::size_t ti = k % traces.size();
      auto r = replay(traces[ti], specs[si], options);
      if (!r) {
        std::lock_guard lock(mutex);
        if (first_error.empty()) first_error = fmt::format("{}: {}", specs[si], r.error());
        next = total;
        return;
      }
      out[si][ti] = std::move(r).value();
      const std::size_t d = ++done;
      std::lock_guard lock(mutex);
      bar.update(d, total);
    }
  };
  std::vector<std::thread> threads;
  const std::size_t thread_count = std::clamp<std::size_t>(jobs, 1, total);
  try {
    for (std::size_t j = 0; j < thread_count; ++j) threads.emplace_back(worker);
  } catch (const std::system_error& e) {  // the system refused a thread: stop the others, then say so
    next = total;
    for (std::thread& t : threads) t.join();
    return fmt::format("cannot start replay thread {} of {} ({})", threads.size() + 1, thread_count, e.what());
  }
  for (std::thread& t : threads) t.join();
  if (!first_error.empty()) return first_error;
  return out;
}

}  // namespace phasealloc::cli
