// `ears-bench train tokenizer|target|eagle3`: trains the embedded default pair (models/README.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "harness/base/error.h"
#include "harness/train/corpus.h"
#include "harness/train/eagle3.h"
#include "harness/train/target.h"

namespace ears {
namespace {

namespace fs = std::filesystem;

void print_line(const std::string& line) {
  fmt::print(stderr, "{}\n", line);
  std::fflush(stderr);
}

void add_schedule(CLI::App* sub, TrainSchedule& s, CommonOptions& common) {
  in_range(sub->add_option("--steps", s.steps, "Optimizer steps (the cosine schedule spans them)")
               ->capture_default_str(),
           1);
  in_range(sub->add_option("--minutes", s.minutes,
                           "Wall-time budget: after 5 steps the step count is cut to fit (0 = none)")
               ->capture_default_str(),
           0);
  in_range(sub->add_option("--batch", s.batch, "Sequences per step")->capture_default_str(), 1);
  // Two tokens at least: a row's last token predicts nothing.
  in_range(sub->add_option("--seq-len", s.seq_len, "Tokens per sequence")->capture_default_str(), 2);
  positive(sub->add_option("--lr", s.lr, "Peak learning rate")->capture_default_str());
  in_range(sub->add_option("--warmup", s.warmup, "Linear warmup steps")->capture_default_str(), 0);
  in_range(sub->add_option("--min-lr-ratio", s.min_lr_ratio, "Final LR / peak LR (cosine)")->capture_default_str(), 0,
           1);
  in_range(sub->add_option("--weight-decay", s.weight_decay, "AdamW decoupled weight decay (2-D weights only)")
               ->capture_default_str(),
           0);
  // 0 would scale every gradient to 0 (no training), not switch clipping off.
  positive(sub->add_option("--clip", s.clip, "Gradient clipping by global norm")->capture_default_str());
  seed_range(sub->add_option("--seed", s.seed, "Seed (initialisation, data order)")->capture_default_str());
  in_range(sub->add_option("--log-every", s.log_every, "Print the mean loss every N steps")->capture_default_str(), 1);
  sub->add_option("--device", s.device, "cpu | cuda | cuda:N")->capture_default_str();
  one_of(sub->add_option("--dtype", s.dtype, "Compute dtype (fp32 master weights): bfloat16 | float32")
             ->capture_default_str(),
         {"bfloat16", "float32"});
  sub->add_option("--threads", common.threads, threads_help());
}

// The attention and MLP sizes the target and the head share.
void add_shape(CLI::App* sub, int64_t& heads, int64_t& kv_heads, int64_t& head_dim, int64_t& intermediate) {
  in_range(sub->add_option("--heads", heads)->capture_default_str(), 1);
  in_range(sub->add_option("--kv-heads", kv_heads)->capture_default_str(), 1);
  in_range(sub->add_option("--head-dim", head_dim)->capture_default_str(), 1);
  in_range(sub->add_option("--intermediate", intermediate)->capture_default_str(), 1);
}

// The corpus mix and the evaluation after training, shared by the target and the head.
void add_mix_and_eval(CLI::App* sub, double& natural_fraction, int64_t& eval_n, const char* eval_what) {
  in_range(sub->add_option("--natural-fraction", natural_fraction, "Share of natural-text documents")->capture_default_str(),
           0, 1);
  in_range(sub->add_option("--eval-n", eval_n, fmt::format("After training: {} on N synth-gsm test problems", eval_what))
               ->capture_default_str(),
           0);
}

// What the ranges cannot say (each was a raw LibTorch shape error): grouped-query attention gives
// each KV head a whole group of query heads, and RoPE rotates pairs of dimensions.
void check_shape(int64_t heads, int64_t kv_heads, int64_t head_dim) {
  if (heads % kv_heads != 0)
    fail("--heads: {} is not a multiple of --kv-heads {}; pass --heads {} or a --kv-heads that divides {}", heads,
         kv_heads, (heads / kv_heads + 1) * kv_heads, heads);
  if (head_dim % 2 != 0)
    fail("--head-dim: {} is odd; RoPE rotates pairs of dimensions, pass e.g. {}", head_dim, head_dim + 1);
}

// A trained model (or tokenizer) in --out is replaced only on purpose: with --force, or when --init
// names --out itself (continued training in place, as scripts/train_models.sh does).
void check_out(const fs::path& out, const char* file, bool force, const fs::path& init = {}) {
  std::error_code ec;
  if (force || !fs::exists(out / file, ec)) return;
  if (!init.empty() && fs::equivalent(init, out, ec)) return;
  fail("--out {}: already holds a trained {}; pass --force to replace it, or another --out", out.string(), file);
}

// min_synth: the target and the head learn from chat documents, which only synth-gsm provides.
void add_corpus(CLI::App* sub, CorpusOptions& c, int min_synth = 1) {
  in_range(sub->add_option("--synth-n", c.synth_n, "synth-gsm train problems in the corpus")->capture_default_str(),
           min_synth);
  sub->add_option("--synth-seed", c.seed, "synth-gsm generation seed")->capture_default_str();
  sub->add_option("--gsm8k", c.gsm8k_train,
                  "GSM8K train.jsonl (file or dir) for natural text; default: $EARS_BENCH_DATA, data/, "
                  "../shared/datasets; 'none' to skip");
}

// `ears-bench train tokenizer`
void add_tokenizer_command(CLI::App* train, CommonOptions& common, int& exit_code) {
  auto o = std::make_shared<TokenizerTrainOptions>();
  auto* sub = train->add_subcommand("tokenizer", "Train a byte-level BPE tokenizer (Qwen3 pre-tokenizer, tokenizer.json)");
  sub->add_option("--out", o->out, "Output directory")->required();
  sub->add_option("--vocab", o->vocab_size, "Vocabulary size incl. 256 bytes and 5 added tokens")->capture_default_str();
  auto force = std::make_shared<bool>(false);
  sub->add_flag("--force", *force, "Replace the tokenizer.json already in --out (its model would no longer match)");
  add_corpus(sub, o->corpus, 0);
  sub->callback([o, force, &exit_code]() {
    check_out(o->out, "tokenizer.json", *force);
    train_tokenizer(*o, print_line);
    exit_code = 0;
  });
}

// `ears-bench train target`
void add_target_command(CLI::App* train, CommonOptions& common, int& exit_code) {
  auto o = std::make_shared<TargetTrainOptions>();
  auto* sub = train->add_subcommand("target", "Train a tiny Qwen3 target from scratch (saves config.json, bf16 model.safetensors)");
  sub->add_option("--out", o->out, "Output directory")->required();
  sub->add_option("--tokenizer", o->tokenizer, "Tokenizer directory (default: --out; trained there when missing)");
  sub->add_option("--vocab", o->vocab_size, "Vocabulary size when a tokenizer is trained")->capture_default_str();
  in_range(sub->add_option("--layers", o->arch.layers)->capture_default_str(), 1);
  in_range(sub->add_option("--hidden", o->arch.hidden)->capture_default_str(), 1);
  add_shape(sub, o->arch.heads, o->arch.kv_heads, o->arch.head_dim, o->arch.intermediate);
  add_mix_and_eval(sub, o->natural_fraction, o->eval_n, "greedy accuracy");
  in_range(sub->add_option("--prompt-weight", o->prompt_weight, "Loss weight of chat prompt tokens (answers: 1)")
               ->capture_default_str(),
           0, 1);
  sub->add_option("--init", o->init, "Start from this checkpoint's weights (continued training, same architecture)");
  auto force = std::make_shared<bool>(false);
  sub->add_flag("--force", *force, "Replace the model already trained in --out (not needed when --init is --out)");
  add_schedule(sub, o->schedule, common);
  add_corpus(sub, o->corpus);
  sub->callback([o, force, &common, &exit_code]() {
    check_shape(o->arch.heads, o->arch.kv_heads, o->arch.head_dim);
    // The saved model's context: training past it wrote a checkpoint whose positions it never had.
    if (o->schedule.seq_len > o->arch.max_position_embeddings)
      fail("--seq-len: {} is out of range; --seq-len must be <= {} (the model's max_position_embeddings)",
           o->schedule.seq_len, o->arch.max_position_embeddings);
    check_out(o->out, "model.safetensors", *force, o->init);
    o->schedule.threads = common.threads;
    train_target(*o, print_line);
    exit_code = 0;
  });
}

// `ears-bench train eagle3`
void add_eagle3_command(CLI::App* train, CommonOptions& common, int& exit_code) {
  auto o = std::make_shared<Eagle3TrainOptions>();
  auto aux = std::make_shared<std::string>();
  o->schedule.lr = 2e-3;
  o->schedule.batch = 16;
  auto* sub = train->add_subcommand("eagle3", "Train an EAGLE-3 head on a frozen target (training-time test)");
  sub->add_option("--target", o->target, "Target checkpoint directory (with tokenizer.json)")->required();
  sub->add_option("--out", o->out, "Output directory")->required();
  sub->add_option("--aux-layers", *aux,
                  "3 distinct target hidden states (entering layer i), e.g. \"1,3,5\" (default: EAGLE's 2, L/2, L-3; "
                  "1, L/2, L-1 where those repeat an id)");
  sub->add_option("--ttt", o->ttt_steps, "Training-time-test unroll steps")->capture_default_str();
  sub->add_option("--init", o->init, "Start from this head's weights (continued training, same architecture)");
  sub->add_option("--regenerate", o->regenerate,
                  "Answer the first N chat documents with the target's own greedy output (self-distillation)")
      ->capture_default_str();
  sub->add_option("--draft-vocab", o->draft_vocab,
                  "Score only the N most frequent target ids of the training answers (EAGLE-3's d2t / t2d); 0 = --init's, else every id")
      ->capture_default_str();
  add_shape(sub, o->arch.heads, o->arch.kv_heads, o->arch.head_dim, o->arch.intermediate);
  add_mix_and_eval(sub, o->natural_fraction, o->eval_n, "tau (greedy)");
  // Checked now, not after the training that precedes the evaluation.
  gamma_range(sub->add_option("--eval-gamma", o->eval_gamma, "Draft length for --eval-n")->capture_default_str());
  auto force = std::make_shared<bool>(false);
  sub->add_flag("--force", *force, "Replace the head already trained in --out (not needed when --init is --out)");
  add_schedule(sub, o->schedule, common);
  add_corpus(sub, o->corpus);
  sub->callback([o, aux, force, &common, &exit_code]() {
    check_shape(o->arch.heads, o->arch.kv_heads, o->arch.head_dim);
    check_out(o->out, "model.safetensors", *force, o->init);
    o->schedule.threads = common.threads;
    if (!aux->empty()) {
      const std::vector<int64_t> ids = parse_int_list(*aux, "--aux-layers", 0, 1024);
      o->arch.aux_layers.assign(ids.begin(), ids.end());
    }
    train_eagle3(*o, print_line);
    exit_code = 0;
  });
}

}  // namespace

void add_train_commands(CLI::App& app, CommonOptions& common, int& exit_code) {
  CLI::App* train = app.add_subcommand("train", "Train the embedded default tokenizer, tiny Qwen3 target and EAGLE-3 head");
  train->require_subcommand(1);
  add_tokenizer_command(train, common, exit_code);
  add_target_command(train, common, exit_code);
  add_eagle3_command(train, common, exit_code);
}

}  // namespace ears
