// phasealloc dryrun [--gpu 80GiB] [--gpus N] [--world-size N [--ranks LIST]] [--record-gpu SIZE]
//                   [--policy SPEC ...] [--json] [--html FILE] [--trace-dir DIR] [-q] -- COMMAND [ARGS...]
//
// Design note
// Rationale: the question users ask before they rent a GPU is "will my job fit, and with which
//   allocator?". The simulated GPU runs the unmodified job without one (kernels are skipped,
//   untouched memory costs no RAM), so the job's real allocation pattern can be recorded at any
//   model size and replayed under each allocator at the capacity the user plans for.
// Approach: the job runs under phasealloc-run --sim-gpu=RECORD --trace DIR/rank%r.role%R.pid%p.patrace
//   on --gpus simulated GPUs (SIMCUDA_GPU count), so every process that uses CUDA (every rank of a
//   torchrun or accelerate job) writes its own trace with the phases the env-var swap detects (or
//   the job marks), named by its rank, pid and GPU; the simulator writes each process's books
//   (NCCL's device memory) at exit (rank_report.hpp). A progress line shows the job is alive.
//   Each trace is then replayed under the policies (default: pytorch,
//   pytorch:expandable_segments:True, phasealloc) on a simulated GPU of --gpu bytes less the
//   process's NCCL buffers: peak reserved / allocated per phase, and whether an allocator runs out
//   of memory. With several processes a per-rank table follows: peak reserved per phase under
//   each allocator, NCCL's buffers as their own line, the device total, and which rank runs out
//   first. --json prints the replay's JSON per process (and "per_rank") plus the job's exit status
//   (the job's own standard output then goes to standard error); the HTML report is the replay's
//   (with several ranks: one page with a rank selector). The job's own non-zero exit status is
//   dryrun's, after the report of what it did. A job run with PHASEALLOC_CONF=offload:auto (or
//   calling phasealloc.offload) records its offload calls; phasealloc's replays make them again
//   and say how many bytes moved and what the copies take at --link. With --world-size the job is
//   one rank's command, run for a few ranks of a larger job with virtual peers (virtual_ranks.hpp).
// Limitations: recording runs under phasealloc's allocator, whose decisions do not change what the
//   job asks for, but a job that sizes itself from free memory (vLLM's gpu_memory_utilization) sees
//   phasealloc's free memory while recording. A job that runs out of memory while recording stops
//   early: record on a larger simulated GPU (--record-gpu) to see all of it. Only CUDA memory that
//   goes through PyTorch's allocator is traced.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "cli_options.hpp"
#include "commands.hpp"
#include "job_runner.hpp"
#include "launcher.hpp"
#include "phasealloc/conf.hpp"
#include "phasealloc/oom_report.hpp"
#include "phasealloc/trace/trace_summary.hpp"
#include "rank_report.hpp"
#include "replay_output.hpp"
#include "text_table.hpp"
#include "trace_input.hpp"
#include "virtual_ranks.hpp"

namespace phasealloc::cli {
namespace {

namespace fs = std::filesystem;

struct dryrun_args {
  std::string gpu = "80GiB";
  int gpus = 1;
  bool gpus_given = false;
  int world_size = 0;  ///< --world-size: 0 = the job runs whole
  std::string ranks;   ///< --ranks: the ranks a --world-size run runs ("" = rank 0 and the last)
  unsigned parallel = std::max(1u, std::thread::hardware_concurrency());  ///< --parallel: ranks at a time
  std::string record_gpu;
  std::string values;  ///< the simulated GPU's value level (SIMCUDA_GPU values:LEVEL), "" = simcuda's default
  std::string link = "50GB/s";  ///< host link bandwidth for the time of the job's offload copies
  std::string offload = "recorded";  ///< what phasealloc's replays do with the recorded offload calls
  std::vector<std::string> policies;
  bool json = false;
  std::string html = "phasealloc-dryrun.html";
  std::string trace_dir;
  bool quiet = false;
  std::vector<std::string> command;
};

const std::vector<std::string> default_policies = {"pytorch", "pytorch:expandable_segments:True", "phasealloc"};

std::size_t bytes_option(const std::string& flag, const std::string& value) {
  const auto b = parse_bytes(value);
  if (!b || *b == 0) throw command_error(fmt::format("{}: \"{}\" is not a byte size (e.g. 24GiB)", flag, value));
  return *b;
}

/// The traces the job's processes wrote, oldest process first.
std::vector<fs::path> traces_in(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec) && e.path().extension() == ".patrace") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
    std::error_code e1, e2;
    return fs::last_write_time(a, e1) < fs::last_write_time(b, e2);
  });
  return out;
}

std::uintmax_t bytes_in(const std::vector<fs::path>& files) {
  std::uintmax_t total = 0;
  std::error_code ec;
  for (const auto& f : files) {
    const auto n = fs::file_size(f, ec);
    if (!ec) total += n;
  }
  return total;
}

/// One line per allocator: fits, or where it runs out of memory.
std::string verdicts(const replay_report& r) {
  std::string out;
  for (const replay_result& res : r.results) {
    if (res.ooms == 0) {
      out += fmt::format("  {:<34} fits: peak reserved {} of {}\n", res.policy, format_bytes(res.peak_reserved_bytes),
                         format_bytes(r.capacity_bytes));
      continue;
    }
    std::string where;
    for (const phase_stats& p : res.phases) {
      if (p.num_ooms > 0) where += fmt::format("{}{} in {}", where.empty() ? "" : ", ", p.num_ooms, p.name);
    }
    out += fmt::format("  {:<34} OUT OF MEMORY: {} allocation(s) fail ({})\n", res.policy, res.ooms, where);
  }
  return out;
}

/// How the answers were obtained: the value level each process ran at (from its books).
std::string values_line(const std::vector<rank_replay>& ranks) {
  std::map<std::string, int> levels;
  for (const rank_replay& r : ranks) ++levels[r.books ? r.books->values : "unknown (no books)"];
  std::string which;
  for (const auto& [level, n] : levels) {
    const std::string where =
        levels.size() > 1 ? fmt::format(" in {}", n) : (ranks.size() == 1 ? "" : " in every process");
    which += fmt::format("{}{}{}", which.empty() ? "" : ", ", level, where);
  }
  return fmt::format("Values on the simulated GPU: {} (off: no kernel computed; observable: all but the heavy "
                     "products; exact: all)\n",
                     which);
}

void run_dryrun(const dryrun_args& a) {
  if (a.command.empty()) throw command_error("dryrun needs the job's command after --, e.g. -- python train.py");
  const std::size_t gpu_bytes = bytes_option("--gpu", a.gpu);
  const std::size_t link_bytes_per_second = parse_link(a.link);
  const std::size_t record_bytes = a.record_gpu.empty() ? gpu_bytes : bytes_option("--record-gpu", a.record_gpu);
  const std::vector<std::string>& policies = a.policies.empty() ? default_policies : a.policies;
  std::optional<virtual_ranks_plan> plan;
  if (a.world_size != 0 || !a.ranks.empty()) {
    if (a.world_size == 0) throw command_error("--ranks " + a.ranks + ": needs --world-size");
    plan = plan_virtual_ranks(a.world_size, a.ranks, a.gpus_given ? std::optional<int>(a.gpus) : std::nullopt,
                              a.command);
  }
  const int machine_gpus = plan ? plan->gpus_per_node : a.gpus;

  // Where the traces go: a folder the user named (kept), else a private one (removed).
  fs::path dir;
  bool remove_dir = false;
  if (!a.trace_dir.empty()) {
    dir = a.trace_dir;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw command_error(fmt::format("--trace-dir {}: {}", a.trace_dir, ec.message()));
    if (!traces_in(dir).empty()) {
      throw command_error(fmt::format("--trace-dir {}: already holds .patrace files; name an empty folder",
                                      a.trace_dir));
    }
  } else {
    std::string pattern = (fs::temp_directory_path() / "phasealloc-dryrun-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw command_error("dryrun: could not create a temporary folder");
    dir = pattern;
    remove_dir = true;
  }
  struct cleanup {
    fs::path dir;
    bool on;
    ~cleanup() {
      std::error_code ec;
      if (on) fs::remove_all(dir, ec);
    }
  } cleaner{dir, remove_dir};

  if (a.gpus < 1 || a.gpus > 16) {
    throw command_error(fmt::format("--gpus {}: the simulated machine has 1 to 16 GPUs", a.gpus));
  }
  std::vector<std::string> argv = {find_launcher("dryrun"), fmt::format("--sim-gpu={}", record_bytes), "--trace",
                                   (dir / rank_trace_pattern).string()};
  if (!a.values.empty()) argv.push_back("--sim-values=" + a.values);
  argv.push_back("--");
  argv.insert(argv.end(), a.command.begin(), a.command.end());
  std::vector<std::pair<std::string, std::string>> env;
  if (const std::string pp = source_python_path(); !pp.empty()) env.emplace_back("PYTHONPATH", pp);
  // The user's SIMCUDA_GPU first; the GPU count after it (a later key wins).
  const char* user_sim = std::getenv("SIMCUDA_GPU");
  std::string sim = user_sim != nullptr ? user_sim : "quiet:1";
  if (machine_gpus > 1) sim += fmt::format("{}count:{}", sim.empty() ? "" : ",", machine_gpus);
  if (plan) sim += std::string(sim.empty() ? "" : ",") + "nccl_peers:virtual";
  env.emplace_back("SIMCUDA_GPU", sim);
  env.emplace_back("SIMCUDA_BOOKS", (dir / rank_books_pattern).string());

  const bool tty = isatty(STDERR_FILENO) != 0;
  double last_line = -1.0;
  const auto alive = [&](double seconds) {
    if (a.quiet) return;
    if (!tty && seconds - last_line < 15.0) return;
    if (tty && seconds - last_line < 1.0) return;
    last_line = seconds;
    const auto files = traces_in(dir);
    // Each process writes its trace when it exits: a count of the finished ones, not of the running.
    std::fprintf(stderr, "%sphasealloc dryrun: job running %.0f s on a simulated %s GPU, %zu process(es) done and traced (%s)%s",
                 tty ? "\r" : "", seconds, format_bytes(record_bytes).c_str(), files.size(),
                 format_bytes(bytes_in(files)).c_str(), tty ? "   " : "\n");
    std::fflush(stderr);
  };
  job_result job;
  if (!plan) {
    job = run_job(argv, env, alive, /*stdout_to_stderr=*/a.json);
  } else {
    // Called from the rank runners' threads (one at a time), while the main thread's `alive` may be
    // drawing the progress line: it reads nothing `alive` writes.
    const auto ended = [&](int rank, const job_result& one) {
      if (a.quiet) return;
      std::fprintf(stderr, "%sphasealloc dryrun: rank %d of %d (virtual peers) %s %d after %.1f s\n",
                   tty ? "\n" : "", rank, plan->world_size,
                   one.signaled ? "killed by signal, status" : "exited with status", one.exit_status, one.seconds);
    };
    job = run_virtual_ranks(*plan, argv, env, a.parallel, alive, /*stdout_to_stderr=*/a.json, ended);
  }
  if (!a.quiet) {
    std::fprintf(stderr, "%sphasealloc dryrun: job %s %d after %.1f s\n", tty && last_line >= 0 ? "\n" : "",
                 job.signaled ? "killed by signal, status" : "exited with status", job.exit_status, job.seconds);
  }

  // A process that made no allocation (a launcher, an idle rank) leaves an empty trace: nothing to say.
  std::vector<fs::path> traces;
  std::vector<trace> loaded_traces;
  for (const fs::path& p : traces_in(dir)) {
    auto loaded = load_any_trace(p.string());
    if (!loaded) throw command_error(loaded.error());
    if (loaded.value().events.empty()) continue;
    traces.push_back(p);
    loaded_traces.push_back(std::move(loaded).value());
  }
  // Ranks in order (a process without a rank in its name keeps its place among equals).
  {
    std::vector<std::size_t> order(traces.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    const auto rank_of = [&](std::size_t i) {
      const auto who = identity_from_trace_name(traces[i].filename().string());
      return who && who->rank ? *who->rank : 0;
    };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return rank_of(x) < rank_of(y); });
    std::vector<fs::path> sorted_paths;
    std::vector<trace> sorted_traces;
    for (std::size_t i : order) {
      sorted_paths.push_back(traces[i]);
      sorted_traces.push_back(std::move(loaded_traces[i]));
    }
    traces = std::move(sorted_paths);
    loaded_traces = std::move(sorted_traces);
  }
  if (traces.empty()) {
    throw command_error(fmt::format(
        "the job (exit status {}) made no CUDA allocation through PyTorch: nothing to replay (does it import torch "
        "and use the GPU?{})",
        job.exit_status,
        job.exit_status != 0 ? " Its processes write their traces when they exit; one that is killed or aborts "
                               "writes none: see the job's errors above"
                             : ""));
  }

  nlohmann::json processes = nlohmann::json::array();
  std::vector<rank_replay> ranks;
  std::string text;
  std::vector<rank_identity> identities(traces.size());
  std::map<std::pair<std::optional<int>, std::string>, std::set<long long>> pids_by_name;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    if (auto who = identity_from_trace_name(traces[i].filename().string())) identities[i] = *who;
    pids_by_name[{identities[i].rank, identities[i].role}].insert(identities[i].pid);
  }
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const trace& t = loaded_traces[i];
    rank_replay rank;
    rank.who = identities[i];
    rank.shares_name = pids_by_name[{rank.who.rank, rank.who.role}].size() > 1;
    rank.books = read_books(dir.string(), rank.who.pid, rank.who.device);
    if (rank.books) rank.nccl_bytes = rank.books->nccl_peak_bytes;
    const std::size_t nccl = rank.nccl_bytes.value_or(0);
    if (nccl >= gpu_bytes) {
      throw command_error(fmt::format("--gpu {}: NCCL's buffers alone take {} on rank {}'s GPU", a.gpu,
                                      format_bytes(nccl), rank.who.rank.value_or(0)));
    }
    replay_report& report = rank.report;
    report.trace_name = traces[i].filename().string();
    report.events = t.events.size();
    report.floor_bytes = summarize(t).peak_live_bytes;
    report.capacity_bytes = gpu_bytes - nccl;
    report.link_bytes_per_second = link_bytes_per_second;
    for (const std::string& spec : policies) {
      replay_options options;
      options.capacity_bytes = gpu_bytes - nccl;
      options.offload = *parse_offload_replay(a.offload);  // the option's check named the three
      options.timeline_points = a.html.empty() ? 0 : 2000;
      auto r = replay(t, spec, options);
      if (!r) throw command_error(r.error());
      report.results.push_back(std::move(r).value());
    }
    const std::string nccl_line =
        rank.nccl_bytes ? fmt::format("NCCL's buffers (outside the allocator): {}; the allocator was replayed on {}\n",
                                      format_bytes(nccl), format_bytes(gpu_bytes - nccl))
                        : "NCCL's buffers: unknown (the process wrote no simulator books)\n";
    text += fmt::format("{}== process {} of {} ({}: rank {}, GPU {})\n{}\n{}On a {} GPU:\n{}", i == 0 ? "" : "\n",
                        i + 1, traces.size(), report.trace_name, rank_label(rank), rank.who.device,
                        render_replay_text(report), nccl_line, format_bytes(gpu_bytes), verdicts(report));
    nlohmann::json doc = replay_json(report);
    doc["process"] = i + 1;
    doc["rank"] = rank.who.rank ? nlohmann::json(*rank.who.rank) : nlohmann::json();
    doc["role"] = rank.who.role.empty() ? nlohmann::json() : nlohmann::json(rank.who.role);
    doc["device"] = rank.who.device;
    doc["nccl_peak_bytes"] = rank.nccl_bytes ? nlohmann::json(*rank.nccl_bytes) : nlohmann::json();
    doc["values"] = rank.books ? nlohmann::json(rank.books->values) : nlohmann::json();
    doc["virtual_peers"] = rank.books ? nlohmann::json(rank.books->virtual_peers) : nlohmann::json();
    processes.push_back(std::move(doc));
    ranks.push_back(std::move(rank));
  }
  if (ranks.size() > 1 || machine_gpus > 1) text += "\n" + render_rank_text(ranks, gpu_bytes);
  text += "\n" + values_line(ranks);
  if (plan) text += describe(*plan);
  if (!a.html.empty()) {
    std::string generated_by = "phasealloc dryrun --gpu " + a.gpu;
    if (a.gpus_given || (!plan && a.gpus > 1)) generated_by += fmt::format(" --gpus {}", a.gpus);
    if (plan) {
      generated_by += fmt::format(" --world-size {}{}", plan->world_size, a.ranks.empty() ? "" : " --ranks " + a.ranks);
    }
    generated_by += " --";
    for (const auto& c : a.command) generated_by += " " + c;
    if (ranks.size() > 1) {
      write_rank_html(a.html, ranks, gpu_bytes, generated_by);
    } else {
      write_replay_html(a.html, ranks.front().report, generated_by);
    }
    text += fmt::format("report: {}\n", a.html);
  }

  if (a.json) {
    nlohmann::json out = processes[0];
    out["job"] = {{"command", a.command}, {"exit_status", job.exit_status}, {"signaled", job.signaled},
                  {"seconds", job.seconds}, {"record_capacity_bytes", record_bytes}};
    out["processes"] = processes;
    out["per_rank"] = rank_json(ranks, gpu_bytes);
    out["virtual_ranks"] = plan ? to_json(*plan) : nlohmann::json();
    std::cout << out.dump(2) << '\n';
  } else {
    std::cout << text;
    if (!a.trace_dir.empty()) std::cout << "traces: " << a.trace_dir << '\n';
  }
  if (job.exit_status != 0) {
    std::fprintf(stderr, "phasealloc dryrun: the job failed (exit status %d); the replay covers what it did until then\n",
                 job.exit_status);
    throw command_exit{job.exit_status};
  }
}

}  // namespace

void add_dryrun_command(CLI::App& app) {
  auto args = std::make_shared<dryrun_args>();
  CLI::App* cmd = app.add_subcommand(
      "dryrun", "Run an unmodified PyTorch job on a simulated GPU and say whether it fits, under each allocator");
  cmd->add_option("--gpu", args->gpu, "the GPU's memory to plan for (the replays' capacity)")->capture_default_str();
  cmd->add_option("--gpus", args->gpus,
                  "simulated GPUs in the machine (SIMCUDA_GPU count), for multi-GPU jobs: torchrun --nproc-per-node N")
      ->capture_default_str();
  cmd->add_option("--world-size", args->world_size,
                  "dry-run a job of this many ranks by running only some of them (--ranks), each alone, the "
                  "simulated NCCL answering for the others; the command is one rank's (python train.py, not torchrun); "
                  "--gpus is then the GPUs per node (default: the world size, at most 8)");
  cmd->add_option("--ranks", args->ranks,
                  "with --world-size: the ranks to run, comma-separated (default: 0 and the last)");
  cmd->add_option("--parallel", args->parallel,
                  "with --world-size: ranks run at a time (default: the machine's hardware threads; 1 where each "
                  "rank's values need much of this machine's memory)")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  cmd->add_option("--record-gpu", args->record_gpu,
                  "the simulated GPU the job runs on while it is recorded (default: --gpu); larger lets a job that "
                  "would run out of memory finish");
  cmd->add_option("--values", args->values,
                  "which PyTorch operations' outputs are real values on the simulated GPU (computed on the CPU, for "
                  "jobs whose host code reads device values, e.g. TRL's trainers): observable (the default: all but "
                  "the heavy products, which are a stand-in), exact (all) or off (kernels are skipped: host memory "
                  "stays untouched, for jobs larger than this machine's memory); simcuda refuses another");
  cmd->add_option("-p,--policy", args->policies,
                  "allocators to compare, repeatable (default: pytorch, pytorch:expandable_segments:True, phasealloc)");
  cmd->add_flag("--json", args->json, "print the replays' JSON (per process) and the job's exit status");
  cmd->add_option("--html", args->html, "the HTML report to write (\"\" for none)")->capture_default_str();
  cmd->add_option("--trace-dir", args->trace_dir, "keep the recorded traces in this (empty or new) folder");
  cmd->add_option("--link", args->link,
                  "host link bandwidth for the time of the job's offload copies (a job run with "
                  "PHASEALLOC_CONF=offload:auto, or calling phasealloc.offload): 50GB/s is PCIe Gen5 x16")
      ->capture_default_str();
  cmd->add_option("--offload", args->offload,
                  "for a job run with PHASEALLOC_CONF=offload:auto: replay its offload calls as recorded, under "
                  "pressure (offload:pressure: each held until an allocation would run out of memory), or none")
      ->check(CLI::IsMember({"recorded", "pressure", "none"}))
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", args->quiet, "no progress line");
  cmd->add_option("command", args->command, "the job, after --: e.g. -- python train_ppo.py --steps 2")->required();
  cmd->callback([args, cmd] {
    args->gpus_given = cmd->count("--gpus") > 0;
    run_dryrun(*args);
  });
}

}  // namespace phasealloc::cli
