// The speculative decoding engine (decoders/engine.h) on the golden fixtures
// (shared/fixtures/README.md): T = 0 equivalence with plain greedy decoding for every verifier /
// gamma / draft kind / draft sampling mode / batch layout, self-drafting, statistics bookkeeping,
// host syncs, batch independence, stop conditions and EARS pardons.
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <cstdio>

#include "decoders/draft.h"
#include "decoders/eagle3.h"
#include "decoders/engine.h"
#include "decoders/model.h"
#include "decoders/runtime.h"
#include "harness/base/error.h"
#include "tests/kernel_paths.h"
#include "tests/tensor_test_util.h"
#include "tests/test_util.h"
#include "tests/engine_test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ears;
using ears::test::max_abs;
using ears::test::row_tensor;
using ears::test::to_tensor;
using namespace ears::test::engine_test;

// ---------------------------------------------------------------------------------------------
// 2 + 3 + 5. T = 0: speculative output == plain greedy decoding of the target, for every verifier,
// gamma 1..7, batch 1 and a ragged batch of 4, eagle3 / model(self) / model(bf16) drafts, both
// draft sampling modes. The random-weight eagle3 head is usually wrong, so rejections (and the
// rollbacks after them) are exercised: corrections > 0.

TEST(GreedyEquivalence, PlainGreedyMatchesFixture) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  for (const auto& c : expected("qwen3-tiny")["cases"]) {
    const auto want = ids32(c["greedy"]["tokens"]);
    const auto& got = greedy_reference(ids32(c["prompt_ids"]), 24);
    ASSERT_GE(got.size(), want.size());
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + static_cast<long>(want.size())), want)
        << c["name"].get<std::string>();
  }
  // The target-only loop in a ragged batch equals the solo runs.
  Engine plain(target(), nullptr, nullptr);
  const std::vector<size_t> which{2, 0, 5, 1};
  auto res = plain.generate(requests(which), params(VerifierSpec::Baseline, 1, 0.0, 24, false));
  for (size_t i = 0; i < which.size(); ++i) {
    check_stats(res[i], 0, 24, "plain batch");
    EXPECT_EQ(res[i].ids, greedy_reference(prompts()[which[i]], 24));
    EXPECT_EQ(res[i].stats.steps, 23);  // one token from the prefill, then one per step
  }
}

TEST(GreedyEquivalence, SpeculativeEqualsGreedyEverywhere) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny-bf16");
  const int64_t max_new = 16;  // 16 rather than 24 keeps this matrix (~650 generate calls) fast
  const auto all = prompts();
  const std::vector<size_t> batch4{2, 0, 3, 1};  // lengths 33, 1, 12, 7
  struct DraftKind {
    std::string name;
    std::unique_ptr<Drafter> drafter;
    int64_t corrections = 0, drafted = 0, accepted = 0;
  };
  std::vector<DraftKind> drafts;
  drafts.push_back({"eagle3", make_eagle3_drafter(head())});
  drafts.push_back({"model:self", make_model_drafter(target(), 320)});
  drafts.push_back({"model:bf16", make_model_drafter(bf16_draft(), 320)});
  const std::vector<VerifierSpec::Kind> verifiers{VerifierSpec::Baseline, VerifierSpec::Ears, VerifierSpec::Typical,
                                                  VerifierSpec::Greedy};
  for (auto& dk : drafts) {
    Engine engine(target(), dk.drafter.get(), nullptr);
    for (auto kind : verifiers)
      for (int gamma = 1; gamma <= 7; ++gamma)
        for (bool dg : {true, false}) {
          const std::string ctx = fmt::format("{} {} gamma={} draft_greedy={}", dk.name, to_string(kind), gamma, dg);
          SCOPED_TRACE(ctx);
          const DecodeParams p = params(kind, gamma, 0.0, max_new, dg, 0.1);
          // Batch 1 (the prompt rotates with gamma; one draft mode per gamma, alternating, to keep
          // the binary fast), then the ragged batch of 4 (every combination).
          std::vector<GenResult> r1;
          if (dg == (gamma % 2 == 1)) {
            const size_t solo = static_cast<size_t>(gamma) % all.size();
            r1 = engine.generate(requests({solo}), p);
            ASSERT_EQ(r1.size(), 1u);
            check_stats(r1[0], gamma, max_new, ctx + " solo");
            EXPECT_EQ(r1[0].ids, greedy_reference(all[solo], max_new));
          }
          auto r4 = engine.generate(requests(batch4), p);
          ASSERT_EQ(r4.size(), 4u);
          for (size_t i = 0; i < 4; ++i) {
            check_stats(r4[i], gamma, max_new, ctx + " batch row " + std::to_string(i));
            EXPECT_EQ(r4[i].ids, greedy_reference(all[batch4[i]], max_new)) << "row " << i;
          }
          std::vector<const GenResult*> rs{&r4[0], &r4[1], &r4[2], &r4[3]};
          if (!r1.empty()) rs.push_back(&r1[0]);
          for (const auto* r : rs) {
            dk.corrections += r->stats.corrections;
            dk.drafted += r->stats.drafted;
            dk.accepted += r->stats.accepted;
            EXPECT_EQ(r->stats.pardoned, 0);  // u = 0 at T = 0: nothing to pardon
          }
        }
  }
  for (const auto& dk : drafts) {
    std::printf("[ info ] T=0 %-10s drafted %6lld accepted %6lld (%.3f) corrections %lld\n", dk.name.c_str(),
                static_cast<long long>(dk.drafted), static_cast<long long>(dk.accepted),
                static_cast<double>(dk.accepted) / static_cast<double>(dk.drafted),
                static_cast<long long>(dk.corrections));
  }
  // Rollback was exercised: the random-weight head and the bf16 draft get rejected.
  EXPECT_GT(drafts[0].corrections, 100);
  EXPECT_GT(drafts[2].corrections, 0);
  // The self draft is the target: at T = 0 every draft token is accepted.
  EXPECT_EQ(drafts[1].corrections, 0);
  EXPECT_EQ(drafts[1].accepted, drafts[1].drafted);
}

// ---------------------------------------------------------------------------------------------
// 4. Self-draft: the target drafting for itself has every token accepted, at T = 0 and T = 0.9.

TEST(SelfDraft, EveryDraftTokenAccepted) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  auto d = make_model_drafter(target(), 320);
  Engine engine(target(), d.get(), nullptr);
  const std::vector<size_t> which{0, 1, 2, 3, 4, 5};
  for (double temp : {0.0, 0.9})
    for (int gamma : {1, 3, 5}) {
      const int64_t max_new = 40;
      const std::string ctx = fmt::format("T={} gamma={}", temp, gamma);
      SCOPED_TRACE(ctx);
      auto res = engine.generate(requests(which, 11), params(VerifierSpec::Baseline, gamma, temp, max_new, false));
      for (const auto& r : res) {
        check_stats(r, gamma, max_new, ctx);
        EXPECT_EQ(r.stats.accepted, r.stats.drafted);
        EXPECT_EQ(r.stats.corrections, 0);
        EXPECT_EQ(r.stats.bonus, r.stats.steps);
        EXPECT_EQ(r.stats.accept_length_hist[gamma + 1], r.stats.steps);  // tau = gamma + 1
        // Every step but the last emits gamma + 1 tokens of which all are kept.
        EXPECT_EQ(r.stats.steps, (max_new - 1 + gamma) / (gamma + 1));
        if (temp == 0) {
          EXPECT_EQ(r.ids, greedy_reference(prompts()[static_cast<size_t>(&r - &res[0])], max_new));
        }
      }
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Host syncs: one for the prefill, one per speculative step.

TEST(HostSyncs, OnePerStepPlusPrefill) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  auto eagle = make_eagle3_drafter(head());
  auto model = make_model_drafter(bf16_draft(), 320);
  for (Drafter* d : {static_cast<Drafter*>(nullptr), eagle.get(), model.get()}) {
    SCOPED_TRACE(d ? d->kind() : "none");
    Engine engine(target(), d, nullptr);
    for (auto kind : {VerifierSpec::Baseline, VerifierSpec::Ears}) {
      const int64_t before = host_sync_count();
      auto res = engine.generate(requests({3}), params(kind, 4, 0.9, 30, false));
      const int64_t delta = host_sync_count() - before;
      const int64_t gamma = d ? 4 : 0;
      check_stats(res[0], gamma, 30, "host syncs");
      EXPECT_LE(delta, res[0].stats.steps + 1);
      EXPECT_EQ(delta, res[0].stats.steps + 1);
      EXPECT_EQ(res[0].stats.host_syncs, delta);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 7. Batch independence: at T = 0.9 each request's output in a batch equals its output alone.

TEST(BatchIndependence, SameOutputAloneAndBatched) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  auto eagle = make_eagle3_drafter(head());
  const std::vector<size_t> which{2, 0, 3, 1};
  struct Arm {
    Drafter* d;
    VerifierSpec::Kind kind;
  };
  for (const Arm& arm : {Arm{nullptr, VerifierSpec::Baseline}, Arm{eagle.get(), VerifierSpec::Baseline},
                         Arm{eagle.get(), VerifierSpec::Ears}}) {
    const std::string ctx = fmt::format("{} {}", arm.d ? arm.d->kind() : "none", to_string(arm.kind));
    SCOPED_TRACE(ctx);
    Engine engine(target(), arm.d, nullptr);
    const int gamma = 4;
    const DecodeParams p = params(arm.kind, gamma, 0.9, 24, false, 0.5);
    auto batched = engine.generate(requests(which, 1234), p);
    std::set<std::vector<int32_t>> distinct;
    for (size_t i = 0; i < which.size(); ++i) {
      auto alone = engine.generate(requests({which[i]}, 1234), p);
      check_stats(batched[i], arm.d ? gamma : 0, 24, ctx);
      EXPECT_EQ(batched[i].ids, alone[0].ids) << "row " << i;
      EXPECT_EQ(batched[i].stats.accepted, alone[0].stats.accepted) << "row " << i;
      EXPECT_EQ(batched[i].stats.steps, alone[0].stats.steps) << "row " << i;
      distinct.insert(alone[0].ids);
    }
    EXPECT_EQ(distinct.size(), which.size());
    // Another run seed gives another sample (the seed is used at all).
    auto other = engine.generate(requests(which, 99), p);
    int same = 0;
    for (size_t i = 0; i < which.size(); ++i) same += other[i].ids == batched[i].ids;
    EXPECT_LT(same, 2);
  }
}

// ---------------------------------------------------------------------------------------------
// 8. Stop conditions.

TEST(StopConditions, StopIdEndsWithEos) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  auto eagle = make_eagle3_drafter(head());
  auto self = make_model_drafter(target(), 320);
  const auto all = prompts();
  for (Drafter* d : {static_cast<Drafter*>(nullptr), eagle.get(), self.get()}) {
    SCOPED_TRACE(d ? d->kind() : "none");
    Engine engine(target(), d, nullptr);
    for (size_t pi : {1, 2}) {
      const auto& ref = greedy_reference(all[pi], 24);
      const int32_t stop = ref[6];
      const auto first = std::find(ref.begin(), ref.end(), stop);
      const std::vector<int32_t> want(ref.begin(), first + 1);
      DecodeParams p = params(VerifierSpec::Baseline, 5, 0.0, 24, true);
      p.stop_ids = {stop};
      auto res = engine.generate(requests({pi, 0}), p);  // with a companion that keeps going
      EXPECT_EQ(res[0].ids, want);
      EXPECT_EQ(res[0].finish_reason, "eos");
      EXPECT_EQ(res[0].ids.back(), stop);
      check_stats(res[0], d ? 5 : 0, 24, "stop id");
      // The companion request is unaffected by its neighbour finishing early (unless it stops too).
      const auto& ref0 = greedy_reference(all[0], 24);
      const auto f0 = std::find(ref0.begin(), ref0.end(), stop);
      EXPECT_EQ(res[1].ids, std::vector<int32_t>(ref0.begin(), f0 == ref0.end() ? f0 : f0 + 1));
      EXPECT_EQ(res[1].finish_reason, f0 == ref0.end() ? "length" : "eos");
    }
  }
}

// Regression (issue: multi-arm runs with a `model` draft crashed in the second arm): one drafter
// serves generate() after generate(); when a request of the second batch stops at its first
// token, the engine drops it before any proposal, and the drafter must not carry the previous
// batch's drafts into that select().
TEST(StopConditions, DrafterReusedAcrossGenerateCallsWithAFirstTokenStop) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  auto eagle = make_eagle3_drafter(head());
  auto self = make_model_drafter(target(), 320);
  const auto all = prompts();
  for (Drafter* d : {eagle.get(), self.get()}) {
    SCOPED_TRACE(d->kind());
    Engine engine(target(), d, nullptr);
    const auto first = engine.generate(requests({0, 1, 2}), params(VerifierSpec::Baseline, 5, 0.0, 12, true));
    ASSERT_EQ(first.size(), 3u);
    const int32_t stop = greedy_reference(all[1], 24)[0];  // request 1 stops at its first token
    DecodeParams p = params(VerifierSpec::Baseline, 5, 0.0, 12, true);
    p.stop_ids = {stop};
    const auto res = engine.generate(requests({1, 0}), p);
    ASSERT_EQ(res.size(), 2u);
    EXPECT_EQ(res[0].ids, std::vector<int32_t>{stop});
    EXPECT_EQ(res[0].finish_reason, "eos");
    const auto& ref0 = greedy_reference(all[0], 24);
    const auto f0 = std::find(ref0.begin(), ref0.begin() + 12, stop);
    EXPECT_EQ(res[1].ids, std::vector<int32_t>(ref0.begin(), f0 == ref0.begin() + 12 ? f0 : f0 + 1));
  }
}

TEST(StopConditions, MaxNewTokensExactEvenMidStep) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  auto self = make_model_drafter(target(), 320);  // emits gamma + 1 tokens per step
  auto eagle = make_eagle3_drafter(head());
  const auto all = prompts();
  for (Drafter* d : {self.get(), eagle.get()}) {
    Engine engine(target(), d, nullptr);
    for (int64_t max_new : {1, 2, 3, 5, 8, 13}) {
      const std::string ctx = fmt::format("{} max_new={}", d->kind(), max_new);
      SCOPED_TRACE(ctx);
      auto res = engine.generate(requests({1, 3, 0}), params(VerifierSpec::Baseline, 5, 0.0, max_new, true));
      for (size_t i = 0; i < res.size(); ++i) {
        EXPECT_EQ(static_cast<int64_t>(res[i].ids.size()), max_new);
        EXPECT_EQ(res[i].finish_reason, "length");
        check_stats(res[i], 5, max_new, ctx);
        const auto& ref = greedy_reference(all[std::vector<size_t>{1, 3, 0}[i]], 24);
        EXPECT_EQ(res[i].ids, std::vector<int32_t>(ref.begin(), ref.begin() + max_new));
      }
    }
  }
  // Invalid settings are clear errors.
  Engine engine(target(), self.get(), nullptr);
  EXPECT_THROW(engine.generate(requests({1}), params(VerifierSpec::Baseline, 5, 0.0, 0, true)), Error);
  EXPECT_THROW(engine.generate(requests({1}), params(VerifierSpec::Baseline, 0, 0.0, 4, true)), Error);
  EXPECT_TRUE(engine.generate({}, params(VerifierSpec::Baseline, 5, 0.0, 4, true)).empty());
}

// A request beyond the context fails alone: its error is recorded, its neighbours decode as if
// it were not there.
TEST(StopConditions, OverContextRequestFailsAloneInItsBatch) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  auto eagle = make_eagle3_drafter(head());
  Engine engine(target(), eagle.get(), nullptr);
  const int64_t context = target().config().max_position_embeddings;
  ASSERT_GT(context, 0);
  std::vector<GenRequest> batch = requests({0, 1, 2}, 5);
  batch[1].prompt.assign(static_cast<size_t>(context), 7);  // context tokens + any new one > context
  const DecodeParams p = params(VerifierSpec::Baseline, 5, 0.9, 12, false);
  auto res = engine.generate(batch, p);
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[1].finish_reason, "error");
  EXPECT_NE(res[1].error.find("context"), std::string::npos) << res[1].error;
  EXPECT_TRUE(res[1].ids.empty());
  EXPECT_EQ(res[1].prompt_tokens, context);
  EXPECT_EQ(res[1].stats.accept_length_hist.size(), 7u);
  auto alone = engine.generate({batch[0], batch[2]}, p);
  EXPECT_EQ(res[0].ids, alone[0].ids);
  EXPECT_EQ(res[2].ids, alone[1].ids);
  EXPECT_TRUE(res[0].error.empty());
  // Every request too long: all recorded, nothing decoded.
  auto none = engine.generate({batch[1], batch[1]}, p);
  EXPECT_EQ(none[0].finish_reason, "error");
  EXPECT_EQ(none[1].finish_reason, "error");
}

// ---------------------------------------------------------------------------------------------
// 9. EARS pardons at T = 0.9 with a large beta; baseline has no distortion (up to rounding).

TEST(EarsPardons, LargeBetaPardonsAndDistorts) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  auto eagle = make_eagle3_drafter(head());
  Engine engine(target(), eagle.get(), nullptr);
  const std::vector<size_t> which{0, 1, 2, 3};
  const int gamma = 4;
  auto total = [](const std::vector<GenResult>& rs, auto field) {
    double s = 0;
    for (const auto& r : rs) s += static_cast<double>(r.stats.*field);
    return s;
  };
  auto base = engine.generate(requests(which, 5), params(VerifierSpec::Baseline, gamma, 0.9, 24, false));
  auto ears = engine.generate(requests(which, 5), params(VerifierSpec::Ears, gamma, 0.9, 24, false, 1.0));
  for (size_t i = 0; i < which.size(); ++i) {
    check_stats(base[i], gamma, 24, "baseline");
    check_stats(ears[i], gamma, 24, "ears");
    EXPECT_LT(base[i].stats.distortion_sum, 1e-4 * static_cast<double>(base[i].stats.distortion_n));  // 0 up to rounding
    EXPECT_EQ(base[i].stats.pardoned, 0);
    EXPECT_GT(base[i].stats.distortion_n, 0);
    EXPECT_GE(ears[i].stats.distortion_sum, 0.0);
    EXPECT_LE(ears[i].stats.distortion_sum, static_cast<double>(ears[i].stats.distortion_n));
  }
  std::printf("[ info ] T=0.9 gamma=4: baseline accepted %.0f / %.0f; ears(beta=1) accepted %.0f / %.0f, pardoned %.0f, "
              "distortion_sum %.3f over %.0f\n",
              total(base, &GenStats::accepted), total(base, &GenStats::drafted), total(ears, &GenStats::accepted),
              total(ears, &GenStats::drafted), total(ears, &GenStats::pardoned), total(ears, &GenStats::distortion_sum),
              total(ears, &GenStats::distortion_n));
  EXPECT_GT(total(ears, &GenStats::pardoned), 0);
  EXPECT_GT(total(ears, &GenStats::distortion_sum), 0);
  EXPECT_GT(total(ears, &GenStats::accepted) / total(ears, &GenStats::drafted),
            total(base, &GenStats::accepted) / total(base, &GenStats::drafted));
  // beta = 0 is baseline exactly (same uniforms, same decisions).
  auto ears0 = engine.generate(requests(which, 5), params(VerifierSpec::Ears, gamma, 0.9, 24, false, 0.0));
  for (size_t i = 0; i < which.size(); ++i) {
    EXPECT_EQ(ears0[i].ids, base[i].ids);
    EXPECT_EQ(ears0[i].stats.pardoned, 0);
  }
}
