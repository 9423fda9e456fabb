#include "harness/train/corpus.h"

#include <fmt/format.h>

#include <cstdlib>

#include "datasets/dataset.h"
#include "datasets/open_stems.h"
#include "datasets/synth_gsm.h"
#include "decoders/runtime.h"
#include "decoders/tokenizer.h"
#include "harness/base/error.h"

namespace ears {

namespace fs = std::filesystem;

std::string synth_user_message(const std::string& question) { return gsm8k_prompt(question, {}); }

int32_t need_token(const Tokenizer& tok, const char* name) {
  auto id = tok.token_to_id(name);
  if (!id) fail("{}: the tokenizer has no '{}' token; train one with `ears-bench train tokenizer`", tok.file().string(), name);
  return *id;
}

std::string find_gsm8k_train(const std::string& hint) {
  if (hint == "none") return "";
  std::vector<fs::path> tries;
  auto add_dir = [&](const fs::path& d) {
    tries.push_back(d / "train.jsonl");
    tries.push_back(d / "gsm8k" / "train.jsonl");
  };
  if (!hint.empty()) {
    if (fs::is_regular_file(hint)) return hint;
    add_dir(hint);
    for (const auto& p : tries)
      if (fs::is_regular_file(p)) return p.string();
    fail("--gsm8k '{}': no GSM8K train.jsonl there (give the file, its directory, or 'none')", hint);
  }
  if (const char* env = std::getenv("EARS_BENCH_DATA"); env && *env) add_dir(env);
  add_dir("data");
  add_dir("../shared/datasets");
  for (const auto& p : tries)
    if (fs::is_regular_file(p)) return p.string();
  return "";
}

std::vector<std::pair<std::string, std::string>> read_gsm8k_train(const std::string& path) {
  DatasetSpec spec;
  spec.name = "gsm8k";
  spec.path = path;
  spec.split = "train";
  return load_solutions(spec);
}

std::vector<std::string> tokenizer_corpus(const CorpusOptions& o) {
  std::vector<std::string> corpus;
  for (const auto& [q, a] : synth_gsm_pairs(o.synth_n, o.seed, "train")) corpus.push_back(synth_user_message(q) + "\n" + a);
  if (const std::string f = find_gsm8k_train(o.gsm8k_train); !f.empty())
    for (const auto& [q, a] : read_gsm8k_train(f)) corpus.push_back(q + "\n" + a);
  for (const auto& s : open_stems()) corpus.push_back(s);
  return corpus;
}

TrainDoc chat_doc(const Tokenizer& tok, const std::string& question, const std::string& answer, float prompt_weight) {
  TrainDoc d;
  d.ids = tok.encode(qwen3_chat_prompt(synth_user_message(question), /*thinking=*/false));
  d.weight.assign(d.ids.size(), prompt_weight);
  std::vector<int32_t> a = tok.encode(answer);
  a.push_back(need_token(tok, "<|im_end|>"));
  d.ids.insert(d.ids.end(), a.begin(), a.end());
  d.weight.insert(d.weight.end(), a.size(), 1.0f);
  return d;
}

TrainDoc text_doc(const Tokenizer& tok, const std::string& text) {
  TrainDoc d;
  d.ids = tok.encode(text);
  d.ids.push_back(need_token(tok, "<|endoftext|>"));
  d.weight.assign(d.ids.size(), 1.0f);
  return d;
}

DocPools build_doc_pools(const Tokenizer& tok, const CorpusOptions& o, float prompt_weight) {
  DocPools pools;
  const auto synth = synth_gsm_pairs(o.synth_n, o.seed, "train");
  pools.chat.reserve(synth.size());
  for (const auto& [q, a] : synth) pools.chat.push_back(chat_doc(tok, q, a, prompt_weight));
  if (const std::string f = find_gsm8k_train(o.gsm8k_train); !f.empty()) {
    for (const auto& [q, a] : read_gsm8k_train(f)) pools.natural.push_back(text_doc(tok, q + "\n" + a));
    pools.natural_source = f;
  } else {
    for (std::size_t i = 0; i < synth.size(); i += 4) pools.natural.push_back(text_doc(tok, synth[i].first + "\n" + synth[i].second));
    pools.natural_source = "synth-gsm raw";
  }
  if (pools.chat.empty()) fail("training corpus: synth_n is 0, so there are no chat documents");
  return pools;
}

BpeTrainerResult train_tokenizer(const TokenizerTrainOptions& o, const LogFn& log) {
  const double t0 = now_s();
  const std::vector<std::string> corpus = tokenizer_corpus(o.corpus);
  BpeTrainerOptions bo;
  bo.vocab_size = o.vocab_size;
  BpeTrainerResult r = train_bpe_tokenizer(corpus, bo, o.out);
  if (log) log(fmt::format("tokenizer: {} ids ({} merges) from {} documents, {:.1f} MB, {} distinct pre-tokens, {:.1f} s -> {}",
                           r.vocab_size, r.merges, corpus.size(), r.corpus_bytes / 1e6, r.unique_words, now_s() - t0,
                           (o.out / "tokenizer.json").string()));
  return r;
}

}  // namespace ears
