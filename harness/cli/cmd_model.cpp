// Model-level commands: forward (checkpoint sanity check), tokenize, generate.
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "decoders/engine.h"
#include "decoders/runtime.h"
#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "harness/run/environment.h"
#include "harness/base/error.h"
#include "harness/base/files.h"
#include "harness/run/model_setup.h"
#include "harness/run/decode_params.h"

namespace ears {
namespace {

using json = nlohmann::json;

// Token ids: non-negative 32-bit integers.
std::vector<int32_t> parse_ids(const std::string& text, const std::string& flag) {
  const std::vector<int64_t> v = parse_int_list(text, flag, 0, INT32_MAX);
  return std::vector<int32_t>(v.begin(), v.end());
}

json tensor_rows(const at::Tensor& t2d) {
  at::Tensor c = t2d.to(at::kFloat).cpu().contiguous();
  json rows = json::array();
  auto a = c.accessor<float, 2>();
  for (int64_t i = 0; i < c.size(0); ++i) {
    json row = json::array();
    for (int64_t j = 0; j < c.size(1); ++j) row.push_back(a[i][j]);
    rows.push_back(std::move(row));
  }
  return rows;
}

void add_threads(CLI::App* sub, CommonOptions& common) {
  sub->add_option("--threads", common.threads, threads_help());
}

struct ForwardArgs {
  std::string model, ids, dtype = "auto", device = "cpu", draft;
  int last = 1, gamma = 5;
  std::vector<int> aux;
};

int run_forward(const ForwardArgs& a, CommonOptions& common) {
  set_threads(common.threads);
  std::vector<int32_t> ids = parse_ids(a.ids, "--ids");
  if (ids.empty()) fail("--ids: give at least one token id");
  ModelSetup setup;
  setup.target_path = a.model;
  setup.dtype = a.dtype;
  setup.device = a.device;
  setup.draft_kind = a.draft.empty() ? "none" : "eagle3";
  setup.draft_path = a.draft;
  LoadedModels m = load_models(setup, /*need_tokenizer=*/false);
  const CausalLM& model = *m.target;
  const int64_t V = model.config().vocab_size;
  for (int32_t id : ids)
    if (id >= V) fail("--ids: token id {} is outside the model's vocabulary of {} ids", id, V);
  const int64_t L = static_cast<int64_t>(ids.size());
  // The draft's chain runs gamma positions past the ids.
  const int64_t context = model.config().max_position_embeddings, span = L + (m.head ? a.gamma : 0);
  if (context > 0 && span > context)
    fail("--ids: {} ids{} exceed the model's context of {} positions (max_position_embeddings in {}/config.json); "
         "pass fewer ids",
         L, m.head ? fmt::format(" + --gamma {}", a.gamma) : "", context, a.model);
  const int64_t K = std::min<int64_t>(a.last, L);  // --last >= 1 (checked while parsing)
  at::Tensor input = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong).to(model.device()).view({1, L});
  ForwardOptions opt;
  opt.aux_layers = a.aux;
  if (m.head) opt.aux_layers = m.head->aux_layers();
  ForwardOutput out = model.forward(input, opt);
  json j;
  j["logits"] = tensor_rows(out.logits[0].narrow(0, L - K, K));
  std::vector<int64_t> positions;
  for (int64_t p = L - K; p < L; ++p) positions.push_back(p);
  j["positions"] = positions;
  if (!a.aux.empty() && !m.head) {
    json aux = json::array();
    for (const auto& h : out.aux_hidden) aux.push_back(tensor_rows(h[0].narrow(0, L - 1, 1))[0]);
    j["aux_hidden_last_position"] = aux;
  }
  if (m.head) {
    // The first draft step at the last prompt position, then a greedy chain of `gamma` tokens.
    const at::Tensor next = out.logits[0][L - 1].to(at::kFloat).argmax().view({1});
    KVCache cache = m.head->new_cache(1, L + a.gamma + 2);
    at::Tensor tokens = at::cat({input.narrow(1, 1, L - 1), next.view({1, 1})}, 1);
    auto first = m.head->forward(tokens, at::cat(out.aux_hidden, -1), true, cache);
    json d;
    d["logits_last"] = tensor_rows(first.logits[0].narrow(0, L - 1, 1))[0];
    m.drafter->begin(input, {L}, next, out.aux_hidden, L + a.gamma + 2);
    Proposal p = m.drafter->propose(a.gamma, SamplingParams{}, /*greedy=*/true, at::zeros({1, a.gamma}));
    at::Tensor chain = p.tokens.cpu();
    std::vector<int64_t> chain_ids(chain.data_ptr<int64_t>(), chain.data_ptr<int64_t>() + chain.numel());
    d["chain_target_ids"] = chain_ids;
    d["aux_layers"] = m.head->aux_layers();
    j["draft"] = d;
  }
  fmt::print("{}\n", j.dump());
  return 0;
}

struct TokenizeArgs {
  std::string tokenizer, text, ids, jsonl;
  bool has_text = false;
};

// --jsonl FILE: one JSON string per line in; one {"ids": [...], "decoded": "..."} per line out
// (many strings in one process: each LibTorch-linked process costs ~0.4 s to start).
int tokenize_lines(const Tokenizer& tok, const std::string& file) {
  // A device or a pipe (/dev/zero) was read until the memory ran out.
  if (!std::filesystem::is_regular_file(file))
    fail("--jsonl {}: not a regular file; pass a file of JSON strings, one per line", file);
  std::istringstream in(read_file(file, "the --jsonl input"));
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    json text;
    try {
      text = json::parse(line);
    } catch (const json::exception&) {
      fail("{}:{}: not a JSON string; write one JSON string per line", file, n);
    }
    if (!text.is_string()) fail("{}:{}: not a JSON string; write one JSON string per line", file, n);
    const std::vector<int32_t> ids = tok.encode(text.get<std::string>());
    fmt::print("{}\n", json{{"ids", ids}, {"decoded", tok.decode(ids)}}.dump(-1, ' ', false, json::error_handler_t::replace));
  }
  return 0;
}

int run_tokenize(const TokenizeArgs& a) {
  Tokenizer tok = Tokenizer::load(a.tokenizer);
  if (!a.jsonl.empty()) return tokenize_lines(tok, a.jsonl);
  json j;
  if (a.has_text) {
    j["ids"] = tok.encode(a.text);
  } else {
    std::vector<int32_t> ids = parse_ids(a.ids, "--ids");
    for (int32_t id : ids)
      if (id >= tok.vocab_size()) fail("--ids: token id {} is not in the tokenizer ({} ids)", id, tok.vocab_size());
    j["text"] = tok.decode(ids);
  }
  fmt::print("{}\n", j.dump());
  return 0;
}

// generate's defaults: a greedy target, 128 new tokens; the rest as DecodeParams'.
runner::DecodeSettings generate_defaults() {
  runner::DecodeSettings d;
  d.temperature = 0;
  d.max_new_tokens = 128;
  return d;
}

struct GenerateArgs {
  ModelSetup setup;
  std::string prompt, ids;
  bool chat = false, thinking = false, has_prompt = false;
  uint64_t seed = 0;
  runner::DecodeSettings decoding = generate_defaults();  // --temperature ... --gamma
};

// New tokens per second of generation (0 when nothing was timed): generate's JSON and its line.
double output_tokens_per_s(const GenResult& r) {
  return r.latency_s > 0 ? static_cast<double>(r.ids.size()) / r.latency_s : 0.0;
}

// generate --json's document: {ids, text, finish_reason, stats, env}; `env` is what ran (read
// before the models loaded, with their facts), load_average_1m_end is read now.
json generate_json(const GenResult& r, double load_s, const GenerateArgs& a, int threads, json env) {
  const auto& st = r.stats;
  const int64_t new_tokens = static_cast<int64_t>(r.ids.size());
  json j;
  j["ids"] = r.ids;
  j["text"] = r.text;
  j["finish_reason"] = r.finish_reason;
  j["stats"] = {{"prompt_tokens", r.prompt_tokens},
                {"new_tokens", new_tokens},
                {"steps", st.steps},
                {"drafted", st.drafted},
                {"accepted", st.accepted},
                {"corrections", st.corrections},
                {"bonus", st.bonus},
                {"pardoned", st.pardoned},
                {"accepted_per_position", st.accepted_per_position},
                {"mean_accept_length", st.steps ? json(st.mean_accept_length()) : json()},  // τ: null without a step
                {"distortion_tv_mean", st.distortion_n ? st.distortion_sum / st.distortion_n : 0.0},
                {"ttft_s", r.ttft_s},
                {"latency_s", r.latency_s},
                {"prefill_s", st.prefill_s},
                {"draft_s", st.draft_s},
                {"verify_s", st.verify_s},
                {"other_s", st.other_s},
                {"host_syncs", st.host_syncs},
                {"output_tokens_per_s", output_tokens_per_s(r)},
                {"load_s", load_s},
                {"threads", threads},
                {"draft_kind", a.setup.draft_kind},
                {"verifier", a.decoding.verifier}};
  env["load_average_1m_end"] = load_average_1m();
  j["env"] = std::move(env);
  return j;
}

// The prompt's ids: --prompt encoded (in the chat template with --chat), or --ids.
std::vector<int32_t> generate_prompt(const GenerateArgs& a, const LoadedModels& m) {
  std::vector<int32_t> prompt =
      a.has_prompt ? m.tokenizer->encode(a.chat ? qwen3_chat_prompt(a.prompt, a.thinking) : a.prompt)
                   : parse_ids(a.ids, "--ids");
  if (prompt.empty()) fail("the prompt is empty; pass --prompt TEXT or --ids \"...\"");
  return prompt;
}

int run_generate(const GenerateArgs& a, CommonOptions& common) {
  const int threads = set_threads(common.threads);
  json env = environment_json();  // its load_average_1m_start: before the models load the machine
  LoadedModels m = load_models(a.setup, /*need_tokenizer=*/a.has_prompt);
  // What ran (harness/run/environment.h): the target's and the draft's facts, the slow paths.
  env["model"] = model_environment_json(*m.target, a.setup.dtype);
  if (m.drafter) env["draft"] = draft_environment_json(m, a.setup);
  set_path_notices(env, {dtype_name(m.target->dtype())}, m.target->device().str());
  const std::vector<int32_t> prompt = generate_prompt(a, m);
  const DecodeParams p = runner::decode_params(a.decoding, stop_token_ids(m));
  Engine engine(*m.target, m.drafter.get(), m.tokenizer.get());
  GenRequest req;
  req.prompt = prompt;
  req.run_seed = a.seed;
  req.key = "generate";
  GenResult r = engine.generate({req}, p).at(0);
  if (!r.error.empty()) fail("generation failed: {}", r.error);
  print_notices(env);  // with the result: a failure stays one line
  if (common.json) {
    fmt::print("{}\n", generate_json(r, m.load_s, a, threads, std::move(env)).dump());
    return 0;
  }
  const auto& st = r.stats;
  const int64_t new_tokens = static_cast<int64_t>(r.ids.size());
  fmt::print("{}\n", r.text.empty() && !m.tokenizer ? fmt::format("{}", fmt::join(r.ids, " ")) : r.text);
  fmt::print(stderr, "[{} new tokens in {:.3f} s ({:.1f} tok/s; ttft {:.3f} s, decode {:.3f} s); steps {}, "
             "mean accept length {}, finish: {}]\n",
             new_tokens, r.latency_s, output_tokens_per_s(r), r.ttft_s, r.latency_s - r.ttft_s, st.steps,
             st.steps ? fmt::format("{:.2f}", st.mean_accept_length()) : std::string("n/a"), r.finish_reason);
  return 0;
}

// `ears-bench forward`
void add_forward_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  auto args = std::make_shared<ForwardArgs>();
  auto* sub = app.add_subcommand("forward", "Print a checkpoint's logits for given token ids (compare with transformers)");
  sub->add_option("--model", args->model, "Hugging Face checkpoint directory")->required();
  sub->add_option("--ids", args->ids, "Token ids, e.g. \"1 2 3\"")->required();
  in_range(sub->add_option("--last", args->last, "Print logits of the last K positions")->capture_default_str(), 1);
  sub->add_option("--dtype", args->dtype, "Compute dtype: auto|float32|bfloat16|float16")->capture_default_str();
  sub->add_option("--device", args->device, "cpu | cuda | cuda:N")->capture_default_str();
  sub->add_option("--aux", args->aux, "Also print hidden states entering these layers (HF hidden_states ids)");
  sub->add_option("--draft", args->draft, "EAGLE-3 draft directory: adds draft.logits_last and draft.chain_target_ids");
  auto* gamma = gamma_range(
      sub->add_option("--gamma", args->gamma, "Greedy draft chain length with --draft")->capture_default_str());
  add_threads(sub, common);
  sub->callback([args, gamma, &common, &exit_code] {
    if (gamma->count() > 0 && args->draft.empty())
      fail("--gamma: sets the draft chain's length, and there is no draft; add --draft DIR or drop --gamma");
    if (!args->aux.empty() && !args->draft.empty())
      fail("--aux: with --draft the forward reads the head's own aux layers (printed as draft.aux_layers); drop --aux "
           "or --draft");
    exit_code = run_forward(*args, common);
  });
}

// `ears-bench tokenize`
void add_tokenize_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* sub = app.add_subcommand("tokenize", "Encode text to ids (--text) or decode ids to text (--ids)");
  sub->add_option("--tokenizer", args->tokenizer, "Directory with tokenizer.json (or the file)")->required();
  auto* text = utf8_text(sub->add_option("--text", args->text, "Text to encode"));
  auto* ids = sub->add_option("--ids", args->ids, "Ids to decode, e.g. \"9707 1879\"");
  auto* lines = sub->add_option("--jsonl", args->jsonl, "Encode every line (a JSON string) of FILE; prints {ids, decoded} per line");
  text->excludes(ids);
  lines->excludes(text)->excludes(ids);
  sub->callback([args, text, ids, lines, &exit_code] {
    args->has_text = text->count() > 0;
    if (!args->has_text && ids->count() == 0 && lines->count() == 0)
      fail("tokenize: pass --text TEXT, --ids \"...\" or --jsonl FILE");
    exit_code = run_tokenize(*args);
  });
}

// `ears-bench generate`
// Options that only a speculative decode reads are refused when the target decodes alone, and a
// draft directory when --draft-kind none would leave it unread.
void check_speculative_options(const CLI::App& sub, const ModelSetup& setup) {
  if (setup.draft_kind != "none") return;
  if (!setup.draft_path.empty())
    fail("--draft {}: --draft-kind none decodes with the target alone; drop one of them", setup.draft_path);
  for (const char* flag : {"--gamma", "--verifier", "--beta", "--uncertainty", "--draft-sampling", "--aux-layer-convention"})
    if (sub.get_option(flag)->count() > 0)
      fail("{}: applies to speculative decoding, and this decodes with the target alone; add --draft DIR or drop {}", flag,
           flag);
}

void add_generate_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  auto args = std::make_shared<GenerateArgs>();
  auto* sub = app.add_subcommand("generate", "Generate text with the target alone or speculatively with a draft");
  sub->add_option("--target", args->setup.target_path, "Target checkpoint directory")->required();
  sub->add_option("--tokenizer", args->setup.tokenizer_path, "Tokenizer directory (default: --target)");
  auto* prompt = utf8_text(sub->add_option("--prompt", args->prompt, "Prompt text"));
  auto* ids = sub->add_option("--ids", args->ids, "Prompt token ids");
  prompt->excludes(ids);
  auto* chat = sub->add_flag("--chat", args->chat, "Wrap the prompt in the Qwen3 chat template (one user turn)");
  chat->needs(prompt);
  sub->add_flag("--thinking", args->thinking, "With --chat: leave thinking on (default off)")->needs(chat);
  param_range(sub->add_option("--temperature", args->decoding.temperature, "0 = greedy")->capture_default_str(),
              ranges::kTemperature);
  param_range(sub->add_option("--top-k", args->decoding.top_k, "0 = off")->capture_default_str(), ranges::kTopK);
  param_range(sub->add_option("--top-p", args->decoding.top_p, "1 = off")->capture_default_str(), ranges::kTopP);
  sub->add_option("--max-new-tokens", args->decoding.max_new_tokens)->capture_default_str();
  seed_range(sub->add_option("--seed", args->seed, "Run seed (the request's generator is derived from it)")
                 ->capture_default_str());
  utf8_text(sub->add_option("--stop", args->decoding.stop, "Stop string (repeatable)"), /*non_empty=*/true);
  sub->add_option("--dtype", args->setup.dtype, "auto|float32|bfloat16|float16")->capture_default_str();
  sub->add_option("--device", args->setup.device, "cpu | cuda | cuda:N")->capture_default_str();
  sub->add_option("--draft", args->setup.draft_path, "Draft checkpoint directory");
  sub->add_option("--draft-kind", args->setup.draft_kind, "eagle3 | model | none (default: eagle3 with --draft)");
  one_of(sub->add_option("--draft-sampling", args->decoding.draft_sampling, "sample | greedy")->capture_default_str(),
         config::kDraftSampling);
  sub->add_option("--aux-layer-convention", args->setup.aux_layer_convention, "hf | sglang")->capture_default_str();
  sub->add_option("--verifier", args->decoding.verifier, "baseline | ears | typical | greedy")->capture_default_str();
  param_range(sub->add_option("--beta", args->decoding.beta, "EARS beta")->capture_default_str(), ranges::kBeta);
  sub->add_option("--uncertainty", args->decoding.uncertainty, "EARS uncertainty: max_prob | entropy")->capture_default_str();
  gamma_range(sub->add_option("--gamma", args->decoding.gamma, "Draft tokens per step")->capture_default_str());
  sub->add_flag("--json", common.json, "Print {ids, text, stats} as JSON");
  add_threads(sub, common);
  sub->callback([args, prompt, ids, sub, &common, &exit_code] {
    args->has_prompt = prompt->count() > 0;
    if (!args->has_prompt && ids->count() == 0) fail("generate: pass --prompt TEXT or --ids \"...\"");
    if (sub->get_option("--draft-kind")->count() == 0)
      args->setup.draft_kind = args->setup.draft_path.empty() ? "none" : "eagle3";
    check_speculative_options(*sub, args->setup);
    exit_code = run_generate(*args, common);
  });
}

}  // namespace

void add_model_commands(CLI::App& app, CommonOptions& common, int& exit_code) {
  add_forward_command(app, common, exit_code);
  add_tokenize_command(app, common, exit_code);
  add_generate_command(app, common, exit_code);
}

}  // namespace ears
