// phasealloc dryrun --world-size N [--ranks LIST]: a dry run of an N-rank job that runs only some of
// its ranks, each alone, while the simulated NCCL answers for the others (SIMCUDA_GPU
// nccl_peers:virtual).
//
// Design note
// Rationale: a rank's memory depends on the world size (FSDP's shards, DDP's buckets, NCCL's
//   buffers), and on the other ranks only through the values they send. A dry run that runs every
//   rank costs a process per GPU (an 8-rank job already takes 2.8 GiB of this machine's memory at
//   values:off), so the jobs people plan (64 to 1,024 GPUs) cannot be run whole on one machine. The
//   ranks whose memory can differ can.
// Approach: each rank the dry run runs is the job's own command (python train.py, not torchrun)
//   started with torchrun's environment for that rank (RANK, LOCAL_RANK, WORLD_SIZE, ...), on a
//   simulated machine of --gpus GPUs (default min(N, 8): LOCAL_RANK is the rank modulo it), with
//   SIMCUDA_GPU nccl_peers:virtual. There every communicator is complete with this rank alone, a
//   collective answers as if each absent rank held this rank's values, and torch.distributed's
//   rendezvous gets a store that needs no peers (simcuda's virtual_ranks.py). The ranks run --parallel
//   at a time (default: the machine's hardware threads), each traced and replayed as in a full run. By default rank 0 and the last rank run (an
//   uneven last shard shows there); --ranks names others (one per pipeline or tensor-parallel
//   position where those hold different layers).
// Limitations: values that cross ranks are stand-ins (this rank's own), so a job whose allocations
//   depend on another rank's values (data-dependent routing across experts, a batch size agreed by
//   an all-reduce of different numbers) can differ from the full run; the report says how each
//   answer was obtained. A job that exchanges values through the rendezvous store stops with the
//   reason.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "job_runner.hpp"

namespace phasealloc::cli {

struct virtual_ranks_plan {
  int world_size = 0;
  int gpus_per_node = 1;
  std::vector<int> ranks;  ///< the ranks that run, ascending, each once
};

/// The plan for --world-size `world_size`, --ranks `ranks` ("" = the default) and --gpus `gpus`
/// (nullopt = not given); throws command_error naming the option and what was wrong, and when the
/// command is a launcher (torchrun) rather than the job's own.
virtual_ranks_plan plan_virtual_ranks(int world_size, const std::string& ranks, std::optional<int> gpus,
                                      const std::vector<std::string>& command);

/// torchrun's environment for `rank` of the plan.
std::vector<std::pair<std::string, std::string>> virtual_rank_env(const virtual_ranks_plan& plan, int rank);

/// Runs the plan's ranks, `parallel` at a time, each the command `argv` with `env` and its rank's
/// environment; `ended(rank, result)` is called as each ends (one call at a time). Returns the wall
/// time of them all and the first failing rank's status (0 when every rank exited with 0); once a
/// rank has failed, ranks not yet started are not. `alive` is called from one runner only.
job_result run_virtual_ranks(const virtual_ranks_plan& plan, const std::vector<std::string>& argv,
                             const std::vector<std::pair<std::string, std::string>>& env, unsigned parallel,
                             const std::function<void(double)>& alive, bool stdout_to_stderr,
                             const std::function<void(int, const job_result&)>& ended);

/// One line for the report: what ran and what was stood in.
std::string describe(const virtual_ranks_plan& plan);

nlohmann::json to_json(const virtual_ranks_plan& plan);

}  // namespace phasealloc::cli
