// phasealloc export IN OUT.pickle [--policy SPEC] [--capacity 80GiB]
//     any input format, replayed with a policy -> a PyTorch snapshot pickle of the layout it placed
//     (pytorch.org/memory_viz)
#include <iostream>

#include <fmt/format.h>

#include "cli_options.hpp"
#include "commands.hpp"
#include "phasealloc/export/placed_replay.hpp"
#include "phasealloc/export/placed_snapshot_exporter.hpp"
#include "phasealloc/policies/policy_registry.hpp"
#include "trace_input.hpp"

namespace phasealloc::cli {
namespace {

struct export_args {
  std::string source;
  std::string output;
  std::string policy = "pytorch";
  std::string capacity = "80GiB";
  bool no_validate = false;
};

}  // namespace

void add_export_command(CLI::App& app) {
  auto exported = std::make_shared<export_args>();
  CLI::App* ex = app.add_subcommand(
      "export", "Replay a trace with a policy and write the layout it placed as a PyTorch memory snapshot (memory_viz)");
  ex->add_option("input", exported->source, "input (any format replay reads, or synth:JOB)")->required();
  ex->add_option("output", exported->output, "output .pickle path")->required();
  ex->add_option("-p,--policy", exported->policy, "the allocator whose layout to draw (pytorch: PyTorch's own)")
      ->capture_default_str();
  ex->add_option("-c,--capacity", exported->capacity, "model device capacity")->capture_default_str();
  ex->add_flag("--no-validate", exported->no_validate, "skip checking the trace before the replay");
  ex->callback([exported] {
    // Bad arguments first, before a long load.
    if (auto made = make_policy(exported->policy); !made) {
      throw command_error(fmt::format("--policy \"{}\": {}", exported->policy, made.error()));
    }
    const std::optional<std::size_t> capacity = parse_capacity(exported->capacity);
    auto loaded = load_valid_trace(exported->source, !exported->no_validate);
    if (!loaded) throw command_error(loaded.error());
    const trace& t = loaded.value();
    replay_options options;
    options.capacity_bytes = *capacity;
    auto placed = replay_placed(t, exported->policy, options);
    if (!placed) throw command_error(fmt::format("{}: {}", exported->source, placed.error()));
    const replay_result& r = placed.value().result;
    const placed_snapshot& layout = placed.value().layout;
    if (auto written = export_placed_snapshot_file(layout, exported->output); !written) {
      throw command_error(written.error());
    }
    std::cout << fmt::format(
        "wrote {} (policy {}: {} segments, reserved {} B and allocated {} B ({} B requested) at the end, peak reserved "
        "{} B, peak allocated {} B, {} trace entries; open it at pytorch.org/memory_viz or with "
        "torch.cuda._memory_viz)\n",
        exported->output, r.policy, layout.segments.size(), r.final_reserved_bytes, r.final_allocated_bytes,
        r.final_requested_bytes, r.peak_reserved_bytes, r.peak_allocated_bytes, layout.entries.size());
  });
}

}  // namespace phasealloc::cli
