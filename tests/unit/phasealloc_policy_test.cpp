// The phasealloc policy on the engine and a virtual-memory model device: one scenario per feature,
// each built so that it needs that feature, compared with the feature turned off.
#include "phasealloc/policies/phasealloc_policy.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policies/policy_registry.hpp"

namespace phasealloc {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct rig {
  explicit rig(std::string_view spec, std::size_t capacity = 4 * gib)
      : device(model_device_config{.capacity_bytes = capacity, .virtual_memory = true}),
        pol(make_policy(spec).value()),
        eng(device, *pol, engine_options{.strict = true, .check_invariants = true}) {}
  device_address alloc(std::size_t bytes, std::uint32_t tag = 0) { return eng.allocate(bytes, 0, tag).value(); }
  void free(device_address a) { ASSERT_EQ(eng.deallocate(a), errc::ok); }
  std::size_t peak_reserved() const { return static_cast<std::size_t>(eng.stats().reserved_bytes[stat_type::all].peak); }
  std::size_t reserved() const { return eng.levels().reserved_bytes; }

  model_device device;
  std::unique_ptr<policy> pol;
  engine eng;
};

/// One RLHF-shaped iteration: generation grows per-layer KV caches by concatenation (allocate
/// n+1 tokens, free n), keeps the rollout, then training allocates large activations.
void rlhf_iteration(rig& r, int layers, int steps, std::size_t token_bytes, std::size_t activation_bytes) {
  r.eng.set_phase("generation");
  std::vector<device_address> kv(static_cast<std::size_t>(layers), 0);
  for (int t = 1; t <= steps; ++t) {
    for (auto& a : kv) {
      const device_address grown = r.alloc(static_cast<std::size_t>(t) * token_bytes);
      if (a != 0) r.free(a);
      a = grown;
    }
  }
  const device_address rollout = r.alloc(3 * mib + 100);  // outlives generation
  for (auto a : kv) r.free(a);
  r.eng.set_phase("training");
  std::vector<device_address> saved;
  for (int l = 0; l < layers; ++l) saved.push_back(r.alloc(activation_bytes));
  for (auto it = saved.rbegin(); it != saved.rend(); ++it) r.free(*it);
  r.free(rollout);
  r.eng.set_phase("optimizer");
}

TEST(PhaseallocPolicyTest, TransitionReleaseKeepsGenerationCacheOutOfTheNextPhase) {
  // Generation caches KV pages; the optimizer phase that follows needs a fraction of them. Without
  // a release the optimizer's reserved memory is generation's (fragmentation near 1); with one it
  // is its own.
  rig none("phasealloc:release:none,reclaim:false");
  rig all("phasealloc:release:all,reclaim:false,release_threshold:0,grow:2MiB");
  for (rig* r : {&none, &all}) {
    rlhf_iteration(*r, 8, 64, 64 * kib, 40 * mib);  // ends by entering "optimizer"
    const device_address state = r->alloc(16 * mib);
    r->free(state);
    r->eng.set_phase("generation");
  }
  const auto optimizer = [](const rig& r) {
    const auto phases = r.eng.phases();
    return *std::find_if(phases.begin(), phases.end(), [](auto& p) { return p.name == "optimizer"; });
  };
  EXPECT_GT(optimizer(none).fragmentation(), 0.9);
  EXPECT_LE(optimizer(all).fragmentation(), 0.03);
  EXPECT_LE(optimizer(all).peak_reserved_bytes, static_cast<std::int64_t>(16 * mib));
  EXPECT_LE(all.peak_reserved(), none.peak_reserved());
}

TEST(PhaseallocPolicyTest, ReclaimUnmapsHolesBeforeGrowingPastTheHighWaterMark) {
  rig off("phasealloc:release:none,reclaim:false");
  rig on("phasealloc:release:none,reclaim:true,reclaim_min_run:2MiB");
  for (rig* r : {&off, &on}) {
    r->eng.set_phase("training");
    const device_address a = r->alloc(10 * mib);
    const device_address hole = r->alloc(30 * mib);
    const device_address c = r->alloc(10 * mib);
    r->free(hole);                                // a 30 MiB hole between two live blocks
    const device_address big = r->alloc(40 * mib);  // fits no hole
    for (auto p : {a, c, big}) r->free(p);
  }
  EXPECT_EQ(off.peak_reserved(), 90 * mib);  // the hole stays mapped beside the new 40 MiB
  EXPECT_EQ(on.peak_reserved(), 60 * mib);   // its pages were reused: live peak rounded to pages
  EXPECT_GT(on.eng.stats().num_device_unmap, 0);
}

TEST(PhaseallocPolicyTest, ReclaimTakesSmallHolesLeftByAnEarlierPhaseButNotThisPhasesOwn) {
  // A 30 MiB hole is under reclaim_min_run (128 MiB). Left over by generation, it is dead weight
  // for training and is reclaimed when training grows past the high-water mark; made by training
  // itself, it is working set and stays mapped (unmapping it would churn).
  rig stale("phasealloc:release:none");
  rig fresh("phasealloc:release:none");
  for (rig* r : {&stale, &fresh}) {
    r->eng.set_phase(r == &stale ? "generation" : "training");
    const device_address a = r->alloc(10 * mib);
    const device_address hole = r->alloc(30 * mib);
    const device_address c = r->alloc(10 * mib);
    r->free(hole);
    r->eng.set_phase("training");  // for `fresh`, a new interval of the same phase: still its own
    const device_address big = r->alloc(40 * mib);  // fits no hole: grows past the high-water mark
    for (auto p : {a, c, big}) r->free(p);
  }
  EXPECT_EQ(stale.peak_reserved(), 60 * mib);  // the hole's pages were reused
  EXPECT_EQ(fresh.peak_reserved(), 90 * mib);  // the hole stayed beside the new 40 MiB
  EXPECT_GT(stale.eng.stats().num_device_unmap, fresh.eng.stats().num_device_unmap);
}

TEST(PhaseallocPolicyTest, AdaptiveReleaseKeepsWhatTheNextPhaseNeededLastTime) {
  rig all("phasealloc:release:all,release_threshold:0,grow:2MiB");
  rig adaptive("phasealloc:release:adaptive,release_threshold:0,grow:2MiB");
  // Generation leaves 8 MiB KV runs cached; training's 4 MiB activations fit in them.
  for (int iteration = 0; iteration < 4; ++iteration) {
    for (rig* r : {&all, &adaptive}) rlhf_iteration(*r, 8, 32, 256 * kib, 4 * mib);
  }
  // Same peak: adaptive keeps only what the next phase is predicted to use...
  EXPECT_LE(adaptive.peak_reserved(), all.peak_reserved() + 4 * mib);
  // ...and saves the calls that `all` spends unmapping and mapping it again every iteration.
  const device_stats a = all.eng.stats();
  const device_stats b = adaptive.eng.stats();
  EXPECT_LT(b.num_device_map + b.num_device_unmap, a.num_device_map + a.num_device_unmap);
  const auto& learned = dynamic_cast<const phasealloc_policy&>(*adaptive.pol).learned_needs();
  ASSERT_TRUE(learned.count("training"));
  EXPECT_EQ(learned.at("training").peak_allocated_bytes, 8 * 4 * mib + 3 * mib + 512);
  EXPECT_TRUE(learned.at("training").entered_trimmed);
  EXPECT_GE(learned.at("training").bytes(), learned.at("training").peak_allocated_bytes);
}

TEST(PhaseallocPolicyTest, MinibatchPingPongKeepsTrainingMemoryButTheStepEndStillReleases) {
  // Two minibatches per step: training -> optimizer -> training -> optimizer -> generation. Once the
  // policy has seen the optimizer hand back to training, it keeps training's memory over the short
  // optimizer interval (no release and regrowth per minibatch); the step's end, into generation,
  // still gives it back.
  rig r("phasealloc:release:adaptive,release_threshold:0,reclaim:false");
  const auto unmaps = [&] { return r.eng.stats().num_device_unmap; };
  const auto minibatch = [&] {
    r.eng.set_phase("training");
    std::vector<device_address> saved;
    for (int l = 0; l < 8; ++l) saved.push_back(r.alloc(40 * mib));
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) r.free(*it);
    r.eng.set_phase("optimizer");
    r.free(r.alloc(4 * mib));
  };
  std::int64_t in_minibatches = 0, at_step_end = 0;
  for (int step = 0; step < 4; ++step) {
    r.eng.set_phase("generation");
    r.free(r.alloc(16 * mib));
    const std::int64_t before = unmaps();
    minibatch();
    minibatch();
    const std::int64_t after_minibatches = unmaps();
    r.eng.set_phase("generation");
    if (step >= 2) {  // learned: every phase and the optimizer's successors have been seen
      in_minibatches += after_minibatches - before;
      at_step_end += unmaps() - after_minibatches;
    }
  }
  EXPECT_EQ(in_minibatches, 0);
  EXPECT_GT(at_step_end, 0);
  EXPECT_LT(r.reserved(), 8 * 40 * mib);  // generation does not hold training's activations
}

TEST(PhaseallocPolicyTest, RegrowthAfterATransitionReleaseTakesFewCallsAndKeepsThePeak) {
  // Training needs 16 x 40 MiB of activations; the optimizer and generation need far less, so
  // every iteration the adaptive release returns training's memory and training grows it back.
  rig stepwise("phasealloc:release:adaptive,release_threshold:0,map_ahead:false");
  rig ahead("phasealloc:release:adaptive,release_threshold:0");
  std::vector<std::int64_t> last_training_maps;
  for (rig* r : {&stepwise, &ahead}) {
    const auto training_maps = [&] {
      for (const auto& p : r->eng.phases()) {
        if (p.name == "training") return p.num_device_map;
      }
      return std::int64_t{0};
    };
    std::int64_t before = 0;
    for (int iteration = 0; iteration < 4; ++iteration) {
      before = training_maps();
      rlhf_iteration(*r, 16, 8, 256 * kib, 40 * mib);
    }
    last_training_maps.push_back(training_maps() - before);
  }
  // Step by step: 640 MiB in 20 MiB steps (40 MiB blocks: one map per block); ahead: a few calls.
  EXPECT_GE(last_training_maps[0], 16);
  EXPECT_LE(last_training_maps[1], 3);
  EXPECT_GT(ahead.eng.stats().num_device_unmap, 0);  // the release did happen every iteration
  // Mapping ahead stops at the high-water mark; what the small pool maps later may add a page or
  // three on top (within 1% here).
  EXPECT_LE(ahead.peak_reserved(), stepwise.peak_reserved() + stepwise.peak_reserved() / 100);
  // What training needs was learned from a trimmed start: its reserved peak then.
  const auto& learned = dynamic_cast<const phasealloc_policy&>(*ahead.pol).learned_needs();
  ASSERT_TRUE(learned.count("training"));
  EXPECT_TRUE(learned.at("training").entered_trimmed);
  EXPECT_GE(learned.at("training").bytes(), 16 * 40 * mib);
}

TEST(PhaseallocPolicyTest, NeedFromEntryPredictsWhatAPhaseAddsToWhatItBeginsWith) {
  // Each step, training keeps one more 32 MiB block (a growing rollout history), so generation
  // begins with 32 MiB more allocated every time, and adds the same 64 MiB of KV caches to it.
  // Keeping generation's absolute peak of last time leaves it 32 MiB short each step: it grows
  // back what the release took. Keeping what it added on top of what it begins with does not.
  rig absolute("phasealloc:release:adaptive,release_threshold:0,reclaim:false,need_from_entry:false");
  rig from_entry("phasealloc:release:adaptive,release_threshold:0,reclaim:false");  // the default
  std::vector<std::int64_t> generation_maps;
  std::vector<std::size_t> generation_peaks;
  for (rig* r : {&absolute, &from_entry}) {
    const auto maps_in = [&](std::string_view phase) {
      for (const auto& p : r->eng.phases()) {
        if (p.name == phase) return p.num_device_map;
      }
      return std::int64_t{0};
    };
    std::vector<device_address> kept;
    std::int64_t late_maps = 0;
    std::size_t late_peak = 0;
    for (int step = 0; step < 6; ++step) {
      r->eng.set_phase("generation");
      const std::int64_t before = maps_in("generation");
      std::vector<device_address> kv;
      for (int l = 0; l < 8; ++l) kv.push_back(r->alloc(8 * mib));
      if (step >= 2) {  // learned: generation has run from a trimmed start
        late_maps += maps_in("generation") - before;
        late_peak = std::max(late_peak, r->reserved());
      }
      for (device_address a : kv) r->free(a);
      r->eng.set_phase("training");
      std::vector<device_address> saved;
      for (int l = 0; l < 16; ++l) saved.push_back(r->alloc(40 * mib));
      for (auto it = saved.rbegin(); it != saved.rend(); ++it) r->free(*it);
      kept.push_back(r->alloc(32 * mib));
      r->eng.set_phase("optimizer");
      r->free(r->alloc(4 * mib));
    }
    generation_maps.push_back(late_maps);
    generation_peaks.push_back(late_peak);
  }
  // Absolute: 2 or 3 maps a step (10 in the last four). From the entry level: what is kept is the
  // 64 MiB generation adds, but in the runs a largest-first release leaves (the kept block splits
  // them), so one block may need its last pages mapped: one map a step at most.
  EXPECT_GE(generation_maps[0], 8);
  EXPECT_LE(generation_maps[1], 4);
  // It does not hold more to do so: what it holds while generating is at most what the absolute
  // prediction held.
  EXPECT_LE(generation_peaks[1], generation_peaks[0]);
  const auto& learned = dynamic_cast<const phasealloc_policy&>(*from_entry.pol).learned_needs();
  ASSERT_TRUE(learned.count("generation"));
  EXPECT_EQ(learned.at("generation").growth_bytes(), 64 * mib);
  EXPECT_THAT(absolute.pol->spec(), HasSubstr(",need_from_entry:false"));
  EXPECT_THAT(from_entry.pol->spec(), Not(HasSubstr("need_from_entry")));
  EXPECT_THAT(make_policy("phasealloc:need_from_entry:yes").error(), HasSubstr("'need_from_entry'"));
}

TEST(PhaseallocPolicyTest, NeedFromEntryCountsWhatAPhaseMadeAndStillHoldsOnce) {
  // A phase's first interval loads weights that stay (512 MiB), another phase trains with 1 GiB of
  // activations, a third syncs, and the first comes back. What the first phase added last time
  // (the weights) is still allocated when it begins again: counted in the entry level and in what
  // it added, it would keep 512 MiB of training's cache that nobody needs (memory a colocated
  // rollout engine could use). Counted once, the release returns all of it.
  rig r("phasealloc:release:adaptive,release_threshold:0,reclaim:false");
  for (int step = 0; step < 2; ++step) {
    r.eng.set_phase("idle");
    if (step == 0) (void)r.alloc(512 * mib);  // weights, kept
    ASSERT_EQ(r.reserved(), 512 * mib) << "step " << step;
    r.eng.set_phase("train");
    r.free(r.alloc(gib));
    r.eng.set_phase("sync");
  }
  // Its second interval began with the weights and made nothing: it adds nothing.
  const auto& learned = dynamic_cast<const phasealloc_policy&>(*r.pol).learned_needs();
  ASSERT_TRUE(learned.count("idle"));
  EXPECT_EQ(learned.at("idle").growth_bytes(), 0u);  // its second interval made nothing
}

TEST(PhaseallocPolicyTest, KeepForStepKeepsWhatTheRestOfTheStepNeeds) {
  // A step: generation (256 MiB of KV caches), inference (16 MiB), training (512 MiB of
  // activations). The release into inference keeps inference's need only, so training maps again
  // what that release unmapped, every step. Keeping what the rest of the step needed last step
  // (training's 512 MiB) removes that release and its regrowth; the release into generation, the
  // step's start, is unchanged, so what generation holds does not move.
  rig plain("phasealloc:release:adaptive,release_threshold:0,reclaim:false");
  rig for_step("phasealloc:release:adaptive,release_threshold:0,reclaim:false,keep_for_step:true");
  std::vector<std::int64_t> unmaps_into_inference, training_maps;
  std::vector<std::size_t> generation_entry;
  for (rig* r : {&plain, &for_step}) {
    const auto count = [&](std::string_view phase, bool maps) {
      for (const auto& p : r->eng.phases()) {
        if (p.name == phase) return maps ? p.num_device_map : p.num_device_unmap;
      }
      return std::int64_t{0};
    };
    std::int64_t unmaps = 0, maps = 0;
    std::size_t entry = 0;
    for (int step = 0; step < 4; ++step) {
      r->eng.set_phase("generation");
      if (step >= 2) entry = std::max(entry, r->reserved());
      std::vector<device_address> kv;
      for (int l = 0; l < 8; ++l) kv.push_back(r->alloc(32 * mib));
      for (device_address a : kv) r->free(a);
      const std::int64_t generation_unmaps = count("generation", false);
      r->eng.set_phase("inference");  // generation's release runs in its books
      r->free(r->alloc(16 * mib));
      const std::int64_t training_maps_before = count("training", true);
      r->eng.set_phase("training");
      std::vector<device_address> saved;
      for (int l = 0; l < 16; ++l) saved.push_back(r->alloc(32 * mib));
      for (device_address a : saved) r->free(a);
      if (step >= 2) {  // learned: every phase has run, the last step's phases are known
        unmaps += count("generation", false) - generation_unmaps;
        maps += count("training", true) - training_maps_before;
      }
    }
    unmaps_into_inference.push_back(unmaps);
    training_maps.push_back(maps);
    generation_entry.push_back(entry);
  }
  EXPECT_GE(unmaps_into_inference[0], 2);  // one a step at least
  EXPECT_GE(training_maps[0], 2);
  EXPECT_EQ(unmaps_into_inference[1], 0);
  // Training still maps the rest of its need (map-ahead does it in as few calls either way); the
  // calls saved are the release's.
  EXPECT_LE(training_maps[1], training_maps[0]);
  EXPECT_LT(unmaps_into_inference[1] + training_maps[1], unmaps_into_inference[0] + training_maps[0]);
  EXPECT_EQ(generation_entry[1], generation_entry[0]);  // the step's start releases as before
  EXPECT_THAT(for_step.pol->spec(), HasSubstr(",keep_for_step:true"));
  EXPECT_THAT(plain.pol->spec(), Not(HasSubstr("keep_for_step")));
}

TEST(PhaseallocPolicyTest, GrowWholeMapsWholeGrowStepsAndLeavesTheRestForTheNextRequests) {
  // A model load: per layer, weights of 32, 32, 24 and 8 MiB (plus 200 KiB, a page's rest, so that
  // no request ends on a page), none freed. Growth by max(request, 20 MiB) rounded to a page leaves
  // less than a page free after each large weight, so almost every weight maps; whole 20 MiB steps
  // leave the rest of the last step, and the next weight often fits in it.
  constexpr std::size_t rest = 200 * kib;
  std::vector<std::int64_t> maps;
  std::vector<std::size_t> peaks;
  for (std::string_view spec : {"phasealloc", "phasealloc:grow_whole:true"}) {
    rig r(spec);
    for (int layer = 0; layer < 8; ++layer) {
      for (std::size_t w : {32 * mib, 32 * mib, 24 * mib, 8 * mib}) (void)r.alloc(w + rest);
    }
    maps.push_back(r.eng.stats().num_device_map);
    peaks.push_back(r.peak_reserved());
  }
  EXPECT_EQ(maps[0], 32);  // one map per weight
  EXPECT_EQ(maps[1], 27);  // three a layer (four in three layers): the 8 MiB weight fits in a step's rest
  // What it holds more is the unused rest of the last step: less than one step.
  EXPECT_LT(peaks[1], peaks[0] + 20 * mib);
  EXPECT_THAT(make_policy("phasealloc:grow_whole:true").value()->spec(), HasSubstr(",grow_whole:true"));
  EXPECT_THAT(make_policy("phasealloc:grow_whole:maybe").error(), HasSubstr("'grow_whole'"));
}

TEST(PhaseallocPolicyTest, SmallPoolGrowsByTwoPagesPerMapCall) {
  // 256 small long-lived tensors of 64 KiB (16 MiB, LoRA-adapter-like), then each step releases
  // every free page at its end and 128 short-lived 64 KiB tensors come back: the small pool regrows
  // 8 MiB. Page by page that is one map per 2 MiB; with small_grow (two pages) half as many.
  rig pages("phasealloc:release:all,release_threshold:0,small_grow:0");
  rig two("phasealloc:release:all,release_threshold:0");
  std::vector<std::int64_t> maps;
  std::vector<std::size_t> peaks;
  for (rig* r : {&pages, &two}) {
    r->eng.set_phase("load");
    std::vector<device_address> adapters;
    for (int i = 0; i < 256; ++i) adapters.push_back(r->alloc(64 * kib));
    for (int step = 0; step < 3; ++step) {
      r->eng.set_phase("training");
      std::vector<device_address> temporaries;
      for (int i = 0; i < 128; ++i) temporaries.push_back(r->alloc(64 * kib));
      for (device_address a : temporaries) r->free(a);
      r->eng.set_phase("optimizer");  // release:all returns the 8 MiB of free small pages
    }
    maps.push_back(r->eng.stats().num_device_map);
    peaks.push_back(r->peak_reserved());
    for (device_address a : adapters) r->free(a);
  }
  // Load 16 MiB + 3 regrowths of 8 MiB: 8 + 12 = 20 pages (and the reservations' first maps).
  EXPECT_GE(maps[0], 20);
  EXPECT_LE(maps[1], maps[0] / 2 + 1);
  // The peak moves by at most the one extra page the last growth maps ahead.
  EXPECT_LE(peaks[1], peaks[0] + 2 * mib);
  EXPECT_EQ(peaks[0], 24 * mib);
}

TEST(PhaseallocPolicyTest, PinnedChunksReloadIntoTheSameSlotsAcrossIterations) {
  // ProTrain-style offload: every iteration the optimizer reloads 4 parameter chunks (tag 7),
  // uses them, and offloads them again, while other phases come and go.
  constexpr std::uint32_t chunk_tag = 7;
  rig pinned("phasealloc:release:all,release_threshold:0,pin_tags:[7]");
  rig unpinned("phasealloc:release:all,release_threshold:0");
  for (rig* r : {&pinned, &unpinned}) {
    std::vector<std::vector<device_address>> slots;
    for (int iteration = 0; iteration < 3; ++iteration) {
      rlhf_iteration(*r, 4, 16, 64 * kib, 40 * mib);
      std::vector<device_address> chunks;
      for (int c = 0; c < 4; ++c) chunks.push_back(r->alloc(64 * mib, chunk_tag));
      slots.push_back(chunks);
      for (auto a : chunks) r->free(a);
      r->eng.set_phase("generation");
    }
    if (r == &pinned) {
      EXPECT_EQ(slots[0], slots[1]);
      EXPECT_EQ(slots[1], slots[2]);
    }
  }
  // Pinned: the chunk pool is mapped once; unpinned: transition release gives it back every time
  // (and growth maps it again).
  const auto snapshot = pinned.eng.take_snapshot();
  const auto pool = std::find_if(snapshot.segments.begin(), snapshot.segments.end(), [](auto& s) { return s.pool == "pinned"; });
  ASSERT_NE(pool, snapshot.segments.end());
  EXPECT_EQ(pool->mapped_bytes, 4 * 64 * mib);
  const auto calls = [](const rig& r) { return r.eng.stats().num_device_map + r.eng.stats().num_device_unmap; };
  EXPECT_LT(calls(pinned), calls(unpinned));
}

TEST(PhaseallocPolicyTest, TheFirst15NamedTagsHavePagesOfTheirOwn) {
  rig r("phasealloc");
  constexpr std::size_t page = 2 * mib;
  // Small and large requests of no tag, a trace's category (7), and named tags 1..16, interleaved:
  // no page holds blocks of two of: none, named tag 1, ..., named tag 15 (category 7 and the 16th
  // name share the untagged pools).
  std::map<device_address, std::set<std::uint32_t>> owners_of_page;
  for (int round = 0; round < 3; ++round) {
    for (std::uint32_t n = 0; n <= 17; ++n) {
      const std::uint32_t tag = n == 0 ? 0 : n == 1 ? 7 : named_tag_base + (n - 2);
      const std::uint32_t owner = n >= 2 && n <= 16 ? n : 0;
      for (const std::size_t bytes : {std::size_t{512}, 70 * kib, 3 * mib + 512}) {
        const device_address a = r.alloc(bytes, tag);
        for (device_address p = a / page * page; p < a + bytes; p += page) owners_of_page[p].insert(owner);
      }
    }
  }
  for (const auto& [p, owners] : owners_of_page) EXPECT_EQ(owners.size(), 1u) << "page " << p;
  const auto snapshot = r.eng.take_snapshot();
  std::set<std::string> pools;
  for (const auto& s : snapshot.segments) pools.insert(s.pool);
  EXPECT_TRUE(pools.count("named tag 1") && pools.count("named tag 15") && !pools.count("named tag 16"));
}

TEST(PhaseallocPolicyTest, PhasePoolsKeepTrainingStateOutOfGenerationPages) {
  // Generation's KV blocks (1.25 MiB, not page multiples) die in two waves; training allocates
  // long-lived state of the same size in between. Shared pool: the state fills the first wave's
  // holes, so every page holds a live block when the rest dies and nothing can be unmapped. Phase
  // pools: the state gets pages of its own, and generation's pages empty out completely.
  rig shared("phasealloc:release:all,release_threshold:0,reclaim:false");
  rig split("phasealloc:release:all,release_threshold:0,reclaim:false,phase_pools:true");
  constexpr std::size_t block = mib + mib / 4;
  for (rig* r : {&shared, &split}) {
    r->eng.set_phase("generation");
    std::vector<device_address> kv;
    for (int i = 0; i < 16; ++i) kv.push_back(r->alloc(block));
    for (std::size_t i = 0; i < kv.size(); i += 2) r->free(kv[i]);
    r->eng.set_phase("training");
    std::vector<device_address> state;
    for (int i = 0; i < 8; ++i) state.push_back(r->alloc(block));
    for (std::size_t i = 1; i < kv.size(); i += 2) r->free(kv[i]);
    r->eng.set_phase("optimizer");  // release:all returns every free page
  }
  const auto pool_of_segments = [](const rig& r, std::string_view pool) {
    std::size_t mapped = 0;
    for (const auto& s : r.eng.take_snapshot().segments) {
      if (s.pool == pool) mapped += s.mapped_bytes;
    }
    return mapped;
  };
  EXPECT_EQ(pool_of_segments(split, "rollout"), 0u);  // generation's pages all went back
  EXPECT_GT(pool_of_segments(split, "large"), 0u);    // the state lives in its own pages
  EXPECT_LE(split.reserved(), round_up(8 * block, 2 * mib));
  EXPECT_GE(shared.reserved(), 16 * block);  // interleaved: every KV page is pinned by state
}

TEST(PhaseallocPolicyTest, PinnedBySizeForUntaggedJobs) {
  rig r("phasealloc:release_threshold:0,pin_sizes:[96MiB]");
  const device_address a = r.alloc(96 * mib);
  r.free(a);
  r.eng.set_phase("training");  // a transition release would return an unpinned block
  r.eng.set_phase("generation");
  EXPECT_EQ(r.reserved(), 96 * mib);
  EXPECT_EQ(r.alloc(96 * mib), a);
}

TEST(PhaseallocPolicyTest, OutOfMemoryReleasesFreePagesThenRetries) {
  rig r("phasealloc:release:none,reclaim:false", 256 * mib);
  const device_address a = r.alloc(100 * mib);
  const device_address pin = r.alloc(10 * mib);
  const device_address c = r.alloc(100 * mib);
  r.free(a);
  r.free(c);
  // 150 MiB fits no hole, and growing after c's hole would need 260 MiB mapped: release, retry.
  const device_address d = r.alloc(150 * mib);
  EXPECT_NE(d, 0u);
  EXPECT_EQ(r.eng.stats().num_alloc_retries, 1);
  EXPECT_LE(r.reserved(), 256 * mib);
  r.free(pin);
  r.free(d);
}

TEST(PhaseallocPolicyTest, ConfigErrorsNameTheKey) {
  EXPECT_THAT(make_policy("phasealloc:release:sometimes").error(), HasSubstr("bad value for 'release'"));
  EXPECT_THAT(make_policy("phasealloc:page:3MiB").error(), HasSubstr("'page'"));
  EXPECT_THAT(make_policy("phasealloc:pin_tags:[7,x]").error(), HasSubstr("\"x\" is not a tag"));
  EXPECT_THAT(make_policy("phasealloc:releas:all").error(), HasSubstr("unknown key 'releas'"));
  EXPECT_THAT(make_policy("phasealloc:memory_fraction:1.5").error(), HasSubstr("memory_fraction"));
  EXPECT_THAT(make_policy("phasealloc:map_ahead:maybe").error(), HasSubstr("'map_ahead'"));
  EXPECT_THAT(make_policy("phasealloc:phase_pools:2").error(), HasSubstr("'phase_pools'"));
  EXPECT_THAT(make_policy("phasealloc:rollout_phases:[]").error(), HasSubstr("rollout_phases"));
  EXPECT_THAT(make_policy("phasealloc:small_grow:3MiB").error(), HasSubstr("'small_grow'"));
  EXPECT_EQ(make_policy("phasealloc:small_grow:0").value()->spec(), "phasealloc:release:adaptive,small_grow:0");
  auto ok = make_policy("phasealloc:release:all,pin_tags:[7,8],page:4MiB");
  ASSERT_TRUE(ok.has_value()) << ok.error();
  EXPECT_EQ(ok.value()->spec(), "phasealloc:release:all,page:4194304,pin_tags:[7,8]");
  // The new keys print only when they differ from the defaults, and the spec reads back the same.
  auto keys = make_policy("phasealloc:map_ahead:false,phase_pools:true,rollout_phases:[rollout,score]");
  ASSERT_TRUE(keys.has_value()) << keys.error();
  const std::string spec = keys.value()->spec();
  EXPECT_EQ(spec, "phasealloc:release:adaptive,map_ahead:false,phase_pools:true,rollout_phases:[rollout,score]");
  EXPECT_EQ(make_policy(spec).value()->spec(), spec);
}

TEST(PhaseallocPolicyTest, LifetimesAreLearnedFromWhatOutlivedEachInterval) {
  // Weights made while loading live for ever; each training interval leaves gradients that the
  // optimizer frees (they outlive their interval, not the cycle); the first optimizer interval makes
  // an optimizer state that lives for ever (it outlives the cycle).
  rig r("phasealloc:lifetime:true");
  const device_address weights = r.alloc(6 * mib);
  for (int step = 0; step < 3; ++step) {
    r.eng.set_phase("training");
    const device_address activation = r.alloc(10 * mib);
    const device_address gradient = r.alloc(6 * mib);
    r.free(activation);
    r.eng.set_phase("optimizer");
    if (step == 0) r.alloc(12 * mib);  // optimizer state, kept
    const device_address temporary = r.alloc(8 * mib);
    r.free(temporary);
    r.free(gradient);
  }
  r.eng.set_phase("training");
  const auto& lifetimes = dynamic_cast<const phasealloc_policy&>(*r.pol).lifetimes();
  using key = phasealloc_policy::lifetime_key;
  const auto& training = lifetimes.at("training");
  EXPECT_EQ(training.survived, std::set<key>({{6 * mib, 0}}));
  EXPECT_EQ(training.mid_lived, std::set<key>({{6 * mib, 0}}));  // the gradient died in the optimizer
  EXPECT_TRUE(training.long_lived.empty());
  const auto& optimizer = lifetimes.at("optimizer");
  EXPECT_TRUE(optimizer.survived.empty());  // its last interval made nothing that outlived it
  EXPECT_EQ(optimizer.long_lived, std::set<key>{});  // the state came from an interval two back
  r.free(weights);
}

TEST(PhaseallocPolicyTest, ANewIntervalOfTheSamePhaseIsNotACycle) {
  // Gradient accumulation: training runs two intervals in a row (set_phase into the same phase),
  // the gradients made in the first outlive it and die in the optimizer. They outlived their
  // interval, not the cycle: mid-lived, even though they are still allocated when training starts
  // again (its second interval).
  rig r("phasealloc:lifetime:true");
  for (int step = 0; step < 3; ++step) {
    r.eng.set_phase("training");
    const device_address gradient = r.alloc(6 * mib);
    r.eng.set_phase("training");  // the next micro-batch
    const device_address activation = r.alloc(10 * mib);
    r.free(activation);
    r.eng.set_phase("optimizer");
    r.free(gradient);
  }
  r.eng.set_phase("training");
  using key = phasealloc_policy::lifetime_key;
  const auto& training = dynamic_cast<const phasealloc_policy&>(*r.pol).lifetimes().at("training");
  EXPECT_TRUE(training.long_lived.empty());
  EXPECT_EQ(training.mid_lived, std::set<key>({{6 * mib, 0}}));
}

TEST(PhaseallocPolicyTest, LifetimePlacementPacksBlocksThatOutliveTheirPhaseLow) {
  // Each training interval leaves two holes, 8 MiB low and 4 MiB high, and then makes a 4 MiB block
  // that outlives it (freed by the optimizer). Best fit puts it in the high hole, so when training
  // ends its free memory is two runs (two unmap calls at the release); placed by lifetime, it goes
  // to the lowest hole and the free memory above it is one run.
  rig best("phasealloc:release:all,release_threshold:0,reclaim:false,grow:2MiB");
  rig lifetime("phasealloc:release:all,release_threshold:0,reclaim:false,grow:2MiB,lifetime:true");
  std::vector<std::int64_t> unmaps_per_step;
  std::vector<device_address> survivor_at;
  for (rig* r : {&best, &lifetime}) {
    for (int step = 0; step < 3; ++step) {
      r->eng.set_phase("training");
      const device_address s1 = r->alloc(8 * mib);
      const device_address s2 = r->alloc(2 * mib);
      const device_address s3 = r->alloc(4 * mib);
      const device_address s4 = r->alloc(2 * mib);
      r->free(s1);
      r->free(s3);
      const device_address kept = r->alloc(4 * mib);
      if (step == 2) survivor_at.push_back(kept - s1);  // offset from the bottom of training's blocks
      r->free(s2);
      r->free(s4);
      const std::int64_t before = r->eng.stats().num_device_unmap;
      r->eng.set_phase("optimizer");  // release:all unmaps every free run
      if (step == 2) unmaps_per_step.push_back(r->eng.stats().num_device_unmap - before);
      r->free(kept);
    }
  }
  EXPECT_EQ(survivor_at[0], 10 * mib);  // best fit: the high hole
  EXPECT_EQ(survivor_at[1], 0u);        // by lifetime: the lowest one
  EXPECT_EQ(unmaps_per_step[0], 2);
  EXPECT_EQ(unmaps_per_step[1], 1);
  EXPECT_LE(lifetime.peak_reserved(), best.peak_reserved());
}

}  // namespace
}  // namespace phasealloc
