// The public Tokenizer facade (decoders/tokenizer.h): finding the files, encode / decode /
// lookups over the loaded tables, and the streaming IncrementalDecoder. The parts live beside
// it: tokenizer_load.cpp (reading tokenizer.json), pretokenizer (normalizer, added tokens,
// regex splits), bpe (the merge loop), vocab (id tables), stop_matcher, chat_template.
#include "decoders/tokenizer.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "decoders/tokenizer_impl.h"
#include "harness/base/error.h"
#include "harness/base/utf8.h"

namespace ears {

// ------------------------------------------------------------------------------------------
// Tokenizer

Tokenizer Tokenizer::load(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec))
    fail("tokenizer: {} does not exist; pass a model directory containing tokenizer.json or the "
         "tokenizer.json file itself", path.string());
  fs::path file = path, config;
  if (fs::is_directory(path, ec)) {
    file = path / "tokenizer.json";
    if (!fs::exists(file, ec))
      fail("tokenizer: {} has no tokenizer.json; only the Hugging Face tokenizer.json format is "
           "supported (not vocab.json + merges.txt alone)", path.string());
  }
  config = file.parent_path() / "tokenizer_config.json";
  auto impl = std::make_shared<Impl>();
  impl->load(file);
  if (fs::exists(config, ec)) impl->load_config(config);
  Tokenizer t;
  t.impl_ = std::move(impl);
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  const Impl& im = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  im.pre.run(
      text, [&](std::string_view word) { im.bpe.encode(word, out); },
      [&](int32_t id) { out.push_back(id); });
  return out;
}

std::vector<std::string> Tokenizer::pretokenize(std::string_view text) const {
  std::vector<std::string> out;
  impl_->pre.run(
      text, [&](std::string_view word) { if (!word.empty()) out.emplace_back(word); },
      [](int32_t) {});
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  const tok::Vocab& v = impl_->vocab;
  for (int32_t id : ids) {
    uint8_t f = v.flags(id);  // 0 for ids outside the table
    if (!(f & v.kDefined) || (skip_special && (f & v.kSpecial))) continue;
    bytes += v.id_bytes[id];
  }
  if (utf8::is_valid(bytes)) return bytes;
  return utf8::sanitize(bytes);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  int32_t id = impl_->vocab.find_token(token);
  if (id < 0) return std::nullopt;
  return id;
}

std::string Tokenizer::id_to_token(int32_t id) const {
  const tok::Vocab& v = impl_->vocab;
  if (id < 0 || std::size_t(id) >= v.id_flags.size()) return {};
  if (v.id_flags[id] & v.kAdded) return v.added_names.at(id);
  return v.model_token[id];
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  const tok::Vocab& v = impl_->vocab;
  if (id < 0 || std::size_t(id) >= v.id_flags.size()) return {};
  return v.id_bytes[id];
}

int32_t Tokenizer::vocab_size() const { return int32_t(impl_->vocab.id_flags.size()); }

bool Tokenizer::is_special(int32_t id) const { return impl_->vocab.flags(id) & tok::Vocab::kSpecial; }

bool Tokenizer::is_added(int32_t id) const { return impl_->vocab.flags(id) & tok::Vocab::kAdded; }

std::vector<int32_t> Tokenizer::stop_token_ids() const {
  std::vector<int32_t> ids;
  auto add = [&](std::optional<int32_t> id) {
    if (id && std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  };
  add(token_to_id("<|im_end|>"));
  add(token_to_id("<|endoftext|>"));
  add(impl_->eos);
  return ids;
}

std::optional<int32_t> Tokenizer::eos_token_id() const { return impl_->eos; }

const std::filesystem::path& Tokenizer::file() const { return impl_->file; }

// ------------------------------------------------------------------------------------------
// IncrementalDecoder

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tok_(tokenizer), skip_special_(skip_special) {}

std::string IncrementalDecoder::push(int32_t id) {
  if (skip_special_ && tok_.is_special(id)) return {};
  pending_ += tok_.token_bytes(id);
  std::string out;
  std::size_t used = utf8::decode_into(pending_, out, /*final=*/false);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDecoder::push(std::span<const int32_t> ids) {
  std::string out;
  for (int32_t id : ids) out += push(id);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out;
  utf8::decode_into(pending_, out, /*final=*/true);
  pending_.clear();
  return out;
}

void IncrementalDecoder::reset() { pending_.clear(); }

}  // namespace ears
