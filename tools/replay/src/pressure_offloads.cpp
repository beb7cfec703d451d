#include "pressure_offloads.hpp"

namespace phasealloc::replay_detail {

void pressure_offloads::hold(const std::vector<std::uint64_t>& ids) {
  const std::uint64_t number = first_call_ + calls_.size();
  for (const std::uint64_t id : ids) held_[id] = number;  // a later call takes an id over
  calls_.push_back(ids);
}

std::vector<std::uint64_t> pressure_offloads::restore(const std::vector<std::uint64_t>& ids) {
  std::vector<std::uint64_t> back;
  for (const std::uint64_t id : ids) {
    if (away_.erase(id) != 0) {
      back.push_back(id);
    } else {
      held_.erase(id);
    }
  }
  return back;
}

std::vector<std::uint64_t> pressure_offloads::make_next() {
  while (!calls_.empty()) {
    std::vector<std::uint64_t> ids = std::move(calls_.front());
    const std::uint64_t number = first_call_;
    calls_.pop_front();
    ++first_call_;
    std::vector<std::uint64_t> out;
    for (const std::uint64_t id : ids) {
      const auto it = held_.find(id);
      if (it == held_.end() || it->second != number) continue;  // freed, restored, or held by a later call
      held_.erase(it);
      away_.insert(id);
      out.push_back(id);
    }
    if (!out.empty()) {
      ++made_;
      return out;
    }
  }
  return {};
}

}  // namespace phasealloc::replay_detail
