#include "torch_engine.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "launcher.hpp"
#include "phasealloc/conf.hpp"
#include "phasealloc/policies/policy_registry.hpp"
#include "phasealloc/trace/trace_records.hpp"

namespace phasealloc::cli {
namespace {

namespace fs = std::filesystem;

/// The key of the `pytorch` policy that is phasealloc's, not PyTorch's.
constexpr std::string_view block_order_key = "block_order";

/// pytorch[:KEYS] -> KEYS.
std::string policy_keys(const std::string& spec) {
  const policy_spec_parts parts = split_policy_spec(spec);
  if (parts.name == "pytorch") return std::string(parts.conf);
  throw command_error(fmt::format(
      "--engine torch replays through PyTorch's own allocator: the policy must be pytorch[:KEYS], not \"{}\"", spec));
}

std::vector<conf_entry> policy_entries(const std::string& spec) {
  auto entries = parse_conf(policy_keys(spec));
  if (!entries) throw command_error(fmt::format("--engine torch: policy \"{}\": {}", spec, entries.error()));
  return std::move(entries).value();
}

/// pytorch[:KEYS] -> PyTorch's PYTORCH_CUDA_ALLOC_CONF: the keys less block_order, values verbatim.
std::string alloc_conf(const std::string& spec) {
  std::string conf;
  for (const conf_entry& e : policy_entries(spec)) {
    if (e.key == block_order_key) continue;
    conf += fmt::format("{}{}:{}", conf.empty() ? "" : ",", e.key, e.value);
  }
  return conf;
}

class temp_dir {
 public:
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "phasealloc-torch-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw command_error("--engine torch: could not create a temporary folder");
    path_ = pattern;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::int64_t get_int(const nlohmann::json& j, const char* key) { return j.value(key, std::int64_t{0}); }

}  // namespace

torch_replay replay_with_torch(const trace& t, const std::string& policy_spec, std::size_t capacity_bytes) {
  const std::string conf = alloc_conf(policy_spec);
  const std::string launcher = find_launcher("--engine torch");
  const char* python_env = std::getenv("PHASEALLOC_PYTHON");
  const std::string python = python_env != nullptr && *python_env != '\0' ? python_env : "python3";

  temp_dir dir;
  const fs::path trace_path = dir.path() / "trace.records";
  const fs::path result_path = dir.path() / "result.json";
  const fs::path log_path = dir.path() / "driver.log";
  {
    std::ofstream out(trace_path);
    auto written = write_trace_records(t, out, trace_path.string());
    if (!written) throw command_error(written.error().message());
  }
  // values:off: the replay drives the allocator itself, no operation's value matters, and the
  // simulated memory stays untouched (a replay at 80 GiB needs no host memory for it).
  const std::string python_path = source_python_path();
  std::error_code ec;
  const std::string command = fmt::format(
      "env PYTORCH_CUDA_ALLOC_CONF={} SIMCUDA_GPU=quiet:1,values:off {}{} --sim-gpu={} --native -- {} -m phasealloc.torch_replay "
      "{} --out {} >{} 2>&1",
      shell_quote(conf), python_path.empty() ? "" : "PYTHONPATH=" + shell_quote(python_path) + " ",
      shell_quote(launcher), capacity_bytes, shell_quote(python), shell_quote(trace_path.string()),
      shell_quote(result_path.string()), shell_quote(log_path.string()));
  const int status = std::system(command.c_str());
  if (status != 0 || !fs::exists(result_path, ec)) {
    std::ifstream log(log_path);
    std::stringstream text;
    text << log.rdbuf();
    std::string tail = text.str();
    if (tail.size() > 4000) tail = "..." + tail.substr(tail.size() - 4000);
    throw command_error(fmt::format("--engine torch: the PyTorch replay failed (exit status {}):\n{}", status, tail));
  }
  std::ifstream in(result_path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    throw command_error(fmt::format("--engine torch: unreadable result from phasealloc.torch_replay: {}", e.what()));
  }
  torch_replay out;
  replay_result& r = out.result;
  r.policy = policy_spec + " (torch " + j.value("torch_version", std::string("?")) + ")";
  r.device = "simcuda (PyTorch's allocator)";
  r.models_recording = true;  // PyTorch's own allocator
  r.capacity_bytes = capacity_bytes;
  r.events = static_cast<std::size_t>(get_int(j, "events"));
  r.peak_reserved_bytes = static_cast<std::size_t>(get_int(j, "peak_reserved_bytes"));
  r.peak_allocated_bytes = static_cast<std::size_t>(get_int(j, "peak_allocated_bytes"));
  r.peak_requested_bytes = static_cast<std::size_t>(get_int(j, "peak_requested_bytes"));
  r.final_reserved_bytes = static_cast<std::size_t>(get_int(j, "final_reserved_bytes"));
  r.final_allocated_bytes = static_cast<std::size_t>(get_int(j, "final_allocated_bytes"));
  r.final_requested_bytes = static_cast<std::size_t>(get_int(j, "final_requested_bytes"));
  r.device_allocs = get_int(j, "device_allocs");
  r.device_frees = get_int(j, "device_frees");
  r.device_maps = get_int(j, "device_maps");
  r.device_unmaps = get_int(j, "device_unmaps");
  r.alloc_retries = get_int(j, "alloc_retries");
  r.ooms = get_int(j, "ooms");
  r.wall_seconds = j.value("wall_seconds", 0.0);
  out.block_order = j.value("block_order", std::string());
  for (const auto& p : j.value("phases", nlohmann::json::array())) {
    phase_stats s;
    s.name = p.value("name", std::string());
    s.intervals = get_int(p, "intervals");
    s.peak_allocated_bytes = get_int(p, "peak_allocated_bytes");
    s.peak_reserved_bytes = get_int(p, "peak_reserved_bytes");
    s.peak_active_bytes = get_int(p, "peak_active_bytes");
    s.peak_requested_bytes = get_int(p, "peak_requested_bytes");
    s.num_allocs = get_int(p, "num_allocs");
    s.num_frees = get_int(p, "num_frees");
    s.num_alloc_retries = get_int(p, "num_alloc_retries");
    s.num_ooms = get_int(p, "num_ooms");
    r.phases.push_back(std::move(s));
  }
  for (const auto& e : j.value("segment_events", nlohmann::json::array())) {
    out.segments.push_back({e.value("action", std::string()), static_cast<std::size_t>(get_int(e, "bytes"))});
  }
  return out;
}

std::string spec_for_block_order(const std::string& policy_spec, const std::string& block_order) {
  if (block_order.empty() || block_order == "segment_age") return policy_spec;  // the model's default
  for (const conf_entry& e : policy_entries(policy_spec)) {
    if (e.key == block_order_key) return policy_spec;
  }
  return fmt::format("{}{}{}:{}", policy_spec, policy_keys(policy_spec).empty() ? ":" : ",", block_order_key,
                     block_order);
}

std::vector<segment_step> model_segments(const replay_result& r) {
  std::vector<segment_step> out;
  out.reserve(r.segment_events.size());
  for (const auto& [op, bytes] : r.segment_events) {
    const char* name = op == trace_op::segment_alloc  ? "segment_alloc"
                       : op == trace_op::segment_free ? "segment_free"
                       : op == trace_op::segment_map  ? "segment_map"
                                                      : "segment_unmap";
    out.push_back({name, bytes});
  }
  return out;
}

}  // namespace phasealloc::cli
