#include "decoders/eagle3_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "harness/base/error.h"
#include "harness/base/files.h"
#include "harness/base/json.h"

namespace ears {

namespace {

using nlohmann::json;

// The ids list at `key` of `k` (a non-empty list of integers), or nothing when absent.
std::optional<std::vector<int>> id_list(const JsonKeys& k, const char* key) {
  const json* a = k.find(key);
  if (!a) return std::nullopt;
  if (!a->is_array() || a->empty()) fail("{}: {} must be a non-empty list of integers", k.origin, key);
  std::vector<int> ids;
  for (const auto& x : *a) {
    if (!x.is_number_integer()) fail("{}: {} must hold integers, got {}", k.origin, key, json_type(x));
    ids.push_back(x.get<int>());
  }
  return ids;
}

// Keys (of the head, in either layout) whose true value changes the math in a way the head does
// not implement: refused, never ignored.
void refuse_unsupported(const JsonKeys& head, const JsonKeys& layer, const ModelConfig& c) {
  for (const char* key : {"fc_norm", "norm_output"})
    if (head.opt_bool(key, false))
      fail("{}: {} is true; ears-bench's EAGLE-3 head does not implement it (of the speculators variants only "
           "norm_before_residual and norm_before_fc): use a head trained without it",
           head.origin, key);
  if (c.num_hidden_layers != 1)
    fail("{}: num_hidden_layers is {}; ears-bench runs 1-layer EAGLE-3 heads (as EAGLE, SpecForge, sglang and "
         "speculators train by default)",
         layer.origin, c.num_hidden_layers);
  if (c.qkv_bias || c.o_bias || c.mlp_bias)
    fail("{}: attention_bias / mlp_bias is true; the EAGLE-3 head's projections have no biases here", layer.origin);
}

// The head's own keys, at the top level in either layout; norm_before_residual's default is the
// layout's (vLLM's reading).
void read_head_keys(const JsonKeys& k, bool norm_before_residual_default, Eagle3Config& e) {
  e.draft_vocab = k.opt_int("draft_vocab_size", e.layer.vocab_size);
  e.target_hidden = k.opt_int("target_hidden_size", e.layer.hidden_size);
  e.norm_before_residual = k.opt_bool("norm_before_residual", norm_before_residual_default);
  e.norm_before_fc = k.opt_bool("norm_before_fc", false);
}

// The top-level eagle_aux_hidden_state_layer_ids of an eagle-layout file (vLLM reads them there):
// taken when eagle_config has none, refused when eagle_config has others (vLLM and sglang would read
// different layers).
void read_top_level_ids(const JsonKeys& k, Eagle3Config& e) {
  const std::optional<std::vector<int>> top = id_list(k, "eagle_aux_hidden_state_layer_ids");
  if (!top) return;
  if (e.aux_ids && *e.aux_ids != *top)
    fail("{}: eagle_aux_hidden_state_layer_ids [{}] at the top level (read by vLLM) and [{}] in eagle_config (read "
         "by EAGLE, SpecForge and sglang) differ; keep the ids the head was trained with in one of them",
         k.origin, fmt::join(*top, ", "), fmt::join(*e.aux_ids, ", "));
  if (!e.aux_ids) e.aux_ids = top;
}

Eagle3Config parse_eagle(const json& j, const std::string& origin) {
  Eagle3Config e;
  e.layout = Eagle3Config::Layout::eagle;
  e.layer = ModelConfig::parse(j.dump(), origin, /*check_architecture=*/false);
  const JsonKeys k{j, origin};
  if (const json* ec = k.find("eagle_config")) {
    if (!ec->is_object()) fail("{}: eagle_config must be an object, got {}", origin, json_type(*ec));
    const std::string ec_origin = origin + " (eagle_config)";
    const JsonKeys eck{*ec, ec_origin};
    if (!eck.opt_bool("use_aux_hidden_state", true))
      fail("{}: use_aux_hidden_state is false; ears-bench's EAGLE-3 head reads the target's aux hidden states "
           "(fc over eagle_aux_hidden_state_layer_ids)",
           ec_origin);
    e.aux_ids = id_list(eck, "eagle_aux_hidden_state_layer_ids");
    e.aux_ids_in_eagle_config = e.aux_ids.has_value();
  }
  read_top_level_ids(k, e);
  refuse_unsupported(k, k, e.layer);
  read_head_keys(k, /*norm_before_residual_default=*/false, e);
  return e;
}

Eagle3Config parse_speculators(const json& j, const std::string& origin) {
  const JsonKeys k{j, origin};
  const std::string type = k.opt_string("speculators_model_type").value_or("");
  if (type != "eagle3")
    fail("{}: speculators_model_type is '{}'; ears-bench reads speculators-format EAGLE-3 heads only ('eagle3')",
         origin, type);
  const json* tl = k.find("transformer_layer_config");
  if (!tl || !tl->is_object())
    fail("{}: transformer_layer_config must be an object (the speculators layout keeps the layer's keys there)",
         origin);
  Eagle3Config e;
  e.layout = Eagle3Config::Layout::speculators;
  const std::string tl_origin = origin + " (transformer_layer_config)";
  const JsonKeys tlk{*tl, tl_origin};
  const std::string model_type = tlk.opt_string("model_type").value_or("llama");
  if (model_type != "llama")
    fail("{}: model_type is '{}'; ears-bench's EAGLE-3 head is a llama-type layer (no QK-norm), so a '{}' draft "
         "layer is not supported",
         tl_origin, model_type, model_type);
  e.layer = ModelConfig::parse(tl->dump(), tl_origin, /*check_architecture=*/false);
  refuse_unsupported(k, tlk, e.layer);
  e.aux_ids = id_list(k, "eagle_aux_hidden_state_layer_ids");
  // norm_before_residual absent: true, as vLLM reads this layout (its configs/speculators/algos.py).
  read_head_keys(k, /*norm_before_residual_default=*/true, e);
  return e;
}

}  // namespace

const char* layout_name(Eagle3Config::Layout layout) {
  return layout == Eagle3Config::Layout::speculators ? "speculators" : "eagle";
}

Eagle3Config Eagle3Config::parse(const std::string& json_text, const std::string& origin) {
  const json j = parse_json_object(json_text, origin);
  return j.contains("speculators_model_type") ? parse_speculators(j, origin) : parse_eagle(j, origin);
}

Eagle3Config Eagle3Config::load(const std::filesystem::path& dir) {
  const auto path = dir / "config.json";
  return parse(read_file(path, "config.json", "is this an EAGLE-3 head's directory?"), path.string());
}

}  // namespace ears
