// The model sets of a run: the target + draft each arm decodes with, loaded once per distinct
// (target, draft) — arms that share a draft share the set; target-only arms reuse any set of the
// same target — with the stop token ids and the selected requests' prompts encoded per set.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "decoders/engine.h"
#include "harness/config/config.h"
#include "harness/run/model_setup.h"

namespace ears {

struct Request;

namespace runner {

// A progress line on stderr (nothing under --quiet).
using Say = std::function<void(const std::string&)>;

// The identity of a loaded target / draft: sets with equal keys are one set.
std::string target_key(const config::TargetSpec& t);  // "path|dtype|device"
std::string draft_key(const config::DraftSpec& d);    // "none", or "kind|path|aux layers|convention"

struct ModelSet {
  std::string tkey, dkey;
  ModelSetup setup;
  LoadedModels models;
  std::vector<int32_t> stop_ids;
  std::vector<std::vector<int32_t>> prompts;  // per selected request
};

// One arm of the run: its spec, its model set, its DecodeParams and wall time so far.
struct ArmRun {
  const config::ArmSpec* spec = nullptr;
  std::size_t set = 0;       // index into the model sets
  bool use_drafter = false;  // false: target-only (draft kind none)
  DecodeParams params;       // set once the models are loaded
  double wall_s = 0;
};

// The model sets (not loaded yet) and every arm's set: drafting arms first, each distinct draft
// one set; then target-only arms on the first set of the target (a new one when there is none).
std::vector<ModelSet> assign_model_sets(const config::ExperimentSpec& spec, std::vector<ArmRun>& arms);

// An ears::Error when no request of any arm can fit the target's context (`context` positions,
// max_position_embeddings; 0 = unknown): every arm's max_new_tokens alone reaching it. `validate`
// checks this from config.json, a run again with the encoded prompts (load_model_sets).
void check_max_new_tokens_fit(const config::ExperimentSpec& spec, int64_t context);

// Loads every set: models, stop ids, the prompts (chat-formatted when dataset.prompt_format is
// chat; an empty encoding is an ears::Error); an ears::Error when every prompt + max_new_tokens
// exceeds the context in every arm (the run would record only errors), a warning on stderr when
// some do. Then sets every arm's DecodeParams.
void load_model_sets(std::vector<ModelSet>& sets, std::vector<ArmRun>& arms, const config::ExperimentSpec& spec,
                     const std::vector<const Request*>& requests, const Say& say);

// run.warmup requests per model set, decoded by its drafting arm if it has one; not recorded.
void warm_up(std::vector<ModelSet>& sets, const std::vector<ArmRun>& arms, int warmup, std::size_t n_requests,
             const Say& say);

}  // namespace runner
}  // namespace ears
