// Tests for datasets/ on the real shared files (../shared/datasets): GSM8K, NQ-open, Spec-Bench,
// limit/offset, few-shot.
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

fs::path shared_datasets() { return ears::test::shared_dir() / "datasets"; }

}  // namespace

using namespace ears::test::data_test;

// ---------------------------------------------------------------- real shared files

TEST(SharedData, Gsm8kTest) {
  EARS_REQUIRE_SHARED("datasets/gsm8k/test.jsonl");
  DatasetSpec spec;
  spec.name = "gsm8k";
  spec.path = (shared_datasets() / "gsm8k" / "test.jsonl").string();
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 1319u);
  EXPECT_EQ(ds.scorer, "gsm8k");
  EXPECT_EQ(ds.skipped_lines, 0u);
  EXPECT_EQ(ds.resolved_path, spec.path);
  const Request& r0 = ds.requests[0];
  EXPECT_EQ(r0.id, "gsm8k/test/0");
  EXPECT_EQ(r0.source_line, 1u);
  EXPECT_EQ(r0.gold, std::vector<std::string>{"18"});
  EXPECT_EQ(r0.prompt.rfind("Janet\u2019s ducks lay 16 eggs per day.", 0), 0u);
  EXPECT_EQ(r0.prompt.substr(r0.prompt.size() - kGsm8kInstruction.size()), kGsm8kInstruction);
  EXPECT_EQ(ds.requests.back().id, "gsm8k/test/1318");
  EXPECT_EQ(ds.requests.back().source_line, 1319u);
  int with_commas = 0, negative = 0;
  for (const auto& r : ds.requests) {
    ASSERT_EQ(r.gold.size(), 1u);
    with_commas += r.gold[0].find(',') != std::string::npos;
    negative += r.gold[0][0] == '-';
  }
  EXPECT_EQ(with_commas, 14);  // as documented in shared/datasets/README.md
  EXPECT_EQ(negative, 2);
}

TEST(SharedData, Gsm8kReferenceAnswersScorePerfectly) {
  EARS_REQUIRE_SHARED("datasets/gsm8k/test.jsonl");
  fs::path file = shared_datasets() / "gsm8k" / "test.jsonl";
  DatasetSpec spec;
  spec.name = "gsm8k";
  spec.path = file.string();
  Dataset ds = load_dataset(spec);
  std::ifstream in(file);
  std::string line;
  std::size_t i = 0, strict = 0, flexible = 0, wrong_strict = 0;
  std::vector<std::string> answers;
  while (std::getline(in, line)) answers.push_back(nlohmann::json::parse(line)["answer"]);
  ASSERT_EQ(answers.size(), ds.requests.size());
  for (i = 0; i < answers.size(); ++i) {
    auto s = score(ds.scorer, answers[i], ds.requests[i].gold);
    strict += s.strict;
    flexible += s.flexible;
    // Someone else's solution is (almost always) wrong for this question.
    auto w = score(ds.scorer, answers[(i + 1) % answers.size()], ds.requests[i].gold);
    wrong_strict += w.strict;
  }
  EXPECT_EQ(strict, answers.size());
  EXPECT_EQ(flexible, answers.size());
  EXPECT_LT(wrong_strict, answers.size() / 20);
}

TEST(SharedData, NqOpen) {
  EARS_REQUIRE_SHARED("datasets/nq_open/NQ-open.dev.jsonl");
  DatasetSpec spec;
  spec.name = "nq_open";
  spec.path = (shared_datasets() / "nq_open").string();  // a directory works too
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 3610u);
  EXPECT_EQ(ds.scorer, "squad");
  EXPECT_EQ(ds.requests[0].prompt,
            "Answer these questions:\n\nQ: when was the last time anyone was on the moon?\nA:");
  EXPECT_EQ(ds.requests[0].gold,
            (std::vector<std::string>{"14 December 1972 UTC", "December 1972"}));
  EXPECT_EQ(ds.requests[0].id, "nq_open/dev/0");
  std::map<std::size_t, int> by_count;
  for (const auto& r : ds.requests) ++by_count[r.gold.size()];
  EXPECT_EQ(by_count[1], 2076);
  EXPECT_EQ(by_count[2], 953);
  EXPECT_EQ(by_count[3], 306);
  EXPECT_EQ(by_count[4], 118);
}

// The NQ-open prompt is lm-eval nq_open.yaml v4.0's zero-shot context, byte for byte:
// description "Answer these questions:\n\n" + doc_to_text "Q: {{question}}?\nA:".
TEST(NqOpen, PromptIsLmEvalsDescriptionPlusTemplate) {
  EXPECT_EQ(nq_open_prompt("who wrote hamlet"), "Answer these questions:\n\nQ: who wrote hamlet?\nA:");
  const std::string want =
      "\x41\x6e\x73\x77\x65\x72\x20\x74\x68\x65\x73\x65\x20\x71\x75\x65\x73\x74\x69\x6f\x6e\x73\x3a\x0a\x0a"
      "\x51\x3a\x20" "who wrote hamlet" "\x3f\x0a\x41\x3a";
  EXPECT_EQ(nq_open_prompt("who wrote hamlet"), want);
  TempDir tmp;
  tmp.write("nq_open/NQ-open.dev.jsonl",
            "{\"question\": \"where is the eiffel tower\", \"answer\": [\"Paris\", \"in Paris\"]}\n");
  DatasetSpec spec;
  spec.name = "nq_open";
  spec.path = tmp.path.string();
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 1u);
  EXPECT_EQ(ds.requests[0].prompt, "Answer these questions:\n\nQ: where is the eiffel tower?\nA:");
  EXPECT_EQ(ds.scorer, "squad");
  spec.scorer = "lm_eval_nq_open";
  EXPECT_EQ(load_dataset(spec).scorer, "lm_eval_nq_open");
  spec.scorer = "lm_eval";
  EXPECT_NE(error_of(spec).find("unknown scorer 'lm_eval'; use one of: gsm8k, squad, lm_eval_nq_open, qa, none"),
            std::string::npos);
}

TEST(SharedData, SpecBenchCategories) {
  EARS_REQUIRE_SHARED("datasets/spec_bench/question.jsonl");
  ScopedEnv env("EARS_BENCH_DATA", shared_datasets().string());  // default resolution
  DatasetSpec spec;
  spec.name = "spec_bench";
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 480u);
  EXPECT_EQ(ds.scorer, "none");
  EXPECT_EQ(ds.resolved_path, (shared_datasets() / "spec_bench" / "question.jsonl").string());
  std::map<std::string, int> cats;
  for (const auto& r : ds.requests) {
    ++cats[r.category];
    EXPECT_TRUE(r.gold.empty());
    EXPECT_FALSE(r.prompt.empty());
  }
  EXPECT_EQ(cats.size(), 13u);
  EXPECT_EQ(cats["writing"], 10);
  EXPECT_EQ(cats["translation"], 80);
  EXPECT_EQ(cats["math_reasoning"], 80);
  EXPECT_EQ(ds.requests[0].id, "spec_bench/81");
  EXPECT_EQ(ds.requests.back().id, "spec_bench/560");
  for (const auto& r : ds.requests)
    if (r.category == "translation") {
      EXPECT_EQ(r.prompt.rfind("Translate German to English: ", 0), 0u);
    }

  spec.categories = {"qa", "rag"};
  spec.offset = 70;
  spec.limit = 20;
  Dataset some = load_dataset(spec);
  ASSERT_EQ(some.requests.size(), 20u);
  EXPECT_EQ(some.requests[0].category, "qa");
  EXPECT_EQ(some.requests[0].id, "spec_bench/391");
  EXPECT_EQ(some.requests[10].category, "rag");
  spec.categories = {"poetry"};
  EXPECT_NE(error_of(spec).find("no requests in category 'poetry'"), std::string::npos);
}

TEST(SharedData, LimitAndOffset) {
  EARS_REQUIRE_SHARED("datasets/gsm8k/test.jsonl");
  DatasetSpec spec;
  spec.name = "gsm8k";
  spec.path = shared_datasets().string();  // data root: <dir>/gsm8k/test.jsonl
  spec.offset = 10;
  spec.limit = 5;
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 5u);
  EXPECT_EQ(ds.requests[0].id, "gsm8k/test/10");
  EXPECT_EQ(ds.requests[0].source_line, 11u);
  EXPECT_EQ(ds.requests[4].id, "gsm8k/test/14");
  spec.offset = 1317;
  spec.limit = 100;
  EXPECT_EQ(load_dataset(spec).requests.size(), 2u);
  spec.offset = 1319;
  EXPECT_NE(error_of(spec).find("offset 1319 is past the end (1319 requests)"),
            std::string::npos);
}

TEST(SharedData, Gsm8kFewShotUsesTrainDeterministically) {
  EARS_REQUIRE_SHARED("datasets/gsm8k/train.jsonl");
  DatasetSpec spec;
  spec.name = "gsm8k";
  spec.path = (shared_datasets() / "gsm8k" / "test.jsonl").string();
  spec.n_shot = 5;
  spec.limit = 30;
  Dataset a = load_dataset(spec);
  Dataset b = load_dataset(spec);
  ASSERT_EQ(a.requests.size(), 30u);

  std::set<std::string> train_questions;
  {
    std::ifstream in(shared_datasets() / "gsm8k" / "train.jsonl");
    std::string line;
    while (std::getline(in, line))
      train_questions.insert(nlohmann::json::parse(line)["question"].get<std::string>());
  }
  std::set<std::string> first_exemplars;
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    const std::string& p = a.requests[i].prompt;
    EXPECT_EQ(p, b.requests[i].prompt);
    // 5 exemplars + the question itself.
    std::size_t count = 0;
    for (std::size_t pos = p.find("Question: "); pos != std::string::npos;
         pos = p.find("Question: ", pos + 1))
      ++count;
    EXPECT_EQ(count, 6u);
    EXPECT_EQ(p.substr(p.size() - 8), "\nAnswer:");
    // Every exemplar question is a train question, each followed by its full solution.
    std::size_t pos = 0;
    for (int k = 0; k < 5; ++k) {
      std::size_t q = p.find("Question: ", pos) + 10;
      std::size_t e = p.find("\nAnswer: ", q);
      std::string question = p.substr(q, e - q);
      EXPECT_TRUE(train_questions.count(question)) << question;
      std::size_t end = p.find("\n\n", e);
      EXPECT_NE(p.substr(e, end - e).find("#### "), std::string::npos);
      if (k == 0) first_exemplars.insert(question);
      pos = end;
    }
  }
  EXPECT_GT(first_exemplars.size(), 20u);  // a seeded choice per request, not a fixed block

  // A request's prompt does not depend on offset/limit; it does depend on the seed.
  DatasetSpec shifted = spec;
  shifted.offset = 7;
  shifted.limit = 3;
  Dataset c = load_dataset(shifted);
  EXPECT_EQ(c.requests[0].id, "gsm8k/test/7");
  EXPECT_EQ(c.requests[0].prompt, a.requests[7].prompt);
  DatasetSpec reseeded = spec;
  reseeded.seed = 99;
  Dataset d = load_dataset(reseeded);
  int differ = 0;
  for (std::size_t i = 0; i < d.requests.size(); ++i)
    differ += d.requests[i].prompt != a.requests[i].prompt;
  EXPECT_GT(differ, 25);
}
