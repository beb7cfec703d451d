// dryrun across ranks (rank_report.hpp): names, books, and the per-rank table.
#include "rank_report.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include <fmt/format.h>

#include "commands.hpp"
#include "phasealloc/oom_report.hpp"
#include "phasealloc/report/report.hpp"
#include "text_table.hpp"

namespace phasealloc::cli {
namespace {

namespace fs = std::filesystem;

std::size_t device_total(const replay_result& r, const rank_replay& rank) {
  return r.peak_reserved_bytes + rank.nccl_bytes.value_or(0);
}

}  // namespace

std::string rank_label(const rank_replay& r) {
  const std::string rank = r.who.rank ? std::to_string(*r.who.rank) : fmt::format("pid {}", r.who.pid);
  const std::string named = r.who.role.empty() ? rank : fmt::format("{} {}", rank, r.who.role);
  return r.shares_name && r.who.rank ? fmt::format("{} pid {}", named, r.who.pid) : named;
}

namespace {

/// The phases where `r` fails, "phase (n), ..." in the replay's order.
std::string oom_phases(const replay_result& r) {
  std::string out;
  for (const phase_stats& p : r.phases) {
    if (p.num_ooms > 0) out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", p.name, p.num_ooms);
  }
  return out;
}

/// Per policy index: the rank that runs out first (rank_report.hpp's rule).
std::size_t first_to_run_out(const std::vector<rank_replay>& ranks, std::size_t policy) {
  std::size_t best = 0;
  bool best_fails = false;
  std::size_t best_key = 0;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const replay_result& r = ranks[i].report.results[policy];
    const bool fails = r.ooms > 0;
    // A failing rank's peak is capped by the capacity: its demand is its peak live bytes.
    const std::size_t key = fails ? ranks[i].report.floor_bytes + ranks[i].nccl_bytes.value_or(0)
                                  : device_total(r, ranks[i]);
    if (i == 0 || (fails && !best_fails) || (fails == best_fails && key > best_key)) {
      best = i;
      best_fails = fails;
      best_key = key;
    }
  }
  return best;
}

}  // namespace

std::optional<rank_identity> identity_from_trace_name(const std::string& file_name) {
  static const std::regex name(R"(rank(\d+)(?:\.role([A-Za-z0-9_-]*))?\.pid(\d+)(?:\.dev(\d+))?\.patrace)");
  std::smatch m;
  if (!std::regex_match(file_name, m, name)) return std::nullopt;
  rank_identity who;
  who.rank = std::stoi(m[1].str());
  who.role = m[2].matched ? m[2].str() : std::string();
  who.pid = std::stoll(m[3].str());
  who.device = m[4].matched ? std::stoi(m[4].str()) : 0;
  return who;
}

std::optional<process_books> read_books(const std::string& dir, long long pid, int device) {
  const fs::path path = fs::path(dir) / fmt::format("books.{}.json", pid);
  std::ifstream in(path);
  if (!in) return std::nullopt;
  nlohmann::json books;
  try {
    in >> books;
    process_books out;
    out.values = books.at("values").get<std::string>();
    out.virtual_peers = books.at("nccl_peers").get<std::string>() == "virtual";
    for (const auto& d : books.at("devices")) {
      // A device the process held nothing on outside the allocator is not listed: NCCL's bytes 0.
      if (d.at("device").get<int>() == device) out.nccl_peak_bytes = d.at("peak_nccl_bytes").get<std::size_t>();
    }
    return out;
  } catch (const nlohmann::json::exception& e) {
    throw command_error(fmt::format("{}: not the simulator's books file ({})", path.string(), e.what()));
  }
}

std::string render_rank_text(const std::vector<rank_replay>& ranks, std::size_t gpu_bytes) {
  if (ranks.empty()) return "";
  const std::vector<replay_result>& first = ranks.front().report.results;
  std::vector<std::string> header = {"rank (GPU)"};
  for (const replay_result& r : first) header.push_back(r.policy);
  text_table table(header);
  for (const rank_replay& rank : ranks) {
    const std::string who = fmt::format("{} (GPU {}) ", rank_label(rank), rank.who.device);
    // Phases in the first policy's order; every policy replays the same events, so the same phases.
    for (const phase_stats& p : rank.report.results.front().phases) {
      std::vector<std::string> row = {who + "peak reserved: " + p.name};
      for (const replay_result& r : rank.report.results) {
        const auto it =
            std::find_if(r.phases.begin(), r.phases.end(), [&](const phase_stats& q) { return q.name == p.name; });
        row.push_back(it == r.phases.end() ? "-"
                                           : format_bytes(static_cast<std::size_t>(it->peak_reserved_bytes)) +
                                                 (it->num_ooms > 0 ? " OOM" : ""));
      }
      table.add(row);
    }
    std::vector<std::string> nccl = {who + "NCCL (outside the allocator)"};
    std::vector<std::string> total = {who + "device total"};
    for (const replay_result& r : rank.report.results) {
      nccl.push_back(rank.nccl_bytes ? format_bytes(*rank.nccl_bytes) : "unknown");
      total.push_back(r.ooms > 0            ? "OUT OF MEMORY"
                      : rank.nccl_bytes ? format_bytes(device_total(r, rank))
                                        : "at least " + format_bytes(r.peak_reserved_bytes));
    }
    table.add(nccl);
    table.add(total);
  }
  std::string out = fmt::format(
      "Per rank on a {} GPU (each rank's allocator replayed on the GPU less NCCL's buffers; device total = peak "
      "reserved + NCCL):\n{}",
      format_bytes(gpu_bytes), table.render());
  for (std::size_t p = 0; p < first.size(); ++p) {
    const rank_replay& r = ranks[first_to_run_out(ranks, p)];
    const replay_result& res = r.report.results[p];
    if (res.ooms > 0) {
      out += fmt::format("  {:<34} runs out first: rank {} (GPU {}), {} allocation(s) fail in {}\n", res.policy,
                         rank_label(r), r.who.device, res.ooms, oom_phases(res));
    } else {
      out += fmt::format("  {:<34} every rank fits; the fullest: rank {} (GPU {}), {} of {} ({} free)\n", res.policy,
                         rank_label(r), r.who.device, format_bytes(device_total(res, r)), format_bytes(gpu_bytes),
                         format_bytes(gpu_bytes - std::min(gpu_bytes, device_total(res, r))));
    }
  }
  return out;
}

nlohmann::json rank_json(const std::vector<rank_replay>& ranks, std::size_t gpu_bytes) {
  nlohmann::json out = {{"gpu_bytes", gpu_bytes}, {"ranks", nlohmann::json::array()},
                        {"runs_out_first", nlohmann::json::array()}};
  for (const rank_replay& rank : ranks) {
    nlohmann::json results = nlohmann::json::array();
    for (const replay_result& r : rank.report.results) {
      nlohmann::json phases = nlohmann::json::array();
      for (const phase_stats& p : r.phases) {
        phases.push_back({{"name", p.name}, {"peak_reserved_bytes", p.peak_reserved_bytes}, {"num_ooms", p.num_ooms}});
      }
      results.push_back({{"policy", r.policy},
                         {"capacity_bytes", r.capacity_bytes},
                         {"peak_reserved_bytes", r.peak_reserved_bytes},
                         {"device_total_bytes",
                          rank.nccl_bytes ? nlohmann::json(device_total(r, rank)) : nlohmann::json()},
                         {"ooms", r.ooms},
                         {"phases", std::move(phases)}});
    }
    out["ranks"].push_back({{"rank", rank.who.rank ? nlohmann::json(*rank.who.rank) : nlohmann::json()},
                            {"role", rank.who.role.empty() ? nlohmann::json() : nlohmann::json(rank.who.role)},
                            {"pid", rank.who.pid},
                            {"device", rank.who.device},
                            {"trace", rank.report.trace_name},
                            {"nccl_peak_bytes", rank.nccl_bytes ? nlohmann::json(*rank.nccl_bytes) : nlohmann::json()},
                            {"results", std::move(results)}});
  }
  if (ranks.empty()) return out;
  for (std::size_t p = 0; p < ranks.front().report.results.size(); ++p) {
    const rank_replay& r = ranks[first_to_run_out(ranks, p)];
    const replay_result& res = r.report.results[p];
    nlohmann::json phases = nlohmann::json::array();
    for (const phase_stats& ph : res.phases)
      if (ph.num_ooms > 0) phases.push_back(ph.name);
    out["runs_out_first"].push_back({{"policy", res.policy},
                                     {"rank", r.who.rank ? nlohmann::json(*r.who.rank) : nlohmann::json()},
                                     {"role", r.who.role.empty() ? nlohmann::json() : nlohmann::json(r.who.role)},
                                     {"device", r.who.device},
                                     {"fits", res.ooms == 0},
                                     {"phases", std::move(phases)},
                                     {"device_total_bytes", device_total(res, r)}});
  }
  return out;
}

void write_rank_html(const std::string& path, const std::vector<rank_replay>& ranks, std::size_t gpu_bytes,
                     const std::string& generated_by) {
  std::vector<rank_report_input> pages;
  for (const rank_replay& r : ranks) {
    rank_report_input page;
    page.label = fmt::format("rank {} (GPU {})", rank_label(r), r.who.device);
    page.nccl_bytes = r.nccl_bytes;
    page.report.trace_name = r.report.trace_name;
    page.report.floor_bytes = r.report.floor_bytes;
    page.report.capacity_bytes = r.report.capacity_bytes;
    page.report.results = r.report.results;
    page.report.generated_by = generated_by;
    pages.push_back(std::move(page));
  }
  auto written = write_rank_report(path, pages, gpu_bytes, generated_by);
  if (!written) throw command_error(written.error());
}

}  // namespace phasealloc::cli
