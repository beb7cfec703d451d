#include "host_pool_slot.hpp"

namespace phasealloc::interpose {

host_pool_slot::host_pool_slot(device& events, std::unique_ptr<host_memory> memory, std::size_t budget_bytes)
    : events_(events), memory_(std::move(memory)), budget_bytes_(budget_bytes) {}

host_pool_slot::~host_pool_slot() = default;

result<host_pool*, std::string> host_pool_slot::pool() {
  if (host_pool* p = existing()) return p;
  if (budget_bytes_ == 0) return std::string("the host buffer pool is disabled (host_budget:0 in the configuration)");
  std::lock_guard lock(mutex_);
  if (host_pool* p = existing()) return p;
  pool_ = std::make_unique<host_pool>(*memory_, &events_, host_pool_options{.budget_bytes = budget_bytes_});
  published_.store(pool_.get(), std::memory_order_release);
  return pool_.get();
}

host_pool_stats host_pool_slot::stats() const {
  if (const host_pool* p = existing()) return p->stats();
  return empty_host_pool_stats(budget_bytes_);
}

host_pool_stats empty_host_pool_stats(std::size_t budget_bytes) noexcept {
  host_pool_stats out;
  out.budget_bytes = budget_bytes;
  return out;
}

}  // namespace phasealloc::interpose
