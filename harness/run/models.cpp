#include "harness/run/models.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <limits>

#include "datasets/dataset.h"
#include "decoders/runtime.h"
#include "decoders/tokenizer.h"
#include "harness/base/error.h"
#include "harness/run/decode_params.h"

namespace ears::runner {

std::string target_key(const config::TargetSpec& t) { return fmt::format("{}|{}|{}", t.path, t.dtype, t.device); }

std::string draft_key(const config::DraftSpec& d) {
  if (d.kind == "none") return "none";
  return fmt::format("{}|{}|{}|{}", d.kind, d.path, fmt::join(d.aux_layers, ","), d.aux_layer_convention);
}

namespace {

ModelSet model_set(const config::TargetSpec& target, const config::ArmSpec& a) {
  ModelSet m;
  m.tkey = target_key(target);
  m.dkey = draft_key(a.draft);
  m.setup.target_path = target.path;
  m.setup.dtype = target.dtype;
  m.setup.device = target.device;
  m.setup.draft_kind = a.draft.kind;
  m.setup.draft_path = a.draft.path;
  if (!a.draft.aux_layers.empty()) m.setup.aux_layers = a.draft.aux_layers;
  m.setup.aux_layer_convention = a.draft.aux_layer_convention;
  return m;
}

// The smallest max_new_tokens of any arm: the room every request needs at least.
int64_t least_max_new_tokens(const config::ExperimentSpec& spec) {
  int64_t least = std::numeric_limits<int64_t>::max();
  for (const auto& a : spec.arms) least = std::min<int64_t>(least, a.decoding.max_new_tokens);
  return least;
}

// The prompts of `requests` as `m`'s tokenizer encodes them; fails when none fits, warns when some do not.
void encode_prompts(ModelSet& m, const config::ExperimentSpec& spec, const std::vector<const Request*>& requests) {
  m.prompts.reserve(requests.size());
  for (const Request* r : requests) {
    const std::string text =
        spec.dataset.prompt_format == "chat" ? qwen3_chat_prompt(r->prompt, spec.dataset.thinking) : r->prompt;
    m.prompts.push_back(m.models.tokenizer->encode(text));
    if (m.prompts.back().empty())
      fail("request '{}' (dataset {}): the prompt encodes to no tokens; check the dataset's prompt field", r->id,
           spec.dataset.name);
  }
  int64_t max_new = 0;
  for (const auto& a : spec.arms) max_new = std::max<int64_t>(max_new, a.decoding.max_new_tokens);
  const int64_t min_new = least_max_new_tokens(spec);
  const int64_t context = m.models.target->config().max_position_embeddings;
  const auto exceed = [&](int64_t new_tokens) {
    return std::count_if(m.prompts.begin(), m.prompts.end(), [&](const auto& pr) {
      return context > 0 && static_cast<int64_t>(pr.size()) + new_tokens > context;
    });
  };
  const auto too_long = exceed(max_new);
  if (!m.prompts.empty() && exceed(min_new) == static_cast<std::ptrdiff_t>(m.prompts.size())) {
    size_t shortest = m.prompts.front().size();
    for (const auto& pr : m.prompts) shortest = std::min(shortest, pr.size());
    const int64_t room = context - static_cast<int64_t>(shortest);
    if (room < 1)
      fail("dataset {}: every prompt ({} tokens at least) fills the model's context of {} tokens "
           "(max_position_embeddings), so every request would fail; use shorter prompts",
           spec.dataset.name, shortest, context);
    fail("decoding.max_new_tokens: every prompt ({} tokens at least) + {} new tokens exceeds the model's context of "
         "{} tokens (max_position_embeddings), so every request would fail; lower max_new_tokens to {} or less",
         shortest, min_new, context, room);
  }
  if (too_long > 0)
    fmt::print(stderr,
               "ears-bench: warning: {} of {} prompts + max_new_tokens ({}) exceed the model's context of {} "
               "tokens; those requests are recorded as errors\n",
               too_long, m.prompts.size(), max_new, context);
}

}  // namespace

void check_max_new_tokens_fit(const config::ExperimentSpec& spec, int64_t context) {
  const int64_t min_new = least_max_new_tokens(spec);
  if (context > 0 && min_new >= context)
    fail("decoding.max_new_tokens: {} leaves no room for a prompt in the target's context of {} tokens "
         "(max_position_embeddings in {}/config.json); lower it below {}",
         min_new, context, spec.target.path, context);
}

std::vector<ModelSet> assign_model_sets(const config::ExperimentSpec& spec, std::vector<ArmRun>& arms) {
  std::vector<ModelSet> sets;
  const std::string tk = target_key(spec.target);
  // The set of (tk, dk) ("" = any draft), added from `a` when there is none.
  auto set_for = [&](const config::ArmSpec& a, const std::string& dk) {
    for (std::size_t s = 0; s < sets.size(); ++s)
      if (sets[s].tkey == tk && (dk.empty() || sets[s].dkey == dk)) return s;
    sets.push_back(model_set(spec.target, a));
    return sets.size() - 1;
  };
  for (bool drafting : {true, false})
    for (std::size_t i = 0; i < spec.arms.size(); ++i) {
      const auto& a = spec.arms[i];
      if ((a.draft.kind != "none") != drafting) continue;
      arms[i].set = set_for(a, drafting ? draft_key(a.draft) : "");
      arms[i].use_drafter = drafting;
    }
  return sets;
}

void load_model_sets(std::vector<ModelSet>& sets, std::vector<ArmRun>& arms, const config::ExperimentSpec& spec,
                     const std::vector<const Request*>& requests, const Say& say) {
  for (auto& m : sets) {
    m.models = load_models(m.setup, /*need_tokenizer=*/true);
    m.stop_ids = stop_token_ids(m.models);
    encode_prompts(m, spec, requests);
    say(fmt::format("loaded {}{} in {:.1f} s", m.setup.target_path,
                    m.setup.draft_kind == "none" ? std::string(" (target only)")
                                                 : fmt::format(" + {} draft {}", m.setup.draft_kind, m.setup.draft_path),
                    m.models.load_s));
  }
  for (auto& a : arms) a.params = decode_params(*a.spec, spec.dataset, sets[a.set].stop_ids);
}

void warm_up(std::vector<ModelSet>& sets, const std::vector<ArmRun>& arms, int warmup, std::size_t n_requests,
             const Say& say) {
  if (warmup <= 0 || n_requests == 0) return;
  for (std::size_t s = 0; s < sets.size(); ++s) {
    const ArmRun* a = nullptr;
    for (const auto& x : arms)
      if (x.set == s && (!a || (x.use_drafter && !a->use_drafter))) a = &x;
    if (!a) continue;
    const double t0 = now_s();
    Engine engine(*sets[s].models.target, a->use_drafter ? sets[s].models.drafter.get() : nullptr,
                  sets[s].models.tokenizer.get());
    const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(warmup), n_requests);
    const std::size_t bs = static_cast<std::size_t>(std::max(1, a->spec->decoding.batch_size));
    for (std::size_t b = 0; b < n; b += bs) {
      std::vector<GenRequest> batch;
      for (std::size_t i = b; i < std::min(n, b + bs); ++i)
        batch.push_back(GenRequest{sets[s].prompts[i], a->spec->decoding.seed, fmt::format("warmup#{}", i)});
      engine.generate(batch, a->params);
    }
    say(fmt::format("warm-up: {} request(s) in {:.1f} s (not recorded)", n, now_s() - t0));
  }
}

}  // namespace ears::runner
