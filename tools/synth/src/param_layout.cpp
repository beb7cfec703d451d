#include "param_layout.hpp"

namespace phasealloc::detail::synth {
namespace {

class layout_writer {
 public:
  explicit layout_writer(param_layout& out) : out_(out) {}

  std::size_t add(std::size_t numel, bool decay) {
    out_.params.push_back({numel, decay});
    return out_.params.size() - 1;
  }
  linear_params linear(std::size_t in, std::size_t out, bool bias) {
    linear_params p{add(in * out, true), no_param, in, out};
    if (bias) p.bias = add(out, false);
    return p;
  }
  norm_params norm(std::size_t hidden, bool bias) {
    norm_params p{add(hidden, false), no_param};
    if (bias) p.bias = add(hidden, false);
    return p;
  }

 private:
  param_layout& out_;
};

void llama_layout(const model_desc& d, param_layout& out, layout_writer& w) {
  const std::size_t q_width = d.heads * d.head_dim();
  const std::size_t kv_width = d.kv_heads * d.head_dim();
  out.embed = w.add(d.vocab * d.hidden, true);
  for (std::size_t i = 0; i < d.layers; ++i) {
    layer_params l;
    l.first = out.params.size();
    l.q = w.linear(d.hidden, q_width, false);
    l.k = w.linear(d.hidden, kv_width, false);
    l.v = w.linear(d.hidden, kv_width, false);
    l.o = w.linear(q_width, d.hidden, false);
    l.gate = w.linear(d.hidden, d.ffn_hidden, false);
    l.up = w.linear(d.hidden, d.ffn_hidden, false);
    l.down = w.linear(d.ffn_hidden, d.hidden, false);
    l.attn_norm = w.norm(d.hidden, false);
    l.mlp_norm = w.norm(d.hidden, false);
    l.last = out.params.size();
    out.layers.push_back(l);
  }
  out.final_norm = w.norm(d.hidden, false);
  out.buffer_bytes = d.head_dim() / 2 * 4;  // LlamaRotaryEmbedding.inv_freq, fp32
}

void opt_layout(const model_desc& d, param_layout& out, layout_writer& w) {
  out.embed = w.add(d.vocab * d.hidden, true);
  // OPTLearnedPositionalEmbedding keeps 2 rows more than max_positions; GPT-2's wpe does not.
  const std::size_t position_rows = d.family == model_family::opt ? d.max_positions + 2 : d.max_positions;
  out.positions = w.add(position_rows * d.hidden, true);
  out.final_norm = w.norm(d.hidden, true);
  for (std::size_t i = 0; i < d.layers; ++i) {
    layer_params l;
    l.first = out.params.size();
    if (d.family == model_family::gpt2) {
      l.qkv = w.linear(d.hidden, 3 * d.hidden, true);  // c_attn (Conv1D)
    } else {
      l.k = w.linear(d.hidden, d.hidden, true);
      l.v = w.linear(d.hidden, d.hidden, true);
      l.q = w.linear(d.hidden, d.hidden, true);
    }
    l.o = w.linear(d.hidden, d.hidden, true);
    l.attn_norm = w.norm(d.hidden, true);
    l.up = w.linear(d.hidden, d.ffn_hidden, true);
    l.down = w.linear(d.ffn_hidden, d.hidden, true);
    l.mlp_norm = w.norm(d.hidden, true);
    l.last = out.params.size();
    out.layers.push_back(l);
  }
}

}  // namespace

std::size_t param_layout::total_numel() const noexcept {
  std::size_t n = 0;
  for (const param_tensor& p : params) n += p.numel;
  return n;
}

// PEFT's get_peft_model: every base parameter frozen, then lora_A / lora_B per targeted linear,
// layer by layer. A critic's value head is outside the PEFT model and stays trainable.
void add_adapters(param_layout& out, layout_writer& w, const lora_spec& lora) {
  for (param_tensor& p : out.params) p.trainable = false;
  const auto wrap = [&](linear_params& p) {
    p.lora_a = w.add(p.in * lora.rank, true);
    p.lora_b = w.add(lora.rank * p.out, true);
    out.params[p.lora_a].elem_bytes = out.params[p.lora_b].elem_bytes = lora.elem_bytes;
    p.lora_rank = lora.rank;
    p.lora_elem_bytes = lora.elem_bytes;
    out.params[p.lora_a].adapter = out.params[p.lora_b].adapter = true;
  };
  for (layer_params& l : out.layers) {
    for (const std::string& t : lora.targets) {
      linear_params* p = t == "q" ? &l.q : t == "k" ? &l.k : t == "v" ? &l.v : t == "o" ? &l.o
                       : t == "qkv" ? &l.qkv : t == "gate" ? &l.gate : t == "up" ? &l.up
                       : t == "down" ? &l.down : nullptr;
      if (p != nullptr && p->weight != no_param) wrap(*p);
    }
  }
  if (!out.lm_head) {  // the value head
    out.params[out.head.weight].trainable = true;
  }
}

param_layout make_layout(const model_desc& desc, model_role role, const lora_spec& lora) {
  param_layout out;
  layout_writer w(out);
  out.lm_head = role == model_role::actor || role == model_role::reference;
  if (desc.family == model_family::llama) {
    llama_layout(desc, out, w);
  } else {
    opt_layout(desc, out, w);
  }
  if (out.lm_head && desc.family != model_family::llama) {
    out.tied_head = true;
    out.head = {out.embed, no_param, desc.hidden, desc.vocab};
  } else if (out.lm_head) {
    out.head = w.linear(desc.hidden, desc.vocab, false);
  } else {
    out.head = w.linear(desc.hidden, 1, false);  // score / v_head
  }
  if (lora.rank > 0) add_adapters(out, w, lora);
  return out;
}

}  // namespace phasealloc::detail::synth
