// Reading tokenizer.json / tokenizer_config.json (tokenizer_json.h): the whole-file parse and
// the SAX reader that streams model.vocab and model.merges into flat vectors.
#include "decoders/tokenizer_json.h"

#include "harness/base/files.h"

namespace ears::tok {
namespace {

// SAX reader for tokenizer.json: builds the DOM for everything except the two big members,
// model.vocab and model.merges, which are left empty in the DOM and collected into flat vectors.
class TokenizerJsonReader {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit TokenizerJsonReader(TokenizerJson& out) : out_(out) {}

  bool null() { return scalar([&] { return dom_.null(); }, "null"); }
  bool boolean(bool v) { return scalar([&] { return dom_.boolean(v); }, "a boolean"); }
  bool number_integer(number_integer_t v) {
    if (mode_ == kVocab && depth_ == mode_depth_) return vocab_id(v);
    return scalar([&] { return dom_.number_integer(v); }, "a number");
  }
  bool number_unsigned(number_unsigned_t v) {
    if (mode_ == kVocab && depth_ == mode_depth_)
      return vocab_id(v > uint64_t(INT64_MAX) ? int64_t(-1) : int64_t(v));
    return scalar([&] { return dom_.number_unsigned(v); }, "a number");
  }
  bool number_float(number_float_t v, const string_t& s) {
    return scalar([&] { return dom_.number_float(v, s); }, "a float");
  }
  bool binary(binary_t& v) { return scalar([&] { return dom_.binary(v); }, "binary"); }
  bool string(string_t& v) {
    if (mode_ == kMerges) {
      if (depth_ == mode_depth_) {
        out_.merges.push_back({std::move(v), {}, true});
        ++entry_;
      } else if (depth_ == mode_depth_ + 1) {
        if (pair_n_ == 0) pair_.a = std::move(v);
        else if (pair_n_ == 1) pair_.b = std::move(v);
        ++pair_n_;
      }
      return true;
    }
    return scalar([&] { return dom_.string(v); }, "a string");
  }
  bool key(string_t& k) {
    if (mode_ == kVocab) {
      if (depth_ == mode_depth_) vocab_key_ = std::move(k);
      return true;
    }
    if (mode_ != kNormal) return true;
    if (depth_ == 1) {
      key1_ = k;
      key2_.clear();
    } else if (depth_ == 2) {
      key2_ = k;
    }
    return dom_.key(k);
  }
  bool start_object(std::size_t n) {
    if (mode_ != kNormal) return open("an object");
    ++depth_;
    if (at_model_member("vocab")) {
      enter(kVocab, out_.saw_vocab);
      return dom_.start_object(0);  // left empty in the DOM
    }
    return dom_.start_object(n);
  }
  bool start_array(std::size_t n) {
    if (mode_ == kMerges && depth_ == mode_depth_) {
      ++depth_;
      pair_ = {};
      pair_n_ = 0;
      return true;
    }
    if (mode_ != kNormal) return open("an array");
    ++depth_;
    if (at_model_member("merges")) {
      enter(kMerges, out_.saw_merges);
      return dom_.start_array(0);  // left empty in the DOM
    }
    return dom_.start_array(n);
  }
  bool end_object() { return close(true); }
  bool end_array() { return close(false); }
  bool parse_error(std::size_t pos, const std::string& last, const json::exception& ex) {
    return dom_.parse_error(pos, last, ex);
  }

 private:
  enum Mode { kNormal, kVocab, kMerges };

  // Whether the container just opened is model.<member> of the root object.
  bool at_model_member(const char* member) const {
    return depth_ == 3 && key1_ == "model" && key2_ == member;
  }
  void enter(Mode mode, bool& saw) {
    mode_ = mode;
    mode_depth_ = depth_;
    saw = true;
  }
  template <class F>
  bool scalar(F&& forward, const char* what) {
    if (mode_ == kNormal) return forward();
    if (mode_ == kVocab && depth_ == mode_depth_)
      note(fmt::format("model.vocab[\"{}\"]", vocab_key_), fmt::format("must be an integer id, found {}", what));
    else if (mode_ == kMerges && depth_ == mode_depth_)
      note(fmt::format("model.merges[{}]", entry_++), fmt::format("must be a \"left right\" string or a [left, right] pair, found {}", what));
    else if (mode_ == kMerges && depth_ == mode_depth_ + 1)
      pair_n_ = 99;  // a non-string inside a pair
    return true;
  }
  bool vocab_id(int64_t v) {
    if (v < 0 || v > INT32_MAX)
      note(fmt::format("model.vocab[\"{}\"]", vocab_key_), fmt::format("id {} is out of range", v));
    else
      out_.vocab.emplace_back(std::move(vocab_key_), v);
    return true;
  }
  bool open(const char* what) {
    if (depth_ == mode_depth_) {
      if (mode_ == kVocab) note(fmt::format("model.vocab[\"{}\"]", vocab_key_), fmt::format("must be an integer id, found {}", what));
      else note(fmt::format("model.merges[{}]", entry_++), fmt::format("must be a \"left right\" string or a [left, right] pair, found {}", what));
    } else if (mode_ == kMerges && depth_ == mode_depth_ + 1) {
      pair_n_ = 99;
    }
    ++depth_;
    return true;
  }
  bool close(bool object) {
    if (mode_ == kNormal) {
      --depth_;
      return object ? dom_.end_object() : dom_.end_array();
    }
    if (depth_ == mode_depth_) {  // end of model.vocab / model.merges
      mode_ = kNormal;
      --depth_;
      return object ? dom_.end_object() : dom_.end_array();
    }
    if (mode_ == kMerges && depth_ == mode_depth_ + 1 && !object) {
      std::string key = fmt::format("model.merges[{}]", entry_++);
      if (pair_n_ == 2) out_.merges.push_back({std::move(pair_.a), std::move(pair_.b), false});
      else note(key, "must be a [left, right] pair of two strings");
    }
    --depth_;
    return true;
  }
  void note(std::string key, std::string what) {
    if (out_.bad_key.empty()) {
      out_.bad_key = std::move(key);
      out_.bad_what = std::move(what);
    }
  }

  TokenizerJson& out_;
  nlohmann::detail::json_sax_dom_parser<json> dom_{out_.root, true};
  Mode mode_ = kNormal;
  int depth_ = 0, mode_depth_ = 0;
  std::string key1_, key2_, vocab_key_;
  TokenizerJson::MergeEntry pair_;
  int pair_n_ = 0;
  std::size_t entry_ = 0;
};

[[noreturn]] void malformed(const std::filesystem::path& p, const json::exception& e) {
  fail("{}: malformed JSON ({}); re-download or fix the file", p.string(), e.what());
}

}  // namespace

json parse_json(const std::filesystem::path& p) {
  std::string text = read_file(p, "the tokenizer file");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    malformed(p, e);
  }
}

TokenizerJson read_tokenizer_json(const std::filesystem::path& path) {
  TokenizerJson out;
  {
    TokenizerJsonReader rd(out);
    std::string text = read_file(path, "the tokenizer file");
    try {
      json::sax_parse(text, &rd);
    } catch (const json::exception& e) {
      malformed(path, e);
    }
  }
  return out;
}

}  // namespace ears::tok
