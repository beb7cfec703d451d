// `phasealloc synth`: synthesized RLHF PPO allocation traces. The whole public API in one include.
//
//   auto job = parse_job("preset:ppo-1.3b,batch:16,gen_len:256");  // or parse_job("ppo-1.3b")
//   auto t = synthesize(job.value());                               // a phasealloc::trace
//
// alloc_tag.hpp    the tags on synthesized allocations
// model_desc.hpp   model_desc, model_family, model_role, parameter_count
// rlhf_job.hpp     rlhf_job, validate_job
// presets.hpp      preset_names, preset (with the presets table)
// job_conf.hpp     parse_job, to_conf (the key:value grammar)
// synthesize.hpp   synthesize, rlhf_phase names (with the design note)
#pragma once

#include "phasealloc/synth/alloc_tag.hpp"
#include "phasealloc/synth/job_conf.hpp"
#include "phasealloc/synth/model_desc.hpp"
#include "phasealloc/synth/presets.hpp"
#include "phasealloc/synth/rlhf_job.hpp"
#include "phasealloc/synth/synthesize.hpp"
