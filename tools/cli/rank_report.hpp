// dryrun across ranks: which rank and GPU each recorded process was, NCCL's device memory from the
// simulator's books, and the per-rank, per-phase table (text and JSON) over the replays.
//
// Design note
// Rationale: a multi-GPU job (torchrun, accelerate) is one process per GPU, each with its own
//   allocator and its own trace; the question is per rank ("does every rank fit, and which one runs
//   out first?"), and part of each rank's device memory is NCCL's, which no allocator traces.
// Approach: the job's processes write their traces as rank<R>.role<ROLE>.pid<P>[.dev<D>].patrace
//   (the trace path pattern's %r, %R and %p; the recorder adds .dev<D> for a device other than 0),
//   so the name says the rank, the role (PHASEALLOC_ROLE: a Ray job's trainer and rollout workers
//   can share a rank number) and the GPU. The simulator writes each process's books at exit (SIMCUDA_BOOKS:
//   books.<P>.json): the peak of NCCL's buffers per device, matched to the trace by pid and device.
//   Each rank's trace is replayed on --gpu minus its NCCL peak (NCCL connects at the first
//   collective and keeps its buffers to the end, so the allocator has that much less for the rest of
//   the job); the device total is the allocator's peak reserved plus NCCL's peak. The rank that runs
//   out first, per allocator: of the ranks that run out, the one whose job needs the most (peak
//   live bytes + NCCL), with the phases where it fails; when none does, the one with the least
//   headroom (the first to run out as the GPU shrinks).
// Limitations: the traces' clocks start at each process's first allocation, so "first" is by
//   demand, not by time. NCCL's memory is counted from its first collective to the end, also in the
//   phases before it. A process killed without exit handlers writes no books: its NCCL line says so.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "replay_output.hpp"

namespace phasealloc::cli {

/// What a trace file's name says about the process that wrote it.
struct rank_identity {
  std::optional<int> rank;  ///< From RANK (else LOCAL_RANK) when the job set it.
  std::string role;         ///< The process's role ("" = none): PHASEALLOC_ROLE, else its Ray or vLLM title
  long long pid = 0;
  int device = 0;
};

/// The trace file name pattern for the job (the recorder expands %r and %p).
inline constexpr const char* rank_trace_pattern = "rank%r.role%R.pid%p.patrace";
/// The simulator's books file pattern (SIMCUDA_BOOKS; %p: the pid).
inline constexpr const char* rank_books_pattern = "books.%p.json";

/// Parses a name written under rank_trace_pattern; nullopt for another name.
std::optional<rank_identity> identity_from_trace_name(const std::string& file_name);

/// What the simulator's books say of one process (SIMCUDA_BOOKS, tools/simcuda/src/core/books_file.cpp).
struct process_books {
  std::size_t nccl_peak_bytes = 0;  ///< NCCL's peak on the process's device
  std::string values;               ///< the value level it ran at ("off", "observable", "exact")
  bool virtual_peers = false;       ///< nccl_peers:virtual: its peers did not run
};

/// The books of process `pid` in `dir`, for `device`; nullopt when the process wrote none. Throws
/// command_error for a books file that is not the simulator's.
std::optional<process_books> read_books(const std::string& dir, long long pid, int device);

/// One recorded process: who it was, NCCL's memory, and its replays.
struct rank_replay {
  rank_identity who;
  bool shares_name = false;  ///< Another process has the same rank and role: rank_label adds the pid.
  std::optional<std::size_t> nccl_bytes;
  std::optional<process_books> books;
  replay_report report;  ///< Replayed at the GPU's capacity minus nccl_bytes.
};

/// "3", "3 rollout", or "pid 41234" (no rank): how tables and pages name a process; "0 Worker pid
/// 41234" when it shares its rank and role with another (a Ray job's actors without a rank).
std::string rank_label(const rank_replay& r);

/// The per-rank, per-phase table, the NCCL and device-total lines, and who runs out first.
std::string render_rank_text(const std::vector<rank_replay>& ranks, std::size_t gpu_bytes);
/// The same numbers: {gpu_bytes, ranks[rank, role, pid, device, trace, nccl_peak_bytes, results[policy,
/// capacity_bytes, peak_reserved_bytes, device_total_bytes, ooms, phases[name, peak_reserved_bytes,
/// num_ooms]]], runs_out_first[policy, rank, device, fits, phases, device_total_bytes]}; a rank
/// without books has null nccl_peak_bytes and device_total_bytes.
nlohmann::json rank_json(const std::vector<rank_replay>& ranks, std::size_t gpu_bytes);

/// The per-rank HTML page (the report's rank selector); throws command_error naming the path on failure.
void write_rank_html(const std::string& path, const std::vector<rank_replay>& ranks, std::size_t gpu_bytes,
                     const std::string& generated_by);

}  // namespace phasealloc::cli
