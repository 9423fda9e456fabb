// Loading a tokenizer: tokenizer.json (model vocab and merges, added tokens, normalizer,
// pre-tokenizer, decoder) and tokenizer_config.json (eos_token) into Tokenizer::Impl. Anything
// this implementation would not reproduce exactly is refused with the file and key named.
// The checks run in file-structure order, so the first problem reported is always the same.
#include <algorithm>
#include <string>
#include <utility>

#include "decoders/tokenizer_impl.h"
#include "decoders/tokenizer_json.h"
#include "harness/base/utf8.h"

namespace ears {
namespace {

using tok::json;
using tok::JsonCtx;

// model: a byte-level BPE object (no dropout, no subword prefix / suffix) with model.vocab and
// model.merges (collected by the reader; the first malformed entry is reported here). Sets the
// BPE flags and byte_fallback; returns the model object.
const json& read_model(const JsonCtx& c, const tok::TokenizerJson& tj, tok::BpeModel& bpe,
                       bool& byte_fallback) {
  const json& model = c.req(tj.root, "model", "model");
  if (!model.is_object()) c.bad("model", "must be an object");
  if (const json* t = c.opt(model, "type")) {
    std::string type = c.str(*t, "model.type");
    if (type != "BPE")
      c.bad("model.type", fmt::format("is \"{}\"; only \"BPE\" (byte-level BPE) is supported", type));
  }
  if (const json* d = c.opt(model, "dropout")) {
    if (!d->is_number() || d->get<double>() != 0.0)
      c.bad("model.dropout", "BPE dropout is not supported; set it to null");
  }
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const json* v = c.opt(model, k); v && !c.str(*v, std::string("model.") + k).empty())
      c.bad(std::string("model.") + k, "a non-empty value is not supported for byte-level BPE");
  }
  bpe.ignore_merges = c.flag(model, "ignore_merges", "model.ignore_merges", false);
  bpe.fuse_unk = c.flag(model, "fuse_unk", "model.fuse_unk", false);
  byte_fallback = c.flag(model, "byte_fallback", "model.byte_fallback", false);
  const json& vocab_dom = c.req(model, "vocab", "model.vocab");
  if (!tj.saw_vocab || !vocab_dom.is_object())
    c.bad("model.vocab", fmt::format("must be an object {{token: id}}, found {}", vocab_dom.type_name()));
  const json& merges_dom = c.req(model, "merges", "model.merges");
  if (!tj.saw_merges || !merges_dom.is_array())
    c.bad("model.merges", fmt::format("must be an array, found {}", merges_dom.type_name()));
  if (!tj.bad_key.empty()) c.bad(tj.bad_key, tj.bad_what);
  return model;
}

// added_tokens: the entries as written (content not yet normalized), in file order. The
// vector is reserved to its final size: the matchers keep pointers into it.
std::vector<tok::AddedToken> read_added_tokens(const JsonCtx& c, const json& list) {
  if (!list.is_array()) c.bad("added_tokens", "must be an array");
  std::vector<tok::AddedToken> added;
  added.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    std::string key = fmt::format("added_tokens[{}]", i);
    if (!e.is_object()) c.bad(key, "must be an object");
    tok::AddedToken t;
    t.id = c.id(c.req(e, "id", key + ".id"), key + ".id");
    t.content = c.str(c.req(e, "content", key + ".content"), key + ".content");
    t.special = c.flag(e, "special", key + ".special", false);
    t.lstrip = c.flag(e, "lstrip", key + ".lstrip", false);
    t.rstrip = c.flag(e, "rstrip", key + ".rstrip", false);
    t.single_word = c.flag(e, "single_word", key + ".single_word", false);
    t.normalized = c.flag(e, "normalized", key + ".normalized", !t.special);
    added.push_back(std::move(t));
  }
  return added;
}

// Sizes the per-id tables to the largest id of model.vocab and added_tokens + 1 (refusing ids
// far sparser than the entries) and fills them from model.vocab, which is consumed.
void build_vocab(const JsonCtx& c, std::vector<std::pair<std::string, int64_t>>& entries,
                 const std::vector<tok::AddedToken>& added, tok::BpeModel& bpe, tok::Vocab& v) {
  int64_t max_id = -1;
  for (const auto& [token, id] : entries) max_id = std::max(max_id, id);
  for (const auto& t : added) max_id = std::max<int64_t>(max_id, t.id);
  const std::size_t n_entries = entries.size() + added.size();
  if (max_id >= int64_t(4 * n_entries + 1000000))
    c.bad("model.vocab", fmt::format("ids are too sparse (max id {} for {} tokens)", max_id, n_entries));
  const std::size_t n_ids = std::size_t(max_id + 1);
  v.model_token.assign(n_ids, {});
  v.id_bytes.assign(n_ids, {});
  v.id_flags.assign(n_ids, 0);
  std::vector<int32_t> vocab_order;
  vocab_order.reserve(entries.size());
  for (auto& [token, id64] : entries) {
    auto id = int32_t(id64);
    auto bytes = tok::byte_level_to_bytes(token);
    if (bpe.ignore_merges && bytes) bpe.vocab_bytes.insert_or_assign(*bytes, id);
    v.id_bytes[id] = bytes ? std::move(*bytes) : token;
    v.id_flags[id] = tok::Vocab::kDefined;
    v.model_token[id] = std::move(token);
    vocab_order.push_back(id);
  }
  entries = {};
  v.model_index.build(&v.model_token, vocab_order);
}

// The id of each single-byte token (byte_fallback needs all 256) and of model.unk_token.
void find_byte_tokens(const JsonCtx& c, const json& model, bool byte_fallback,
                      const tok::TokenIndex& index, tok::BpeModel& bpe) {
  bpe.byte_id.fill(-1);
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    utf8::append(ch, tok::byte_map().to_cp[b]);
    bpe.byte_id[b] = index.find(ch);
    if (bpe.byte_id[b] < 0 && byte_fallback)
      c.bad("model.byte_fallback", "byte_fallback with an incomplete byte alphabet is not supported");
  }
  if (const json* u = c.opt(model, "unk_token")) {
    std::string unk = c.str(*u, "model.unk_token");
    int32_t id = index.find(unk);
    if (id < 0) c.bad("model.unk_token", fmt::format("\"{}\" is not in model.vocab", unk));
    bpe.unk_id = id;
  }
}

// model.merges (consumed) -> (left id, right id) -> rank (the position) and merged id; both
// sides and their concatenation must be vocab tokens.
void build_merges(const JsonCtx& c, std::vector<tok::TokenizerJson::MergeEntry>& entries,
                  const tok::TokenIndex& index, tok::PairMap& merges) {
  merges.reserve(entries.size());
  std::string merged;
  for (std::size_t r = 0; r < entries.size(); ++r) {
    const auto& m = entries[r];
    std::string_view a = m.a, b = m.b;
    if (m.joined) {
      auto sp = m.a.find(' ');
      if (sp == std::string::npos || m.a.find(' ', sp + 1) != std::string::npos)
        c.bad(fmt::format("model.merges[{}]", r), fmt::format("\"{}\" must be two tokens separated by one space", m.a));
      a = std::string_view(m.a).substr(0, sp);
      b = std::string_view(m.a).substr(sp + 1);
    }
    int32_t ia = index.find(a), ib = index.find(b);
    if (ia < 0 || ib < 0)
      c.bad(fmt::format("model.merges[{}]", r), fmt::format("token \"{}\" is not in model.vocab", ia < 0 ? a : b));
    merged.assign(a);
    merged.append(b);
    int32_t im = index.find(merged);
    if (im < 0)
      c.bad(fmt::format("model.merges[{}]", r), fmt::format("merged token \"{}\" is not in model.vocab", merged));
    merges.insert_or_assign(tok::PairMap::key(ia, ib), int32_t(r), im);
  }
  entries = {};
}

// normalizer (`key` names `node`): NFC, or a Sequence of them (recursively). Sets nfc.
void read_normalizer(const JsonCtx& c, const json& node, const std::string& key, bool& nfc) {
  std::string type = c.str(c.req(node, "type", key + ".type"), key + ".type");
  if (type == "NFC") {
    nfc = true;
  } else if (type == "Sequence") {
    const json& list = c.req(node, "normalizers", key + ".normalizers");
    if (!list.is_array()) c.bad(key + ".normalizers", "must be an array");
    for (std::size_t i = 0; i < list.size(); ++i)
      read_normalizer(c, list[i], fmt::format("{}.normalizers[{}]", key, i), nfc);
  } else {
    c.bad(key + ".type", fmt::format("normalizer \"{}\" is not supported; supported: NFC, Sequence of NFC, or null", type));
  }
}

void add_split_regex(const JsonCtx& c, const std::string& pattern, const std::string& key,
                     std::vector<tok::Regex>& splits) {
  tok::Regex re;
  std::string err = re.compile(tok::translate_pattern(pattern));
  if (!err.empty()) c.bad(key, fmt::format("regex does not compile with PCRE2: {}", err));
  splits.push_back(std::move(re));
}

// pre_tokenizer (`key` names `node`): Split(Isolated, Regex or String pattern) steps and one
// ByteLevel(add_prefix_space=false) last, possibly in (nested) Sequences. Appends the split
// regexes in order (ByteLevel with use_regex adds the GPT-2 one); sets byte_level.
void read_pre_tokenizer(const JsonCtx& c, const json& node, const std::string& key,
                        std::vector<tok::Regex>& splits, bool& byte_level) {
  std::string type = c.str(c.req(node, "type", key + ".type"), key + ".type");
  if (type == "Sequence") {
    const json& list = c.req(node, "pretokenizers", key + ".pretokenizers");
    if (!list.is_array()) c.bad(key + ".pretokenizers", "must be an array");
    for (std::size_t i = 0; i < list.size(); ++i)
      read_pre_tokenizer(c, list[i], fmt::format("{}.pretokenizers[{}]", key, i), splits, byte_level);
  } else if (type == "Split") {
    if (byte_level) c.bad(key, "a Split after ByteLevel is not supported");
    std::string behavior = c.str(c.req(node, "behavior", key + ".behavior"), key + ".behavior");
    if (behavior != "Isolated")
      c.bad(key + ".behavior", fmt::format("\"{}\" is not supported; only \"Isolated\"", behavior));
    if (c.flag(node, "invert", key + ".invert", false)) c.bad(key + ".invert", "true is not supported");
    const json& pat = c.req(node, "pattern", key + ".pattern");
    if (const json* r = c.opt(pat, "Regex"))
      add_split_regex(c, c.str(*r, key + ".pattern.Regex"), key + ".pattern.Regex", splits);
    else if (const json* s = c.opt(pat, "String"))
      add_split_regex(c, tok::escape_literal(c.str(*s, key + ".pattern.String")), key + ".pattern.String", splits);
    else
      c.bad(key + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
  } else if (type == "ByteLevel") {
    if (c.flag(node, "add_prefix_space", key + ".add_prefix_space", true))
      c.bad(key + ".add_prefix_space", "true is not supported; only false");
    if (c.flag(node, "use_regex", key + ".use_regex", true))
      add_split_regex(c, tok::kGpt2Pattern, key + ".use_regex", splits);
    byte_level = true;
  } else {
    c.bad(key + ".type", fmt::format("pre-tokenizer \"{}\" is not supported; supported: Sequence, Split, ByteLevel", type));
  }
}

// decoder: must be ByteLevel.
void check_decoder(const JsonCtx& c, const json& root) {
  const json& dec = c.req(root, "decoder", "decoder");
  if (std::string t = c.str(c.req(dec, "type", "decoder.type"), "decoder.type"); t != "ByteLevel")
    c.bad("decoder.type", fmt::format("decoder \"{}\" is not supported; only \"ByteLevel\"", t));
}

// Enters the added tokens in the id tables (over model.vocab entries with the same id), NFC-
// normalizes the content of `normalized` ones when the normalizer is NFC, and gives each to the
// matcher that runs before (raw) or after (normalized) normalization.
void register_added_tokens(std::vector<tok::AddedToken>& added, tok::Vocab& v,
                           tok::PreTokenizer& pre) {
  for (tok::AddedToken& t : added) {
    auto bytes = tok::byte_level_to_bytes(t.content);
    v.id_bytes[t.id] = bytes ? std::move(*bytes) : t.content;
    v.id_flags[t.id] = uint8_t(tok::Vocab::kDefined | tok::Vocab::kAdded | (t.special ? tok::Vocab::kSpecial : 0));
    v.added_ids.insert_or_assign(t.content, t.id);
    v.added_names.insert_or_assign(t.id, t.content);
    if (t.normalized && pre.nfc) t.content = utf8_nfc(t.content);
  }
  for (const tok::AddedToken& t : added) (t.normalized ? pre.norm_matcher : pre.raw_matcher).add(&t);
}

}  // namespace

void Tokenizer::Impl::load(const std::filesystem::path& path) {
  file = path;
  JsonCtx c{path.string()};
  tok::TokenizerJson tj = tok::read_tokenizer_json(path);
  const json& root = tj.root;
  if (!root.is_object()) c.bad("(root)", "must be a JSON object");

  bool byte_fallback = false;
  const json& model = read_model(c, tj, bpe, byte_fallback);
  if (const json* at = c.opt(root, "added_tokens")) added = read_added_tokens(c, *at);
  build_vocab(c, tj.vocab, added, bpe, vocab);  // added tokens first: they size the tables
  find_byte_tokens(c, model, byte_fallback, vocab.model_index, bpe);
  build_merges(c, tj.merges, vocab.model_index, bpe.merges);

  if (const json* n = c.opt(root, "normalizer")) read_normalizer(c, *n, "normalizer", pre.nfc);
  bool byte_level = false;
  if (const json* pt = c.opt(root, "pre_tokenizer"))
    read_pre_tokenizer(c, *pt, "pre_tokenizer", pre.splits, byte_level);
  if (!byte_level)
    c.bad("pre_tokenizer", "has no ByteLevel step; only byte-level BPE tokenizers are supported");
  check_decoder(c, root);
  register_added_tokens(added, vocab, pre);
}

void Tokenizer::Impl::load_config(const std::filesystem::path& path) {
  JsonCtx c{path.string()};
  json root = tok::parse_json(path);
  if (!root.is_object()) c.bad("(root)", "must be a JSON object");
  const json* e = c.opt(root, "eos_token");
  if (!e) return;
  std::string name;
  if (e->is_string()) name = e->get<std::string>();
  else if (e->is_object() && e->contains("content")) name = c.str((*e)["content"], "eos_token.content");
  else c.bad("eos_token", "must be a string or an object with \"content\"");
  if (int32_t id = vocab.find_token(name); id >= 0) eos = id;
}

}  // namespace ears
