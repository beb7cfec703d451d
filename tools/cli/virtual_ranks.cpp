// Virtual ranks of a dry run: the plan (which ranks run, on which GPU) and each rank's environment.
#include "virtual_ranks.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "commands.hpp"

namespace phasealloc::cli {
namespace {

constexpr int max_world_size = 1 << 20;
constexpr int max_machine_gpus = 16;  // simcuda's count:1..16

std::optional<int> parse_int(const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [at, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || at != end) return std::nullopt;
  return value;
}

bool is_launcher(const std::vector<std::string>& command) {
  const std::string program = std::filesystem::path(command.front()).filename().string();
  if (program == "torchrun" || program == "deepspeed" || program == "accelerate") return true;
  for (std::size_t i = 0; i + 1 < command.size(); ++i)
    if (command[i] == "-m" && (command[i + 1] == "torch.distributed.run" || command[i + 1] == "torch.distributed.launch"))
      return true;
  return false;
}

}  // namespace

virtual_ranks_plan plan_virtual_ranks(int world_size, const std::string& ranks, std::optional<int> gpus,
                                      const std::vector<std::string>& command) {
  if (world_size < 1 || world_size > max_world_size)
    throw command_error(fmt::format("--world-size {}: expected 1 to {}", world_size, max_world_size));
  if (!command.empty() && is_launcher(command))
    throw command_error(fmt::format(
        "--world-size runs each rank it runs as a process of its own, with torchrun's environment: give the job's "
        "own command (e.g. -- python train.py), not the launcher ({})",
        command.front()));
  virtual_ranks_plan plan;
  plan.world_size = world_size;
  plan.gpus_per_node = gpus.value_or(std::min(world_size, 8));
  if (plan.gpus_per_node < 1 || plan.gpus_per_node > max_machine_gpus)
    throw command_error(fmt::format("--gpus {}: the simulated machine has 1 to {} GPUs", plan.gpus_per_node,
                                    max_machine_gpus));
  if (ranks.empty()) {
    plan.ranks = {0};
    if (world_size > 1) plan.ranks.push_back(world_size - 1);
    return plan;
  }
  std::size_t start = 0;
  while (start <= ranks.size()) {
    const std::size_t comma = std::min(ranks.find(',', start), ranks.size());
    const std::string item = ranks.substr(start, comma - start);
    const auto rank = parse_int(item);
    if (!rank || *rank < 0 || *rank >= world_size)
      throw command_error(fmt::format("--ranks {}: \"{}\" is not a rank of 0 to {}", ranks, item, world_size - 1));
    plan.ranks.push_back(*rank);
    start = comma + 1;
  }
  std::sort(plan.ranks.begin(), plan.ranks.end());
  plan.ranks.erase(std::unique(plan.ranks.begin(), plan.ranks.end()), plan.ranks.end());
  return plan;
}

std::vector<std::pair<std::string, std::string>> virtual_rank_env(const virtual_ranks_plan& plan, int rank) {
  const int local = rank % plan.gpus_per_node;
  const int nodes = (plan.world_size + plan.gpus_per_node - 1) / plan.gpus_per_node;
  const int local_world = std::min(plan.gpus_per_node, plan.world_size - (rank - local));
  return {{"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(local)},
          {"WORLD_SIZE", std::to_string(plan.world_size)},
          {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
          {"GROUP_RANK", std::to_string(rank / plan.gpus_per_node)},
          {"NODE_RANK", std::to_string(rank / plan.gpus_per_node)},
          {"GROUP_WORLD_SIZE", std::to_string(nodes)},
          {"ROLE_RANK", std::to_string(rank)},
          {"ROLE_WORLD_SIZE", std::to_string(plan.world_size)},
          // The rendezvous store is the process's own (simcuda's virtual_ranks.py): nothing listens here.
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", "29500"},
          {"TORCHELASTIC_USE_AGENT_STORE", "False"}};
}

job_result run_virtual_ranks(const virtual_ranks_plan& plan, const std::vector<std::string>& argv,
                             const std::vector<std::pair<std::string, std::string>>& env, unsigned parallel,
                             const std::function<void(double)>& alive, bool stdout_to_stderr,
                             const std::function<void(int, const job_result&)>& ended) {
  const auto started = std::chrono::steady_clock::now();
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;  // guards `first_failure` and the calls of `ended`
  std::optional<std::pair<int, job_result>> first_failure;
  std::string error;  // a rank that could not be started (command_error)
  const auto runner = [&](bool reports_alive) {
    for (std::size_t i = next++; i < plan.ranks.size() && !failed; i = next++) {
      const int rank = plan.ranks[i];
      auto rank_env = env;
      for (auto& variable : virtual_rank_env(plan, rank)) rank_env.push_back(std::move(variable));
      try {
        const job_result one = run_job(argv, rank_env, reports_alive ? alive : nullptr, stdout_to_stderr);
        std::lock_guard lock(mutex);
        if (one.exit_status != 0 && (!first_failure || rank < first_failure->first)) first_failure.emplace(rank, one);
        if (one.exit_status != 0) failed = true;
        ended(rank, one);
      } catch (const command_error& e) {
        std::lock_guard lock(mutex);
        if (error.empty()) error = e.what();
        failed = true;
      }
    }
  };
  const unsigned threads = std::max(1u, std::min<unsigned>(parallel, static_cast<unsigned>(plan.ranks.size())));
  std::vector<std::thread> others;
  for (unsigned t = 1; t < threads; ++t) others.emplace_back(runner, false);
  runner(true);
  for (std::thread& t : others) t.join();
  if (!error.empty()) throw command_error(error);
  job_result all = first_failure ? first_failure->second : job_result{};
  all.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return all;
}

std::string describe(const virtual_ranks_plan& plan) {
  std::string ran;
  for (std::size_t i = 0; i < plan.ranks.size(); ++i)
    ran += fmt::format("{}{}", i == 0 ? "" : (i + 1 == plan.ranks.size() ? " and " : ", "), plan.ranks[i]);
  return fmt::format(
      "Virtual ranks: rank{} {} of {} ran, each alone ({} GPUs per node): the simulated NCCL answered for each one's "
      "{} peers as if they held its values (nccl_peers:virtual); NCCL's buffers are a full run's\n",
      plan.ranks.size() == 1 ? "" : "s", ran, plan.world_size, plan.gpus_per_node, plan.world_size - 1);
}

nlohmann::json to_json(const virtual_ranks_plan& plan) {
  return {{"world_size", plan.world_size},
          {"gpus_per_node", plan.gpus_per_node},
          {"ran", plan.ranks},
          {"stand_in", "a collective answers as if every absent rank held the running rank's values"}};
}

}  // namespace phasealloc::cli
