// Tests for datasets/ loaders: errors, generic jsonl, synth-gsm, open-stems.
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "datasets/dataset.h"
#include "datasets/open_stems.h"
#include "datasets/scoring.h"
#include "datasets/synth_gsm.h"
#include "harness/base/utf8.h"
#include "harness/base/error.h"
#include "tests/test_util.h"
#include "tests/data_test_util.h"

namespace fs = std::filesystem;
using namespace ears;

namespace {

// Integer evaluator for calculator annotations: + - * / and parentheses, left to right with
// the usual precedence; nullopt on syntax errors or inexact division.
struct Calc {
  std::string_view s;
  std::size_t i = 0;
  std::optional<long long> number() {
    if (i < s.size() && s[i] == '(') {
      ++i;
      auto v = expr();
      if (!v || i >= s.size() || s[i] != ')') return std::nullopt;
      ++i;
      return v;
    }
    std::size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (start == i) return std::nullopt;
    return std::stoll(std::string(s.substr(start, i - start)));
  }
  std::optional<long long> term() {
    auto v = number();
    while (v && i < s.size() && (s[i] == '*' || s[i] == '/')) {
      char op = s[i++];
      auto r = number();
      if (!r) return std::nullopt;
      if (op == '*') v = *v * *r;
      else if (*r == 0 || *v % *r != 0) return std::nullopt;
      else v = *v / *r;
    }
    return v;
  }
  std::optional<long long> expr() {
    auto v = term();
    while (v && i < s.size() && (s[i] == '+' || s[i] == '-')) {
      char op = s[i++];
      auto r = term();
      if (!r) return std::nullopt;
      v = op == '+' ? *v + *r : *v - *r;
    }
    return v;
  }
  static std::optional<long long> eval(std::string_view text) {
    Calc c{text};
    auto v = c.expr();
    return c.i == text.size() ? v : std::nullopt;
  }
};

}  // namespace

using namespace ears::test::data_test;

// ---------------------------------------------------------------- errors

TEST(DatasetErrors, MissingFileNamesPathsAndFix) {
  TempDir tmp;
  ScopedEnv env("EARS_BENCH_DATA", tmp.path.string());
  DatasetSpec spec;
  spec.name = "gsm8k";
  std::string msg = error_of(spec);
  std::string expected_path = (tmp.path / "gsm8k" / "test.jsonl").string();
  EXPECT_EQ(msg.rfind("dataset 'gsm8k': file not found; looked in: " + expected_path, 0), 0u)
      << msg;
  EXPECT_NE(msg.find("Get it with: mkdir -p " + (tmp.path / "gsm8k").string() +
                     " && curl -L -o " + expected_path +
                     " https://raw.githubusercontent.com/openai/grade-school-math/master/"
                     "grade_school_math/data/test.jsonl"),
            std::string::npos)
      << msg;

  spec.name = "nq_open";
  spec.path = tmp.path.string();  // a directory: both <dir>/<file> and <dir>/<name>/<file>
  msg = error_of(spec);
  EXPECT_NE(msg.find((tmp.path / "NQ-open.dev.jsonl").string() + ", " +
                     (tmp.path / "nq_open" / "NQ-open.dev.jsonl").string()),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("google-research-datasets/natural-questions/master/nq_open/"
                     "NQ-open.dev.jsonl"),
            std::string::npos);

  spec.name = "spec_bench";
  spec.path = (tmp.path / "nope.jsonl").string();
  msg = error_of(spec);
  EXPECT_NE(msg.find("looked in: " + spec.path), std::string::npos) << msg;
  EXPECT_NE(msg.find("hemingkx/Spec-Bench/main/data/spec_bench/question.jsonl"),
            std::string::npos);
}

// Spec-Bench ids come from the file (question_id): a repeated one made its second request count
// as done, so half a run never ran and `--resume` could not finish it.
TEST(DatasetErrors, RepeatedRequestIdsAreRefusedOrSkipped) {
  TempDir tmp;
  auto q = [](int id, const char* text) {
    return nlohmann::json{{"question_id", id}, {"category", "qa"}, {"turns", {text}}}.dump() + "\n";
  };
  const std::string file = tmp.write("sb.jsonl", q(81, "a?") + q(82, "b?") + q(81, "c?"));
  DatasetSpec spec;
  spec.name = "spec_bench";
  spec.path = file;
  EXPECT_EQ(error_of(spec), file + ":3: request id 'spec_bench/81' repeats line 1 (spec_bench: question_id); fix the "
                                   "record, or set dataset.on_error: skip");
  spec.on_error = "skip";
  const Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 2u);
  EXPECT_EQ(ds.skipped_lines, 1u);
  EXPECT_EQ(ds.requests[0].prompt, "a?");
  EXPECT_EQ(ds.requests[1].id, "spec_bench/82");
}

TEST(DatasetErrors, BadLinesReportedWithLineNumbers) {
  TempDir tmp;
  std::string good = R"({"question": "What is 2+2?", "answer": "2+2=<<2+2=4>>4\n#### 4"})";
  std::string file = tmp.write("bad.jsonl", good + "\n{\"question\": \"x\", \"answer\": \n" +
                                                R"({"question": "y"})" + "\n" + good + "\n");
  DatasetSpec spec;
  spec.name = "gsm8k";
  spec.path = file;
  std::string msg = error_of(spec);
  EXPECT_EQ(msg.rfind(file + ":2: invalid JSON (", 0), 0u) << msg;

  spec.on_error = "skip";
  Dataset ds = load_dataset(spec);
  EXPECT_EQ(ds.skipped_lines, 2u);
  ASSERT_EQ(ds.requests.size(), 2u);
  EXPECT_EQ(ds.requests[1].source_line, 4u);
  EXPECT_EQ(ds.requests[1].gold, std::vector<std::string>{"4"});

  std::string missing = tmp.write("missing.jsonl", good + "\n" + R"({"question": "y"})" + "\n");
  spec.on_error = "fail";
  spec.path = missing;
  EXPECT_EQ(error_of(spec), missing + ":2: missing field 'answer'");

  std::string no_final = tmp.write("nofinal.jsonl", R"({"question": "y", "answer": "7"})");
  spec.path = no_final;
  EXPECT_EQ(error_of(spec).rfind(no_final + ":1: field 'answer' has no final '#### <answer>'", 0),
            0u);

  std::string not_utf8 = tmp.write("latin1.jsonl", good + "\n" + good + "\n" +
                                                       "{\"question\": \"caf\xE9\", \"answer\": \"#### 1\"}\n");
  spec.path = not_utf8;
  msg = error_of(spec);
  EXPECT_EQ(msg.rfind(not_utf8 + ":3: invalid UTF-8 at byte 18", 0), 0u) << msg;

  std::string empty = tmp.write("empty.jsonl", "");
  spec.path = empty;
  EXPECT_EQ(error_of(spec), empty + ": empty file (expected one JSON object per line)");
  std::string blank = tmp.write("blank.jsonl", "\n  \n");
  spec.path = blank;
  EXPECT_NE(error_of(spec).find("empty file"), std::string::npos);

  std::string all_bad = tmp.write("allbad.jsonl", "[1]\nnull\n");
  spec.path = all_bad;
  spec.on_error = "skip";
  EXPECT_NE(error_of(spec).find("no usable records (2 bad lines skipped)"), std::string::npos);
  spec.on_error = "fail";
  EXPECT_EQ(error_of(spec), all_bad + ":1: expected a JSON object on each line");

  // CRLF line endings, a BOM and blank lines are tolerated.
  std::string crlf = tmp.write("crlf.jsonl", "\xEF\xBB\xBF" + good + "\r\n\r\n" + good + "\r\n");
  spec.path = crlf;
  Dataset ok = load_dataset(spec);
  ASSERT_EQ(ok.requests.size(), 2u);
  EXPECT_EQ(ok.requests[1].source_line, 3u);
}

TEST(DatasetErrors, BadSpecs) {
  DatasetSpec spec;
  spec.name = "gsm9k";
  EXPECT_NE(error_of(spec).find("unknown dataset 'gsm9k'; use one of: gsm8k, nq_open"),
            std::string::npos);
  spec.name = "open-stems";
  spec.on_error = "ignore";
  EXPECT_NE(error_of(spec).find("on_error must be 'fail' or 'skip'"), std::string::npos);
  spec.on_error = "fail";
  spec.n_shot = 2;
  EXPECT_NE(error_of(spec).find("n_shot is only supported for gsm8k and synth-gsm"),
            std::string::npos);
  spec.n_shot = 0;
  spec.prompt_template = "no placeholder";
  EXPECT_NE(error_of(spec).find("must contain '{question}'"), std::string::npos);
  spec.prompt_template = "";
  spec.scorer = "rouge";
  EXPECT_NE(error_of(spec).find("unknown scorer 'rouge'"), std::string::npos);
  spec.scorer = "";
  spec.name = "jsonl";
  EXPECT_NE(error_of(spec).find("needs a path"), std::string::npos);
  spec.name = "synth-gsm";
  spec.split = "dev";
  EXPECT_NE(error_of(spec).find("unknown split 'dev'"), std::string::npos);
}

// ---------------------------------------------------------------- generic jsonl

TEST(GenericJsonl, FieldMappingAndTemplate) {
  TempDir tmp;
  std::string file = tmp.write(
      "custom.jsonl",
      R"({"meta": {"text": "Capital of France", "tags": ["geo"]}, "answers": ["Paris", 75]})"
      "\n"
      R"({"meta": {"text": "Largest planet", "tags": [3]}, "answers": "Jupiter"})"
      "\n"
      R"({"meta": {"text": "Just text"}})"
      "\n");
  DatasetSpec spec;
  spec.name = "jsonl";
  spec.path = file;
  spec.prompt_field = "meta.text";
  spec.answer_field = "answers";
  spec.category_field = "meta.tags.0";
  spec.prompt_template = "Q: {question}?\nA ({question}):";
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 3u);
  EXPECT_EQ(ds.scorer, "squad");
  EXPECT_EQ(ds.requests[0].id, "jsonl/custom/0");
  EXPECT_EQ(ds.requests[0].prompt, "Q: Capital of France?\nA (Capital of France):");
  EXPECT_EQ(ds.requests[0].gold, (std::vector<std::string>{"Paris", "75"}));
  EXPECT_EQ(ds.requests[0].category, "geo");
  EXPECT_EQ(ds.requests[1].category, "3");
  EXPECT_EQ(ds.requests[1].gold, std::vector<std::string>{"Jupiter"});
  EXPECT_TRUE(ds.requests[2].gold.empty());
  EXPECT_EQ(ds.requests[2].category, "");

  spec.prompt_field = "meta.missing";
  EXPECT_EQ(error_of(spec), file + ":1: missing field 'meta.missing'");
  spec.prompt_field = "meta.tags";
  EXPECT_NE(error_of(spec).find(":1: field 'meta.tags' must be a string"), std::string::npos);
  spec.prompt_field = "meta.text";
  spec.scorer = "gsm8k";
  EXPECT_EQ(load_dataset(spec).scorer, "gsm8k");
}

// ---------------------------------------------------------------- synth-gsm

TEST(SynthGsm, DeterministicForASeed) {
  auto a = synth_gsm_pairs(200, 7, "test");
  auto b = synth_gsm_pairs(200, 7, "test");
  auto c = synth_gsm_pairs(200, 8, "test");
  ASSERT_EQ(a.size(), 200u);
  EXPECT_EQ(a, b);
  int same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == c[i];
  EXPECT_LT(same, 5);
  // Golden values pin the hash and the generator across platforms/compilers.
  EXPECT_EQ(synth_gsm_hash(""), 0xCBF29CE484222325ULL);
  EXPECT_EQ(synth_gsm_hash("a"), 0xAF63DC4C8601EC8CULL);
  EXPECT_EQ(a[0].first, "Marco buys 11 T-shirts for $19 each. How much does he spend?");
  EXPECT_EQ(a[0].second, "Marco spends 11 * 19 = $<<11*19=209>>209.\n#### 209");
  EXPECT_EQ(synth_gsm_hash(a[0].first), 0x04ED04A2B292531AULL);

  auto reqs = synth_gsm(50, 7, "test");
  ASSERT_EQ(reqs.size(), 50u);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(reqs[i].id, "synth-gsm/test/7/" + std::to_string(i));
    EXPECT_EQ(reqs[i].prompt, gsm8k_prompt(a[i].first, {}));
    EXPECT_EQ(reqs[i].gold, std::vector<std::string>{gsm8k_gold_from_answer(a[i].second)});
    // The reference solution scores as correct.
    EXPECT_TRUE(score("gsm8k", a[i].second, reqs[i].gold).strict);
  }
  EXPECT_THROW(synth_gsm_pairs(1, 7, "validation"), ears::Error);
}

TEST(SynthGsm, AnswersAreArithmeticallyCorrect) {
  auto pairs = synth_gsm_pairs(3000, 11, "train");
  auto reqs = synth_gsm(3000, 11, "train");
  std::map<std::string, int> steps;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& [q, a] = pairs[i];
    ASSERT_FALSE(q.empty());
    ASSERT_EQ(q.find('\n'), std::string::npos) << q;
    std::size_t n = 0;
    long long last = 0;
    for (std::size_t pos = a.find("<<"); pos != std::string::npos; pos = a.find("<<", pos + 2)) {
      std::size_t eq = a.find('=', pos), close = a.find(">>", pos);
      ASSERT_TRUE(eq != std::string::npos && close != std::string::npos && eq < close) << a;
      std::string expr = a.substr(pos + 2, eq - pos - 2);
      long long claimed = std::stoll(a.substr(eq + 1, close - eq - 1));
      auto value = Calc::eval(expr);
      ASSERT_TRUE(value.has_value()) << "bad or inexact expression '" << expr << "' in\n" << a;
      EXPECT_EQ(*value, claimed) << expr << " in\n" << a;
      EXPECT_GT(claimed, 0) << a;
      // The text after ">>" repeats the value.
      EXPECT_EQ(a.substr(close + 2, std::to_string(claimed).size()), std::to_string(claimed));
      // The expression is also shown before " = ".
      last = claimed;
      ++n;
    }
    ASSERT_GE(n, 1u) << a;
    ASSERT_LE(n, 4u) << a;
    EXPECT_EQ(gsm8k_gold_from_answer(a), std::to_string(last)) << a;
    EXPECT_EQ(a.substr(a.rfind('\n') + 1, 5), "#### ");
    EXPECT_EQ(reqs[i].category, "steps=" + std::to_string(n));
    ++steps[reqs[i].category];
  }
  for (int k = 1; k <= 4; ++k) EXPECT_GT(steps["steps=" + std::to_string(k)], 100) << k;
  EXPECT_EQ(steps.size(), 4u);
  // 2- and 3-digit numbers appear in the questions.
  int three_digit = 0;
  for (const auto& [q, a] : pairs) {
    for (std::size_t i = 0; i + 3 <= q.size(); ++i)
      if (std::isdigit(static_cast<unsigned char>(q[i])) &&
          std::isdigit(static_cast<unsigned char>(q[i + 1])) &&
          std::isdigit(static_cast<unsigned char>(q[i + 2]))) {
        ++three_digit;
        break;
      }
  }
  EXPECT_GT(three_digit, 300);
}

TEST(SynthGsm, TrainAndTestAreDisjoint) {
  auto train = synth_gsm_pairs(20000, 3, "train");
  auto test = synth_gsm_pairs(2000, 3, "test");
  auto other_seed_test = synth_gsm_pairs(2000, 4, "test");
  std::set<std::string> train_q;
  for (const auto& p : train) {
    EXPECT_EQ(synth_gsm_split_of(p.first), "train");
    train_q.insert(p.first);
  }
  EXPECT_EQ(train_q.size(), 20000u);  // no duplicates within a split
  std::set<std::string> test_q;
  for (const auto& v : {test, other_seed_test})
    for (const auto& p : v) {
      EXPECT_EQ(synth_gsm_split_of(p.first), "test");
      EXPECT_EQ(train_q.count(p.first), 0u) << p.first;
      test_q.insert(p.first);
    }
  EXPECT_GT(test_q.size(), 3900u);
}

TEST(SynthGsm, ThroughLoadDataset) {
  DatasetSpec spec;
  spec.name = "synth-gsm";
  spec.synth_n = 40;
  spec.seed = 5;
  spec.offset = 10;
  spec.limit = 10;
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 10u);
  EXPECT_EQ(ds.scorer, "gsm8k");
  EXPECT_EQ(ds.requests[0].id, "synth-gsm/test/5/10");
  EXPECT_TRUE(ds.resolved_path.empty());

  spec.n_shot = 3;
  Dataset few = load_dataset(spec);
  ASSERT_EQ(few.requests.size(), 10u);
  auto test_pairs = synth_gsm_pairs(40, 5, "test");
  for (std::size_t i = 0; i < few.requests.size(); ++i) {
    const std::string& p = few.requests[i].prompt;
    EXPECT_EQ(p.rfind("Question: ", 0), 0u);
    EXPECT_EQ(p.substr(p.size() - 8), "\nAnswer:");
    EXPECT_NE(p.find("Question: " + test_pairs[10 + i].first + "\nAnswer:"), std::string::npos);
    EXPECT_EQ(few.requests[i].gold, ds.requests[i].gold);
  }
  EXPECT_EQ(load_dataset(spec).requests[3].prompt, few.requests[3].prompt);
}

// ---------------------------------------------------------------- open-stems

TEST(OpenStems, ManyDistinctSingleLineStems) {
  const auto& stems = open_stems();
  EXPECT_GE(stems.size(), 120u);
  std::set<std::string> distinct(stems.begin(), stems.end());
  EXPECT_EQ(distinct.size(), stems.size());
  for (const auto& s : stems) {
    EXPECT_GE(s.size(), 10u) << s;
    EXPECT_EQ(s.find('\n'), std::string::npos);
    EXPECT_NE(s.back(), ' ');
  }
  DatasetSpec spec;
  spec.name = "open-stems";
  spec.limit = 7;
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 7u);
  EXPECT_EQ(ds.scorer, "none");
  EXPECT_EQ(ds.requests[2].id, "open-stems/2");
  EXPECT_EQ(ds.requests[2].prompt, stems[2]);
  EXPECT_EQ(ds.requests[2].category, "stem");
  EXPECT_TRUE(ds.requests[2].gold.empty());
}
