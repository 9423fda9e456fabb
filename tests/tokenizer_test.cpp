// Tokenizer tests: Qwen3 golden ids, dataset round trips, incremental decoding, stop strings,
// error messages, and small hand-written tokenizer.json files.
#include "decoders/tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <unistd.h>

#include "harness/base/utf8.h"
#include "harness/base/error.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using ears::Tokenizer;

namespace {

constexpr const char* kQwen3 = "tokenizers/qwen3";

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The real Qwen3 tokenizer, loaded once for the whole binary.
const Tokenizer& qwen3() {
  static const Tokenizer tok = [] {
    auto t0 = std::chrono::steady_clock::now();
    Tokenizer t = Tokenizer::load(ears::test::shared_dir() / kQwen3);
    std::printf("[ info ] Qwen3 tokenizer.json load: %.3f s\n", seconds_since(t0));
    return t;
  }();
  return tok;
}

std::vector<json> read_jsonl(const fs::path& p) {
  std::vector<json> rows;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) rows.push_back(json::parse(line));
  return rows;
}

// A fresh temporary directory per test.
struct TempDir {
  fs::path path;
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = fs::temp_directory_path() /
           (std::string("ears_tok_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return path / name;
  }
};

// GPT-2 byte -> unicode string (independent of the implementation under test).
std::string byte_char(unsigned char b) {
  int n = 0;
  for (int x = 0; x < b; ++x) {
    bool printable = (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
    if (!printable) ++n;
  }
  bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  uint32_t cp = printable ? b : 256 + n;
  std::string s;
  if (cp < 0x80) {
    s.push_back(char(cp));
  } else {
    s.push_back(char(0xC0 | (cp >> 6)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  }
  return s;
}
std::string bl(std::string_view bytes) {
  std::string s;
  for (unsigned char b : bytes) s += byte_char(b);
  return s;
}

// A small byte-level tokenizer.json: the 256 byte tokens (ids 0..255 in byte order), the
// given multi-byte tokens (ids 256..), merges as pairs or "a b" strings.
json tiny_tokenizer(const std::vector<std::string>& extra, const std::vector<std::pair<std::string, std::string>>& merges,
                    bool merges_as_pairs) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(uint8_t(b))] = b;
  int id = 256;
  for (const auto& t : extra) vocab[t] = id++;
  json m = json::array();
  for (const auto& [a, b] : merges) {
    if (merges_as_pairs) m.push_back(json::array({a, b}));
    else m.push_back(a + " " + b);
  }
  json added = json::array();
  auto add = [&](int tid, const std::string& content, bool special, bool rstrip = false) {
    added.push_back({{"id", tid}, {"content", content}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", rstrip}, {"normalized", false}, {"special", special}});
  };
  add(1000, "<sep>", true);
  add(1001, "<a>", false);
  add(1002, "<a><b>", false);
  add(1003, "<rs>", false, /*rstrip=*/true);
  return {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
        {"merges", m}}},
  };
}

// A valid Qwen3-shaped tokenizer (NFC, Sequence[Split, ByteLevel]) that error tests then break.
json qwen3_like_small() {
  json j = tiny_tokenizer({"ab"}, {{"a", "b"}}, true);
  j["normalizer"] = {{"type", "NFC"}};
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"}, {"pattern", {{"Regex", "\\p{L}+|\\s+|."}}}, {"behavior", "Isolated"}, {"invert", false}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}})}};
  return j;
}

std::string expect_load_error(const fs::path& p) {
  try {
    Tokenizer::load(p);
  } catch (const ears::Error& e) {
    EXPECT_EQ(e.exit_code, 2);
    return e.what();
  }
  ADD_FAILURE() << "loading " << p << " did not throw";
  return {};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Qwen3

TEST(Qwen3Tokenizer, GoldenIdsAndRoundTrip) {
  EARS_REQUIRE_SHARED(kQwen3);
  const auto& tok = qwen3();
  auto rows = read_jsonl(ears::test::shared_dir() / kQwen3 / "golden.jsonl");
  ASSERT_EQ(rows.size(), 72u);
  int exact = 0;
  std::vector<int> nfc_lines;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string text = rows[i]["text"];
    auto want = rows[i]["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text), want) << "golden line " << i + 1 << ": " << text;
    std::string back = tok.decode(want);
    EXPECT_EQ(back, ears::utf8_nfc(text)) << "golden line " << i + 1;
    if (back == text) ++exact;
    else nfc_lines.push_back(int(i) + 1);
  }
  EXPECT_EQ(exact, 70);
  EXPECT_EQ(nfc_lines, (std::vector<int>{54, 55}));
  EXPECT_EQ(ears::utf8_nfc("cafe\u0301 and e\u0301le\u0300ve"), "caf\u00e9 and \u00e9l\u00e8ve");
  EXPECT_EQ(ears::utf8_nfc("\u212b is"), "\u00c5 is");
}

TEST(Qwen3Tokenizer, VocabularyFacts) {
  EARS_REQUIRE_SHARED(kQwen3);
  const auto& tok = qwen3();
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int32_t>{9707, 1879}));
  EXPECT_EQ(tok.id_to_token(1879), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(tok.token_bytes(1879), " world");
  EXPECT_EQ(tok.token_to_id("!"), 0);
  EXPECT_EQ(tok.token_to_id("\xC4\xA0"), 220);  // "Ġ" = space
  EXPECT_EQ(tok.encode(" "), (std::vector<int32_t>{220}));
  EXPECT_EQ(tok.encode("\n"), (std::vector<int32_t>{198}));
  EXPECT_EQ(tok.encode("\n\n"), (std::vector<int32_t>{271}));
  EXPECT_EQ(tok.encode("1234567").size(), 7u);
  EXPECT_EQ(tok.encode(""), std::vector<int32_t>{});
  EXPECT_EQ(tok.token_to_id("<think>"), 151667);
  EXPECT_EQ(tok.id_to_token(151645), "<|im_end|>");
  EXPECT_TRUE(tok.is_special(151643));
  EXPECT_TRUE(tok.is_special(151645));
  EXPECT_FALSE(tok.is_special(151667));
  EXPECT_TRUE(tok.is_added(151667));
  EXPECT_FALSE(tok.is_special(9707));
  EXPECT_FALSE(tok.token_to_id("<|im_start").has_value());
  EXPECT_EQ(tok.id_to_token(151800), "");  // padded model rows have no token
  EXPECT_EQ(tok.eos_token_id(), 151645);
  EXPECT_EQ(tok.stop_token_ids(), (std::vector<int32_t>{151645, 151643}));
  // Undefined ids decode to nothing (HF ignores them).
  std::vector<int32_t> ids{9707, 151800, -3, 1879};
  EXPECT_EQ(tok.decode(ids), "Hello world");
}

TEST(Qwen3Tokenizer, ChatTemplate) {
  EARS_REQUIRE_SHARED(kQwen3);
  const auto& tok = qwen3();
  std::string p = ears::qwen3_chat_prompt("What is 2+2?", /*thinking=*/true);
  EXPECT_EQ(p, "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
  std::vector<int32_t> want{151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198};
  EXPECT_EQ(tok.encode(p), want);
  auto no_think = tok.encode(ears::qwen3_chat_prompt("What is 2+2?", /*thinking=*/false));
  want.insert(want.end(), {151667, 271, 151668, 271});
  EXPECT_EQ(no_think, want);
  // skip_special drops <|im_start|>/<|im_end|> but keeps the non-special <think> markers.
  EXPECT_EQ(tok.decode(no_think, /*skip_special=*/true), "user\nWhat is 2+2?\nassistant\n<think>\n\n</think>\n\n");
}

// Every dataset string round-trips; the encode time is printed, not asserted (speed is not a test).
TEST(Qwen3Tokenizer, DatasetsRoundTrip) {
  EARS_REQUIRE_SHARED(kQwen3);
  EARS_REQUIRE_SHARED("datasets/gsm8k/test.jsonl");
  const auto& tok = qwen3();
  const fs::path d = ears::test::shared_dir() / "datasets";

  auto gsm_test = read_jsonl(d / "gsm8k/test.jsonl");
  ASSERT_EQ(gsm_test.size(), 1319u);
  std::vector<std::string> questions;
  for (const auto& r : gsm_test) questions.push_back(r["question"]);
  auto t0 = std::chrono::steady_clock::now();
  std::size_t n_tokens = 0;
  for (const auto& q : questions) n_tokens += tok.encode(q).size();
  double secs = seconds_since(t0);
  std::printf("[ info ] encoded %zu GSM8K test questions (%zu tokens) in %.3f s\n", questions.size(),
              n_tokens, secs);
  EXPECT_GT(n_tokens, 1319u * 40);

  std::vector<std::string> all;
  for (const char* f : {"gsm8k/test.jsonl", "gsm8k/train.jsonl"})
    for (const auto& r : read_jsonl(d / f)) {
      all.push_back(r["question"]);
      all.push_back(r["answer"]);
    }
  for (const auto& r : read_jsonl(d / "nq_open/NQ-open.dev.jsonl")) all.push_back(r["question"]);
  ASSERT_EQ(all.size(), 2u * (1319 + 7473) + 3610);
  t0 = std::chrono::steady_clock::now();
  int bad = 0;
  for (const auto& s : all) {
    auto ids = tok.encode(s);
    if (tok.decode(ids) != ears::utf8_nfc(s) && ++bad <= 5) ADD_FAILURE() << "round trip failed: " << s;
  }
  EXPECT_EQ(bad, 0);
  std::printf("[ info ] round-tripped %zu dataset strings in %.3f s\n", all.size(), seconds_since(t0));
}

TEST(Qwen3Tokenizer, ThreadSafeEncode) {
  EARS_REQUIRE_SHARED(kQwen3);
  EARS_REQUIRE_SHARED("datasets/nq_open/NQ-open.dev.jsonl");
  const auto& tok = qwen3();
  std::vector<std::string> qs;
  for (const auto& r : read_jsonl(ears::test::shared_dir() / "datasets/nq_open/NQ-open.dev.jsonl"))
    qs.push_back(std::string(r["question"]) + " \u00e9t\u00e9 \u4f60\u597d " + std::to_string(qs.size()));
  std::vector<std::vector<int32_t>> a(qs.size()), b(qs.size());
  std::thread t1([&] { for (std::size_t i = 0; i < qs.size(); ++i) a[i] = tok.encode(qs[i]); });
  std::thread t2([&] { for (std::size_t i = qs.size(); i-- > 0;) b[i] = tok.encode(qs[i]); });
  t1.join();
  t2.join();
  EXPECT_EQ(a, b);
  for (std::size_t i = 0; i < qs.size(); i += 97) EXPECT_EQ(tok.decode(a[i]), qs[i]);
}

TEST(Qwen3Tokenizer, LongInputs) {
  EARS_REQUIRE_SHARED(kQwen3);
  const auto& tok = qwen3();
  std::string cjk;
  for (int i = 0; i < 6000; ++i) cjk += (i % 3 == 0) ? "\u4e2d" : (i % 3 == 1) ? "\u6587" : "\u5b57";
  std::string spaces(20000, ' ');
  std::string digits(5000, '7');
  std::string mixed = "x" + spaces + "y\n\n\n" + std::string(3000, '=') + "\r\n" + cjk;
  // Long runs of one pre-token class: correct and (ctest's timeout would catch a hang) finite.
  for (const std::string* s : {&cjk, &spaces, &digits, &mixed}) {
    auto ids = tok.encode(*s);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tok.decode(ids), *s);
  }
  EXPECT_EQ(tok.encode(digits).size(), 5000u);
}

TEST(Qwen3Tokenizer, AddedTokensAndPartialMarkers) {
  EARS_REQUIRE_SHARED(kQwen3);
  const auto& tok = qwen3();
  auto ids = tok.encode("a<think>b</think><|im_start|x<tool_call>");
  std::vector<int32_t> got_added;
  for (int32_t id : ids)
    if (tok.is_added(id)) got_added.push_back(id);
  EXPECT_EQ(got_added, (std::vector<int32_t>{151667, 151668, 151657}));
  EXPECT_EQ(tok.decode(ids), "a<think>b</think><|im_start|x<tool_call>");
  // A combining accent right after an added token is normalised on its own (stays decomposed).
  std::string s = "<think>e\u0301";
  EXPECT_EQ(tok.decode(tok.encode(s)), "<think>\u00e9");
  std::string t = "<think>\u0301";
  EXPECT_EQ(tok.decode(tok.encode(t)), t);
}

// ---------------------------------------------------------------------------------------------
// Decoding invalid UTF-8 and streaming

namespace {
// byte value -> id of its single-byte token
std::array<int32_t, 256> byte_ids(const Tokenizer& tok) {
  std::array<int32_t, 256> ids;
  ids.fill(-1);
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    auto b = tok.token_bytes(id);
    if (b.size() == 1 && !tok.is_added(id)) ids[static_cast<unsigned char>(b[0])] = id;
  }
  return ids;
}
std::vector<int32_t> ids_of_bytes(const std::array<int32_t, 256>& table, std::string_view bytes) {
  std::vector<int32_t> ids;
  for (unsigned char c : bytes) ids.push_back(table[c]);
  return ids;
}
}  // namespace

TEST(Qwen3Tokenizer, DecodeInvalidUtf8UsesReplacement) {
  EARS_REQUIRE_SHARED(kQwen3);
  const auto& tok = qwen3();
  auto table = byte_ids(tok);
  for (int b = 0; b < 256; ++b) ASSERT_GE(table[b], 0) << b;
  const std::string R = "\uFFFD";
  struct Case { std::string bytes, text; };
  std::vector<Case> cases = {
      {"\xE4\xBD\xA0", "\u4f60"},
      {"\xE4\xBD", R},                      // truncated at the end: one replacement
      {"\xE4\xBD" "a", R + "a"},            // truncated in the middle
      {"\xFF", R},
      {"\xC0\xAF", R + R},                  // overlong: C0 is never valid
      {"\xED\xA0\x80", R + R + R},          // surrogate
      {"\xF0\x9F\x98" "A", R + "A"},
      {"a\x80" "b", "a" + R + "b"},
  };
  for (const auto& c : cases) {
    auto ids = ids_of_bytes(table, c.bytes);
    EXPECT_EQ(tok.decode(ids), c.text);
    ears::IncrementalDecoder dec(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += dec.push(id);
    streamed += dec.flush();
    EXPECT_EQ(streamed, c.text);
  }
  EXPECT_EQ(ears::utf8::sanitize("ok\xE2\x82"), "ok" + R);
  EXPECT_FALSE(ears::utf8::is_valid("\xE2\x82"));
  EXPECT_TRUE(ears::utf8::is_valid("\u20ac"));
  // Invalid input text is encoded as if each bad subpart were U+FFFD.
  EXPECT_EQ(tok.encode("a\xFF" "b"), tok.encode("a\uFFFD" "b"));
}

TEST(Qwen3Tokenizer, IncrementalDecoderNeverSplitsCharacters) {
  EARS_REQUIRE_SHARED(kQwen3);
  const auto& tok = qwen3();
  std::string text =
      "Emoji \U0001F469\u200D\U0001F469\u200D\U0001F467 \U0001F44B\U0001F3FD \U0001F389\U0001F9EA, "
      "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u7e41\u9ad4\u5b57 \u65e5\u672c\u8a9e\u306e\u6587\u7ae0 "
      "\U00020000\U0002A6D6 \ud55c\uad6d\uc5b4 done.";
  auto ids = tok.encode(text);
  int partial_tokens = 0;
  for (int32_t id : ids) partial_tokens += !ears::utf8::is_valid(tok.token_bytes(id));
  EXPECT_GT(partial_tokens, 3) << "the test should exercise tokens that split characters";

  ears::IncrementalDecoder dec(tok);
  std::string all;
  int empty_chunks = 0;
  for (int32_t id : ids) {
    std::string chunk = dec.push(id);
    EXPECT_TRUE(ears::utf8::is_valid(chunk)) << "chunk splits a character";
    EXPECT_EQ(chunk.find("\uFFFD"), std::string::npos);
    empty_chunks += chunk.empty();
    all += chunk;
  }
  EXPECT_GT(empty_chunks, 0);
  EXPECT_EQ(dec.flush(), "");
  EXPECT_EQ(all, text);

  // Span push, skip_special, and a flush with a dangling partial character.
  ears::IncrementalDecoder dec2(tok, /*skip_special=*/true);
  std::vector<int32_t> with_special = tok.encode("<|im_start|>hi \U0001F389<|im_end|>");
  EXPECT_EQ(dec2.push(with_special), "hi \U0001F389");
  auto rare = tok.encode("\U0002A6D6");  // CJK Ext-B: several byte tokens
  ASSERT_GT(rare.size(), 1u);
  std::string head = dec2.push(rare[0]);
  EXPECT_EQ(head, "");
  EXPECT_EQ(dec2.flush(), "\uFFFD");
}

// ---------------------------------------------------------------------------------------------
// Stop strings

TEST(StopMatcher, StringSpanningTwoPushes) {
  ears::StopMatcher m({151645}, {"Question:"});
  EXPECT_FALSE(m.push(1, "The answer is 4.\nQues"));
  EXPECT_EQ(m.safe_length(), std::string("The answer is 4.\n").size());  // "Ques" is held back
  auto hit = m.push(2, "tion: what");
  ASSERT_TRUE(hit);
  EXPECT_FALSE(hit->by_token);
  EXPECT_EQ(hit->which, 0);
  EXPECT_EQ(m.kept(), "The answer is 4.\n");
  EXPECT_EQ(hit->cut, m.kept().size());
  EXPECT_EQ(m.safe_length(), hit->cut);
  // After a stop nothing more is appended and the same hit is returned.
  auto again = m.push(3, "more");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->cut, hit->cut);
  EXPECT_EQ(m.text(), "The answer is 4.\nQuestion: what");
}

TEST(StopMatcher, StopTokenAndEarliestString) {
  ears::StopMatcher tokstop({151645, 151643}, {});
  EXPECT_FALSE(tokstop.push(10, "Paris"));
  EXPECT_TRUE(tokstop.is_stop_id(151643));
  auto hit = tokstop.push(151645, "<|im_end|>");
  ASSERT_TRUE(hit);
  EXPECT_TRUE(hit->by_token);
  EXPECT_EQ(tokstop.kept(), "Paris");
  EXPECT_EQ(tokstop.text(), "Paris");

  ears::StopMatcher qa({}, {"\n", ".", ","});
  auto h = qa.push_text("Paris, France.\n");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->which, 2);
  EXPECT_EQ(qa.kept(), "Paris");

  ears::StopMatcher overlap({}, {"aab", "", "zz"});  // empty stop strings are ignored
  EXPECT_FALSE(overlap.push_text("xaa"));
  EXPECT_EQ(overlap.safe_length(), 1u);
  auto ho = overlap.push_text("ab");
  ASSERT_TRUE(ho);
  EXPECT_EQ(ho->which, 0);
  EXPECT_EQ(overlap.kept(), "xa");

  ears::StopMatcher none({}, {"###"});
  EXPECT_FALSE(none.push_text("abc"));
  EXPECT_FALSE(none.push_text("#"));
  EXPECT_EQ(none.safe_length(), 3u);
  EXPECT_FALSE(none.push_text("#x"));
  EXPECT_EQ(none.safe_length(), 6u);
  EXPECT_EQ(none.kept(), "abc##x");
  none.reset();
  EXPECT_EQ(none.text(), "");
  EXPECT_TRUE(none.push_text("a###"));
}

// ---------------------------------------------------------------------------------------------
// Hand-written tokenizer.json files

TEST(TinyTokenizer, MergesAsPairsAndStringsAgreeAndFollowRank) {
  TempDir dir;
  std::vector<std::string> extra = {"ab", "abc", bl(" ") + "ab", "bc", "aa"};
  // ids:                            256   257   258               259   260
  std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "b"}, {"ab", "c"}, {bl(" "), "ab"}, {"b", "c"}, {"a", "a"}};
  auto pairs = dir.write("pairs.json", tiny_tokenizer(extra, merges, true).dump());
  auto strings = dir.write("strings.json", tiny_tokenizer(extra, merges, false).dump());
  Tokenizer tp = Tokenizer::load(pairs), ts = Tokenizer::load(strings);

  const std::string text = "abc abd bc aaa <sep><a><b>x<a>y<rs>   z";
  auto ids = tp.encode(text);
  EXPECT_EQ(ids, ts.encode(text));
  std::vector<int32_t> want = {
      257,                  // "abc": (a,b) rank 0 then (ab,c)
      258, 'd',             // " abd": (a,b), then (Ġ,ab)
      ' ', 259,             // " bc"
      ' ', 260, 'a',        // " aaa": leftmost (a,a) first
      ' ', 1000, 1002, 'x', 1001, 'y', 1003, 'z'};  // added tokens; <rs> eats following spaces
  EXPECT_EQ(ids, want);
  EXPECT_EQ(tp.decode(ids), "abc abd bc aaa <sep><a><b>x<a>y<rs>z");
  EXPECT_EQ(tp.decode(ids, /*skip_special=*/true), "abc abd bc aaa <a><b>x<a>y<rs>z");
  EXPECT_EQ(tp.vocab_size(), 1004);
  EXPECT_TRUE(tp.is_special(1000));
  EXPECT_FALSE(tp.is_special(1001));
  EXPECT_EQ(tp.id_to_token(500), "");
  EXPECT_TRUE(tp.stop_token_ids().empty());  // no <|im_end|>, <|endoftext|> or config

  // Rank decides: with (b,c) ranked before (a,b), "abc" becomes a + bc.
  std::vector<std::pair<std::string, std::string>> reordered = {
      {"b", "c"}, {"a", "b"}, {"ab", "c"}, {bl(" "), "ab"}, {"a", "a"}};
  Tokenizer tr = Tokenizer::load(dir.write("reordered.json", tiny_tokenizer(extra, reordered, true).dump()));
  EXPECT_EQ(tr.encode("abc"), (std::vector<int32_t>{'a', 259}));
}

TEST(TinyTokenizer, NormalizerNullKeepsDecomposedText) {
  TempDir dir;
  auto j = tiny_tokenizer({}, {}, true);
  Tokenizer raw = Tokenizer::load(dir.write("raw.json", j.dump()));
  j["normalizer"] = {{"type", "NFC"}};
  Tokenizer nfc = Tokenizer::load(dir.write("nfc.json", j.dump()));
  const std::string s = "e\u0301";  // e + COMBINING ACUTE
  EXPECT_EQ(raw.decode(raw.encode(s)), s);
  EXPECT_EQ(nfc.decode(nfc.encode(s)), "\u00e9");
  EXPECT_EQ(raw.encode(s).size(), 3u);
  EXPECT_EQ(nfc.encode(s).size(), 2u);
}

TEST(TinyTokenizer, DirectoryWithConfigAndSplitRegexWhitespace) {
  TempDir dir;
  // U+180E is not White_Space (HF/Oniguruma), although PCRE2's \s matches it: "\u180E!" must stay
  // one pre-token, so the merge of its last byte with "!" applies.
  const std::string mvs = "\xE1\xA0\x8E";
  auto j = tiny_tokenizer({bl("\x8E!")}, {{bl("\x8E"), "!"}}, true);
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"},
                     {"pattern", {{"Regex", " ?\\p{L}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}})}};
  j["added_tokens"].push_back({{"id", 1004}, {"content", "<|im_end|>"}, {"special", true}});
  dir.write("tokenizer.json", j.dump());
  dir.write("tokenizer_config.json", R"({"eos_token": {"content": "<sep>"}})");
  Tokenizer t = Tokenizer::load(dir.path);
  EXPECT_EQ(t.encode("a" + mvs + "!"), (std::vector<int32_t>{'a', 0xE1, 0xA0, 256}));
  EXPECT_EQ(t.eos_token_id(), 1000);
  EXPECT_EQ(t.stop_token_ids(), (std::vector<int32_t>{1004, 1000}));
  EXPECT_EQ(t.file(), dir.path / "tokenizer.json");
}

TEST(TinyTokenizer, LoadErrorsNameFileAndKey) {
  TempDir dir;
  EXPECT_NE(expect_load_error(dir.path / "nope").find("nope"), std::string::npos);
  fs::create_directories(dir.path / "empty");
  EXPECT_NE(expect_load_error(dir.path / "empty").find("has no tokenizer.json"), std::string::npos);

  auto malformed = dir.write("malformed.json", "{\"model\": {\"type\": \"BPE\", ");
  std::string msg = expect_load_error(malformed);
  EXPECT_NE(msg.find(malformed.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed JSON"), std::string::npos) << msg;

  auto check = [&](const std::string& name, json j, const std::string& key) {
    auto p = dir.write(name, j.dump());
    std::string m = expect_load_error(p);
    EXPECT_NE(m.find(p.string()), std::string::npos) << m;
    EXPECT_NE(m.find(key), std::string::npos) << m;
  };
  json j = qwen3_like_small();
  ASSERT_NO_THROW(Tokenizer::load(dir.write("ok.json", j.dump())));

  json wp = j;
  wp["model"]["type"] = "WordPiece";
  check("wordpiece.json", wp, "'model.type'");
  json re = j;
  re["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(\\p{L}+";
  check("regex.json", re, "'pre_tokenizer.pretokenizers[0].pattern.Regex'");
  json nf = j;
  nf["normalizer"] = {{"type", "NFKC"}};
  check("nfkc.json", nf, "'normalizer.type'");
  json mg = j;
  mg["model"]["merges"].push_back(json::array({"a", "\xE2\x9C\x93"}));
  check("merge.json", mg, "'model.merges[1]'");
  json mg2 = j;
  mg2["model"]["merges"].push_back("a b c");
  check("merge2.json", mg2, "'model.merges[1]'");
  json nv = j;
  nv["model"].erase("vocab");
  check("novocab.json", nv, "'model.vocab'");
  json nb = j;
  nb["pre_tokenizer"] = {{"type", "Whitespace"}};
  check("whitespace.json", nb, "'pre_tokenizer.type'");
  json dec = j;
  dec["decoder"] = {{"type", "WordPiece"}};
  check("decoder.json", dec, "'decoder.type'");
  json at = j;
  at["added_tokens"][0]["id"] = "seven";
  check("added.json", at, "'added_tokens[0].id'");

  dir.write("tokenizer.json", j.dump());
  dir.write("tokenizer_config.json", "{ nope");
  std::string cm = expect_load_error(dir.path);
  EXPECT_NE(cm.find("tokenizer_config.json"), std::string::npos) << cm;
}

// harness/base/utf8: the one UTF-8 validator the tokenizer, the loaders, the scorers and the config
// reader share. RFC 3629 edges, offsets of the first bad byte, maximal-subpart replacement.
TEST(Utf8, ValidatesDecodesAndReplacesMaximalSubparts) {
  using ears::utf8::first_invalid;
  const std::string R = "\xEF\xBF\xBD";
  constexpr auto npos = std::string_view::npos;
  EXPECT_EQ(first_invalid(""), npos);
  EXPECT_EQ(first_invalid("plain ascii"), npos);
  EXPECT_EQ(first_invalid("\x7F\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xF0\x90\x80\x80\xF4\x8F\xBF\xBF"), npos);
  EXPECT_EQ(first_invalid("ab\xC0\xAF"), 2u);          // overlong '/'
  EXPECT_EQ(first_invalid("a\xE0\x9F\xBF"), 1u);        // overlong 3-byte
  EXPECT_EQ(first_invalid("abc\xED\xA0\x80"), 3u);      // surrogate U+D800
  EXPECT_EQ(first_invalid("\xF4\x90\x80\x80"), 0u);     // above U+10FFFF
  EXPECT_EQ(first_invalid("x\xF5"), 1u);                // never a lead byte
  EXPECT_EQ(first_invalid("euro \xE2\x82"), 5u);        // truncated at the end
  EXPECT_EQ(first_invalid("\x80"), 0u);                 // lone continuation byte
  char32_t cp = 0;
  EXPECT_EQ(ears::utf8::decode("\xF0\x9F\x98\x80!", 0, cp), 4u);
  EXPECT_EQ(cp, U'\U0001F600');
  EXPECT_EQ(ears::utf8::decode("\xC3(", 0, cp), 0u);
  std::string out;
  for (char32_t c : {U'a', U'\u00e9', U'\u20ac', U'\U0001F600'}) ears::utf8::append(out, c);
  EXPECT_EQ(out, "a\u00e9\u20ac\U0001F600");
  // One U+FFFD per maximal invalid subpart (Unicode / Python errors="replace").
  EXPECT_EQ(ears::utf8::sanitize("a\xF0\x9F\x98" "b"), "a" + R + "b");
  EXPECT_EQ(ears::utf8::sanitize("a\xF0\x9F\x98\xF0\x9F\x98\x80"), "a" + R + "\U0001F600");
  EXPECT_EQ(ears::utf8::sanitize("\xC0\xAF"), R + R);
  EXPECT_EQ(ears::utf8::sanitize("\xED\xA0\x80"), R + R + R);
  // Streaming: an incomplete tail is left for the next call unless final.
  std::string streamed;
  EXPECT_EQ(ears::utf8::decode_into("ok\xE2\x82", streamed, /*final=*/false), 2u);
  EXPECT_EQ(streamed, "ok");
}
