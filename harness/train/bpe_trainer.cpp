#include "harness/train/bpe_trainer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <queue>
#include <unordered_map>

#include "decoders/tokenizer.h"
#include "harness/base/utf8.h"
#include "harness/base/error.h"
#include "harness/base/files.h"

namespace ears {
namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kQwen3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-2 bytes_to_unicode: id order of the 256 byte tokens and their printable code points.
struct ByteTable {
  std::array<int32_t, 256> id_of_byte{};
  std::array<uint8_t, 256> byte_of_id{};
  std::array<uint32_t, 256> cp_of_byte{};
  ByteTable() {
    int32_t next_id = 0;
    uint32_t extra = 256;
    auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
    for (int b = 0; b < 256; ++b)
      if (printable(b)) {
        id_of_byte[b] = next_id;
        byte_of_id[next_id++] = uint8_t(b);
        cp_of_byte[b] = uint32_t(b);
      }
    for (int b = 0; b < 256; ++b)
      if (!printable(b)) {
        id_of_byte[b] = next_id;
        byte_of_id[next_id++] = uint8_t(b);
        cp_of_byte[b] = extra++;
      }
  }
};

const ByteTable& bytes_table() {
  static const ByteTable t;
  return t;
}

// Raw bytes -> byte-level token string ("Ġworld").
std::string byte_level(const std::string& raw) {
  std::string s;
  for (unsigned char b : raw) utf8::append(s, bytes_table().cp_of_byte[b]);
  return s;
}

ojson added_entry(int32_t id, const std::string& content, bool special) {
  ojson e;
  e["id"] = id;
  e["content"] = content;
  e["single_word"] = false;
  e["lstrip"] = false;
  e["rstrip"] = false;
  e["normalized"] = false;
  e["special"] = special;
  return e;
}

// tokenizer.json with the given vocab (raw bytes by id), merges (pairs of ids) and added tokens
// starting at id first_added.
std::string tokenizer_json(const std::vector<std::string>& vocab, const std::vector<std::pair<int32_t, int32_t>>& merges,
                           const BpeTrainerOptions& o) {
  ojson root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  ojson added = ojson::array();
  int32_t id = static_cast<int32_t>(vocab.size());
  for (const auto& t : o.special_tokens) added.push_back(added_entry(id++, t, true));
  for (const auto& t : o.added_tokens) added.push_back(added_entry(id++, t, false));
  root["added_tokens"] = std::move(added);
  root["normalizer"] = {{"type", "NFC"}};
  ojson byte_level_step = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  ojson split = {{"type", "Split"}, {"pattern", {{"Regex", kQwen3Pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
  root["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", ojson::array({split, byte_level_step})}};
  root["post_processor"] = byte_level_step;
  root["decoder"] = byte_level_step;
  ojson model;
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = nullptr;
  model["continuing_subword_prefix"] = "";
  model["end_of_word_suffix"] = "";
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = false;
  ojson v = ojson::object();
  for (std::size_t i = 0; i < vocab.size(); ++i) v[byte_level(vocab[i])] = static_cast<int32_t>(i);
  model["vocab"] = std::move(v);
  ojson m = ojson::array();
  for (const auto& [a, b] : merges) m.push_back(ojson::array({byte_level(vocab[a]), byte_level(vocab[b])}));
  model["merges"] = std::move(m);
  root["model"] = std::move(model);
  return root.dump(1) + "\n";
}

std::string tokenizer_config_json(int32_t first_added, const BpeTrainerOptions& o) {
  ojson root;
  root["add_bos_token"] = false;
  root["add_prefix_space"] = false;
  ojson dec = ojson::object();
  int32_t id = first_added;
  for (const auto& t : o.special_tokens) {
    ojson e = added_entry(id, t, true);
    e.erase("id");
    dec[std::to_string(id++)] = std::move(e);
  }
  for (const auto& t : o.added_tokens) {
    ojson e = added_entry(id, t, false);
    e.erase("id");
    dec[std::to_string(id++)] = std::move(e);
  }
  root["added_tokens_decoder"] = std::move(dec);
  root["bos_token"] = nullptr;
  root["clean_up_tokenization_spaces"] = false;
  root["eos_token"] = o.eos_token;
  root["errors"] = "replace";
  root["model_max_length"] = o.model_max_length;
  root["pad_token"] = o.pad_token;
  root["split_special_tokens"] = false;
  root["tokenizer_class"] = "Qwen2Tokenizer";
  root["unk_token"] = nullptr;
  return root.dump(2) + "\n";
}

uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

struct HeapItem {
  int64_t count;
  int32_t a, b;
  bool operator<(const HeapItem& o) const {  // max-heap on count, then smaller (a, b) first
    if (count != o.count) return count < o.count;
    return std::tie(a, b) > std::tie(o.a, o.b);
  }
};

// The corpus as byte-token words with their counts, and each adjacent pair's count over them.
struct WordPairs {
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> counts;
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;  // may hold stale or repeated entries
  std::vector<uint32_t> stamp;                                // the last merge round that visited a word
  uint32_t round = 0;

  void add_pairs(int32_t w, int64_t sign) {
    const auto& s = words[w];
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
      const uint64_t k = key(s[i], s[i + 1]);
      pair_count[k] += sign * counts[w];
      if (sign > 0) where[k].push_back(w);
    }
  }

  // Replaces (a, b) by `merged` in every word holding it; returns the pairs whose counts changed
  // (sorted, unique).
  std::vector<uint64_t> merge(int32_t a, int32_t b, int32_t merged) {
    const uint64_t k = key(a, b);
    ++round;
    std::vector<int32_t> affected = std::move(where[k]);
    where.erase(k);
    std::vector<uint64_t> touched;
    for (int32_t w : affected) {
      if (stamp[w] == round) continue;
      stamp[w] = round;
      auto& s = words[w];
      bool has = false;
      for (std::size_t i = 0; i + 1 < s.size() && !has; ++i) has = s[i] == a && s[i + 1] == b;
      if (!has) continue;
      for (std::size_t i = 0; i + 1 < s.size(); ++i) touched.push_back(key(s[i], s[i + 1]));
      add_pairs(w, -1);
      std::vector<int32_t> ns;
      ns.reserve(s.size());
      for (std::size_t i = 0; i < s.size(); ++i) {
        const bool here = i + 1 < s.size() && s[i] == a && s[i + 1] == b;
        ns.push_back(here ? merged : s[i]);
        if (here) ++i;
      }
      s = std::move(ns);
      add_pairs(w, +1);
      for (std::size_t i = 0; i + 1 < s.size(); ++i) touched.push_back(key(s[i], s[i + 1]));
    }
    pair_count.erase(k);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    return touched;
  }
};

// The corpus pre-tokenized by `skeleton`, words in a deterministic order (unordered_map
// iteration order is not portable), pairs counted.
WordPairs count_words(const std::vector<std::string>& corpus, const Tokenizer& skeleton, BpeTrainerResult& res) {
  std::unordered_map<std::string, int64_t> word_counts;
  for (const std::string& text : corpus) {
    res.corpus_bytes += text.size();
    for (std::string& w : skeleton.pretokenize(text)) ++word_counts[std::move(w)];
  }
  std::vector<std::pair<std::string, int64_t>> sorted(word_counts.begin(), word_counts.end());
  std::sort(sorted.begin(), sorted.end());
  res.unique_words = sorted.size();
  WordPairs wp;
  wp.words.resize(sorted.size());
  wp.counts.resize(sorted.size());
  wp.stamp.assign(sorted.size(), 0);
  for (std::size_t w = 0; w < sorted.size(); ++w) {
    wp.counts[w] = sorted[w].second;
    for (unsigned char c : sorted[w].first) wp.words[w].push_back(bytes_table().id_of_byte[c]);
  }
  for (int32_t w = 0; w < static_cast<int32_t>(wp.words.size()); ++w) wp.add_pairs(w, +1);
  return wp;
}

}  // namespace

BpeTrainerResult train_bpe_tokenizer(const std::vector<std::string>& corpus, const BpeTrainerOptions& o,
                                     const std::filesystem::path& out_dir) {
  const int32_t n_added = static_cast<int32_t>(o.special_tokens.size() + o.added_tokens.size());
  if (o.vocab_size < 256 + n_added)
    fail("BPE trainer: vocab_size {} leaves no room for the 256 byte tokens and {} added tokens (use >= {})",
         o.vocab_size, n_added, 256 + n_added);
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) fail("{}: cannot create the tokenizer directory: {}", out_dir.string(), ec.message());

  // Byte vocabulary, and a merge-free skeleton whose pre-tokenizer we use.
  std::vector<std::string> vocab(256);
  for (int32_t i = 0; i < 256; ++i) vocab[i] = std::string(1, char(bytes_table().byte_of_id[i]));
  std::vector<std::pair<int32_t, int32_t>> merges;
  write_file_atomic(out_dir / "tokenizer.json", tokenizer_json(vocab, merges, o));
  const Tokenizer skeleton = Tokenizer::load(out_dir / "tokenizer.json");

  BpeTrainerResult res;
  WordPairs wp = count_words(corpus, skeleton, res);
  std::priority_queue<HeapItem> heap;
  for (const auto& [k, c] : wp.pair_count) heap.push({c, int32_t(k >> 32), int32_t(k & 0xFFFFFFFF)});

  const int32_t max_merges = o.vocab_size - 256 - n_added;
  std::unordered_map<std::string, int32_t> id_of;  // a merge that re-creates an existing string reuses its id
  for (int32_t i = 0; i < 256; ++i) id_of.emplace(vocab[i], i);
  while (static_cast<int32_t>(vocab.size()) < 256 + max_merges && !heap.empty()) {
    const HeapItem top = heap.top();
    heap.pop();
    auto pc = wp.pair_count.find(key(top.a, top.b));
    if (pc == wp.pair_count.end() || pc->second != top.count) continue;  // stale entry
    if (top.count < o.min_frequency || top.count <= 0) break;
    std::string joined = vocab[top.a] + vocab[top.b];
    auto [found, fresh] = id_of.emplace(joined, static_cast<int32_t>(vocab.size()));
    if (fresh) vocab.push_back(std::move(joined));
    merges.emplace_back(top.a, top.b);
    for (uint64_t t : wp.merge(top.a, top.b, found->second)) {
      auto it = wp.pair_count.find(t);
      if (it == wp.pair_count.end()) continue;
      if (it->second <= 0) {
        wp.pair_count.erase(it);
        continue;
      }
      heap.push({it->second, int32_t(t >> 32), int32_t(t & 0xFFFFFFFF)});
    }
  }

  write_file_atomic(out_dir / "tokenizer.json", tokenizer_json(vocab, merges, o));
  write_file_atomic(out_dir / "tokenizer_config.json", tokenizer_config_json(static_cast<int32_t>(vocab.size()), o));
  res.merges = merges.size();
  res.vocab_size = static_cast<int32_t>(vocab.size()) + n_added;
  return res;
}

}  // namespace ears
