// Named jobs for `phasealloc synth --preset NAME`. Each is a function of nothing: the same name
// gives the same job in every build, so a preset's trace is reproducible from its name and seed.
//
// | preset           | actor / reference          | critic / reward            | batch / gen call / micro / score | prompt + gen | iters x epochs | ckpt | attention | offload          |
// |------------------|----------------------------|----------------------------|----------------------------------|--------------|----------------|------|-----------|------------------|
// | ppo-125m         | OPT-125m (GPT-2-small dims)| OPT-125m                   | 8 / 8 / 4 / 4                    | 128 + 128    | 4 x 2          | no   | eager     | none             |
// | ppo-1.3b         | OPT-1.3b                   | OPT-350m                   | 16 / 8 / 4 / 8                   | 256 + 256    | 2 x 1          | no   | eager     | none             |
// | ppo-1.3b-offload | OPT-1.3b                   | OPT-350m                   | 16 / 8 / 4 / 8                   | 256 + 256    | 2 x 1          | no   | eager     | optimizer+params |
// | ppo-7b           | Llama-2-7B (6.74B)         | TinyLlama-1.1B body (GQA 4)| 16 / 16 / 2 / 4                  | 512 + 256    | 2 x 1          | yes  | flash     | optimizer+params |
//
// (DeepSpeed-Chat's recipes pair an OPT actor with a smaller OPT critic / reward model; the 7B
// preset is a single-GPU ZeRO-Offload-style setup: a 7B actor cannot keep 16 bytes per parameter
// of AdamW state on one 80 GiB device.) All presets: bf16 weights, fp32 AdamW states, fp32 master
// weights where the optimizer lives on the GPU, one optimizer step per ppo epoch (mini_batch =
// batch), seed 1, no empty_cache() calls, an 80 GiB device.
//
// Measured (seed 1): events, binary trace size, peak live (requested) bytes, and the peak
// reserved bytes of the `pytorch` policy replaying it on a simulated 80 GiB device:
// | preset           | events    | binary  | peak live | pytorch peak reserved |
// |------------------|-----------|---------|-----------|-----------------------|
// | ppo-125m         |   400,798 | 2.7 MB  |  5.30 GiB |  6.29 GiB             |
// | ppo-1.3b         | 1,279,394 | 9.2 MB  | 37.83 GiB | 39.94 GiB             |
// | ppo-1.3b-offload | 1,272,916 | 9.1 MB  | 14.22 GiB | 15.20 GiB             |
// | ppo-7b           | 1,732,291 | 12.8 MB | 30.01 GiB | 39.06 GiB             |
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/status.hpp"
#include "phasealloc/synth/rlhf_job.hpp"

namespace phasealloc {

/// The bundled default: small enough to replay in well under a second.
inline constexpr std::string_view default_preset_name = "ppo-125m";

std::vector<std::string_view> preset_names();

/// The job `name` names, or an error listing the preset names.
result<rlhf_job, std::string> preset(std::string_view name);

}  // namespace phasealloc
