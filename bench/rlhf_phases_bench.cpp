// RLHF phase alternation: one PPO-style iteration of a small decoder-only model, with the phase set
// at every boundary so phase-triggered policies act:
//   generation  prompt KV cache, then decoding steps that grow K/V by concatenation, per-step
//               transients (hidden state, logits) and a growing token buffer;
//   inference   scoring by a reference and a reward model: per-layer transient activations,
//               logits turned into kept log-probs / rewards;
//   training    forward saving activations, backward freeing them in reverse while allocating the
//               parameter gradients, which are kept for the optimizer;
//   optimizer   Adam states allocated once (first iteration) and kept, per-parameter temporaries,
//               then zero_grad(set_to_none) frees the gradients and the iteration's outputs.
// Parameters are allocated once, before the first iteration. bf16 activations, fp32 states.
#include <array>

#include "alloc_patterns.hpp"

namespace phasealloc::bench {
namespace {

struct model_shape {
  std::size_t layers = 4;
  std::size_t hidden = 1024;
  std::size_t batch = 8;
  std::size_t prompt = 64;
  std::size_t generated = 64;
  std::size_t vocab = 8192;
  std::size_t heads() const { return hidden / 64; }
  std::size_t seq() const { return prompt + generated; }
  /// Elements of each parameter tensor of one layer: qkv, out, fc1, fc2.
  std::array<std::size_t, 4> layer_params() const {
    return {3 * hidden * hidden, hidden * hidden, 4 * hidden * hidden, 4 * hidden * hidden};
  }
};

constexpr std::size_t bf16 = 2;
constexpr std::size_t fp32 = 4;
constexpr std::size_t i64 = 8;

/// An allocator that counts its calls and remembers sizes, so frees pass the right size.
template <class A>
class counting {
 public:
  explicit counting(A& a) : a_(a) {}
  struct block {
    std::uintptr_t addr = 0;
    std::size_t bytes = 0;
  };
  block allocate(std::size_t bytes) {
    ++calls_;
    return {a_.allocate(bytes), bytes};
  }
  void deallocate(block& b) {
    ++calls_;
    a_.deallocate(b.addr, b.bytes);
    b = {};
  }
  void transient(std::size_t bytes) {
    block b = allocate(bytes);
    deallocate(b);
  }
  void set_phase(std::string_view name) { a_.set_phase(name); }
  std::uint64_t calls() const { return calls_; }

 private:
  A& a_;
  std::uint64_t calls_ = 0;
};

template <class A>
struct rlhf_state {
  using block = typename counting<A>::block;
  model_shape m;
  counting<A> alloc;
  std::vector<block> params;
  std::vector<block> adam;  ///< exp_avg, exp_avg_sq per parameter; empty until the first step
  explicit rlhf_state(A& a, model_shape shape) : m(shape), alloc(a) {}

  void allocate_params() {
    for (std::size_t l = 0; l < m.layers; ++l) {
      for (const std::size_t n : m.layer_params()) params.push_back(alloc.allocate(n * bf16));
    }
  }

  /// Returns the generated token ids (batch x seq, int64).
  block generation() {
    alloc.set_phase("generation");
    const std::size_t kv_token = m.batch * m.hidden * bf16;  // one token's K (or V) for one layer
    std::vector<block> k(m.layers), v(m.layers);
    block tokens = alloc.allocate(m.batch * m.prompt * i64);
    for (std::size_t l = 0; l < m.layers; ++l) {  // prefill
      block x = alloc.allocate(m.batch * m.prompt * m.hidden * bf16);
      k[l] = alloc.allocate(m.prompt * kv_token);
      v[l] = alloc.allocate(m.prompt * kv_token);
      alloc.transient(m.batch * m.heads() * m.prompt * m.prompt * bf16);  // attention scores
      alloc.deallocate(x);
    }
    for (std::size_t n = m.prompt; n < m.seq(); ++n) {  // decode: one token per step
      block x = alloc.allocate(m.batch * m.hidden * bf16);
      for (std::size_t l = 0; l < m.layers; ++l) {
        block nk = alloc.allocate((n + 1) * kv_token);
        block nv = alloc.allocate((n + 1) * kv_token);
        alloc.deallocate(k[l]);
        alloc.deallocate(v[l]);
        k[l] = nk;
        v[l] = nv;
        alloc.transient(m.batch * m.heads() * (n + 1) * fp32);  // attention scores
        alloc.transient(m.batch * 4 * m.hidden * bf16);          // mlp
      }
      alloc.transient(m.batch * m.vocab * fp32);  // logits
      block grown = alloc.allocate(m.batch * (n + 1) * i64);
      alloc.deallocate(tokens);
      tokens = grown;
      alloc.deallocate(x);
    }
    for (std::size_t l = 0; l < m.layers; ++l) {
      alloc.deallocate(k[l]);
      alloc.deallocate(v[l]);
    }
    return tokens;
  }

  /// Scoring by one model under no_grad: returns a small kept output of `out_bytes`.
  block score(std::size_t out_bytes) {
    const std::size_t act = m.batch * m.seq() * m.hidden * bf16;
    block x = alloc.allocate(act);
    for (std::size_t l = 0; l < m.layers; ++l) {
      block qkv = alloc.allocate(3 * act);
      alloc.transient(m.batch * m.heads() * m.seq() * m.seq() * bf16);
      alloc.deallocate(qkv);
      block h = alloc.allocate(4 * act);
      block y = alloc.allocate(act);
      alloc.deallocate(h);
      alloc.deallocate(x);
      x = y;
    }
    block logits = alloc.allocate(m.batch * m.seq() * m.vocab * fp32);
    block out = alloc.allocate(out_bytes);
    alloc.deallocate(logits);
    alloc.deallocate(x);
    return out;
  }

  /// Forward keeping activations, backward freeing them in reverse; returns the gradients.
  std::vector<block> training() {
    alloc.set_phase("training");
    const std::size_t act = m.batch * m.seq() * m.hidden * bf16;
    const std::size_t scores = m.batch * m.heads() * m.seq() * m.seq() * bf16;
    std::vector<std::vector<block>> saved(m.layers);
    for (std::size_t l = 0; l < m.layers; ++l) {
      for (const std::size_t bytes : {act, 3 * act, scores, act, 4 * act, 4 * act}) {
        saved[l].push_back(alloc.allocate(bytes));
      }
    }
    block logits = alloc.allocate(m.batch * m.seq() * m.vocab * fp32);
    alloc.transient(m.batch * m.seq() * fp32);  // loss terms
    alloc.deallocate(logits);
    std::vector<block> grads(params.size());
    block grad_x = alloc.allocate(act);
    for (std::size_t l = m.layers; l-- > 0;) {
      const auto sizes = m.layer_params();
      for (std::size_t p = sizes.size(); p-- > 0;) {
        alloc.transient(4 * act);  // grad of the activation feeding this parameter
        grads[l * sizes.size() + p] = alloc.allocate(sizes[p] * bf16);
      }
      for (std::size_t s = saved[l].size(); s-- > 0;) alloc.deallocate(saved[l][s]);
      block next = alloc.allocate(act);
      alloc.deallocate(grad_x);
      grad_x = next;
    }
    alloc.deallocate(grad_x);
    return grads;
  }

  void optimizer(std::vector<block>& grads) {
    alloc.set_phase("optimizer");
    if (adam.empty()) {
      for (const block& p : params) {
        const std::size_t elements = p.bytes / bf16;
        adam.push_back(alloc.allocate(elements * fp32));
        adam.push_back(alloc.allocate(elements * fp32));
      }
    }
    for (const block& p : params) {
      const std::size_t elements = p.bytes / bf16;
      block denom = alloc.allocate(elements * fp32);
      alloc.transient(elements * fp32);  // update
      alloc.deallocate(denom);
    }
    for (block& g : grads) alloc.deallocate(g);  // zero_grad(set_to_none=True)
  }

  void iteration() {
    block tokens = generation();
    alloc.set_phase("inference");
    block ref_logprobs = score(m.batch * m.seq() * fp32);
    block rewards = score(m.batch * fp32);
    std::vector<block> grads = training();
    optimizer(grads);
    alloc.deallocate(rewards);
    alloc.deallocate(ref_logprobs);
    alloc.deallocate(tokens);
  }

  void finish() {
    for (block& b : adam) alloc.deallocate(b);
    for (block& b : params) alloc.deallocate(b);
  }
};

struct rlhf_phases {
  template <class A>
  void operator()(benchmark::State& state, A& a) const {
    model_shape shape;
    shape.layers = static_cast<std::size_t>(state.range(0));
    shape.hidden = static_cast<std::size_t>(state.range(1));
    rlhf_state<A> s(a, shape);
    s.allocate_params();
    s.iteration();  // warm: Adam states and the cache exist before the timed iterations
    const std::uint64_t before = s.alloc.calls();
    s.iteration();
    const auto calls_per_iteration = static_cast<double>(s.alloc.calls() - before);
    a.mark();
    for (auto _ : state) s.iteration();
    report(state, a, calls_per_iteration);
    s.finish();
  }
};

}  // namespace

void register_rlhf_phases() {
  register_pattern("BM_RlhfPhases", rlhf_phases{}, [](benchmark::internal::Benchmark* b) {
    b->ArgNames({"layers", "hidden"});
    b->Args({4, 1024});
    b->Unit(benchmark::kMicrosecond);
  });
}

}  // namespace phasealloc::bench
