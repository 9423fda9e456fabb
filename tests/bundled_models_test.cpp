// The models shipped in models/ (the embedded default): their files match models/SHA256SUMS,
// they fit the size budget, they load, the target reproduces the greedy continuation recorded
// when they were trained (tests/data/bundled-greedy.json), and EAGLE-3 speculative decoding at
// T = 0 reproduces the target's own greedy output token for token on synth-gsm test problems
// (float32 compute; configs/quickstart-greedy.yaml measures the same in bf16, at speed).
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/tensor.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <tuple>

#include "datasets/synth_gsm.h"
#include "decoders/aten_operators.h"
#include "decoders/draft.h"
#include "decoders/eagle3.h"
#include "decoders/engine.h"
#include "decoders/model.h"
#include "decoders/runtime.h"
#include "decoders/tokenizer.h"
#include "tests/kernel_paths.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ears;

namespace {

const fs::path kModels = test::source_dir() / "models";

// float32 compute (the bf16 weights upcast exactly): greedy decisions then do not depend on
// the CPU's bf16 GEMM kernels, and a 6-token verification rounds like a 1-token decode.
const CausalLM& target() {
  static CausalLM m = CausalLM::load(kModels / "tiny-qwen3", at::kCPU, at::kFloat);
  return m;
}
const Eagle3Head& head() {
  static Eagle3Head h = Eagle3Head::load(kModels / "tiny-eagle3", target());
  return h;
}
const Tokenizer& tokenizer() {
  static Tokenizer t = Tokenizer::load(kModels / "tiny-qwen3");
  return t;
}

DecodeParams greedy(int64_t max_new) {
  DecodeParams p;
  p.sampling.temperature = 0;
  p.gamma = 5;
  p.max_new_tokens = max_new;
  p.draft_greedy = true;
  p.stop_ids = tokenizer().stop_token_ids();
  return p;
}

}  // namespace

TEST(BundledModels, FilesMatchRecordedSha256AndFitTheBudget) {
  ASSERT_TRUE(fs::exists(kModels / "SHA256SUMS")) << "models/SHA256SUMS is missing";
  const std::string cmd = "cd '" + kModels.string() + "' && sha256sum --quiet -c SHA256SUMS";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "a file in models/ differs from models/SHA256SUMS";
  const std::string sums = test::read_file(kModels / "SHA256SUMS");
  for (const char* f : {"tiny-qwen3/model.safetensors", "tiny-qwen3/config.json", "tiny-qwen3/tokenizer.json",
                        "tiny-eagle3/model.safetensors", "tiny-eagle3/config.json"})
    EXPECT_NE(sums.find(f), std::string::npos) << f << " is not covered by SHA256SUMS";
  uintmax_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(kModels))
    if (e.is_regular_file()) bytes += e.file_size();
  EXPECT_LE(bytes, 24u << 20) << "models/ must stay within 24 MB";
}

TEST(BundledModels, LoadAsShipped) {
  // `dtype: auto` keeps the config's torch_dtype (bf16) where a kernel path or the CPU itself computes
  // bf16, and takes float32 where LibTorch would emulate it (the aten path on an AVX2-only CPU).
  const CausalLM shipped = CausalLM::load(kModels / "tiny-qwen3");
  EXPECT_EQ(shipped.config().torch_dtype, at::kBFloat16);
  const bool bf16_computed = kernels::path() != kernels::Path::aten || kernels::native_bf16();
  EXPECT_EQ(shipped.dtype(), bf16_computed ? at::kBFloat16 : at::kFloat);
  EXPECT_EQ(target().dtype(), at::kFloat);
  EXPECT_EQ(target().config().vocab_size, tokenizer().vocab_size());
  EXPECT_EQ(head().aux_layers().size(), 3u);
}

// The aux layer ids fc reads, by convention: hf ids are the hidden state entering layer i (EAGLE,
// vLLM), sglang ids the output of layer i, one more in hf terms — given in options and in the
// checkpoint's eagle_config alike; checked against the target's layers 0..5 (hidden_states[6] is
// the post-final-norm output, which no EAGLE-3 runtime captures).
TEST(BundledModels, EagleAuxLayersFollowTheConvention) {
  EXPECT_EQ(head().aux_layers(), (std::vector<int>{1, 3, 5}));  // the checkpoint's eagle_config, hf
  auto ids = [](std::vector<int> given, AuxLayerConvention c) {
    Eagle3Options o;
    o.aux_layers = std::move(given);
    o.convention = c;
    return Eagle3Head::load(kModels / "tiny-eagle3", target(), o).aux_layers();
  };
  EXPECT_EQ(ids({0, 2, 4}, AuxLayerConvention::Hf), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(ids({0, 2, 4}, AuxLayerConvention::Sglang), (std::vector<int>{1, 3, 5}));
  Eagle3Options sglang;
  sglang.convention = AuxLayerConvention::Sglang;
  // The checkpoint's [1, 3, 5] read as sglang's: [2, 4, 6], and 6 = hidden_states[6] (it ran silently).
  try {
    Eagle3Head::load(kModels / "tiny-eagle3", target(), sglang);
    ADD_FAILURE() << "[2, 4, 6] on a 6-layer target must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("aux layer ids [2, 4, 6] (sglang convention: [1, 3, 5] + 1) name layer 6, "
                                         "outside the target's 0..5 (num_hidden_layers 6)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ids({1, 3, 5}, AuxLayerConvention::Sglang), Error);  // 6: the post-final-norm state
  EXPECT_THROW(ids({0, 1, 6}, AuxLayerConvention::Hf), Error);
  EXPECT_EQ(ids({0, 1, 4}, AuxLayerConvention::Sglang), (std::vector<int>{1, 2, 5}));
}

TEST(BundledModels, ReproduceTheRecordedGreedyContinuation) {
  const json rec = json::parse(test::read_file(test::source_dir() / "tests/data/bundled-greedy.json"));
  const auto prompt_ids = tokenizer().encode(qwen3_chat_prompt(rec["question"].get<std::string>(), false));
  EXPECT_EQ(static_cast<int64_t>(prompt_ids.size()), rec["prompt_tokens"].get<int64_t>());
  Engine engine(target(), nullptr, &tokenizer());
  const auto out = engine.generate({GenRequest{prompt_ids, 0, "recorded"}}, greedy(rec["max_new_tokens"].get<int64_t>()));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ids, rec["output_ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(out[0].text, rec["output_text"].get<std::string>());
}

// T = 0 speculative == target-only greedy, token for token, on every CPU kernel path this machine
// has (tests/kernel_paths.h) and in both compute dtypes: float32 (the bf16 weights upcast exactly)
// and bf16 (the shipped dtype, the quickstart's), at batch 4.
class SpeculativeGreedy : public ::testing::TestWithParam<std::tuple<kernels::Path, c10::ScalarType>> {};

INSTANTIATE_TEST_SUITE_P(PathsAndDtypes, SpeculativeGreedy,
                         ::testing::Combine(EARS_KERNEL_PATHS, ::testing::Values(at::kFloat, at::kBFloat16)),
                         [](const auto& info) {
                           return std::string(kernels::path_name(std::get<0>(info.param))) + "_" +
                                  dtype_name(std::get<1>(info.param));
                         });

TEST_P(SpeculativeGreedy, IsTokenIdenticalOnSynthGsm) {
  const auto [path, dtype] = GetParam();
  EARS_SKIP_UNSUPPORTED_PATH(path);
  if (path == kernels::Path::aten && dtype == at::kBFloat16 && !kernels::native_bf16())
    GTEST_SKIP() << "LibTorch emulates bf16 on this CPU (minutes per run) and its GEMM is not row-invariant";
  test::KernelPathGuard guard(path);
  const CausalLM m = CausalLM::load(kModels / "tiny-qwen3", at::kCPU, dtype);
  const Eagle3Head h = Eagle3Head::load(kModels / "tiny-eagle3", m);
  const auto problems = synth_gsm(40, 0, "test");
  auto drafter = make_eagle3_drafter(h);
  Engine plain(m, nullptr, &tokenizer());
  Engine spec(m, drafter.get(), &tokenizer());
  int64_t emitted = 0, steps = 0;
  for (size_t i = 0; i < problems.size(); i += 4) {
    std::vector<GenRequest> batch;
    for (size_t k = i; k < std::min(problems.size(), i + 4); ++k)
      batch.push_back({tokenizer().encode(qwen3_chat_prompt(problems[k].prompt, false)), 0, problems[k].id});
    const auto a = plain.generate(batch, greedy(160));
    const auto b = spec.generate(batch, greedy(160));
    for (size_t k = 0; k < batch.size(); ++k) {
      EXPECT_EQ(a[k].ids, b[k].ids) << batch[k].key;
      emitted += b[k].stats.emitted();
      steps += b[k].stats.steps;
    }
  }
  // The bundled head is a real draft: several tokens per target step (models/README.md has the
  // measured tau; this only guards against a broken pairing).
  EXPECT_GE(static_cast<double>(emitted) / static_cast<double>(steps), 3.0);
}

// The CPU's temperature-0 step (the verdict on the host, DecodeParams::host_greedy) against the
// tensor path a GPU takes, on the bundled pair (a trained head: accepted prefixes of every length):
// the same tokens and the same statistics, for every verifier, in float32 and bf16.
class HostGreedyVerdict : public ::testing::TestWithParam<c10::ScalarType> {};
INSTANTIATE_TEST_SUITE_P(Dtypes, HostGreedyVerdict, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST_P(HostGreedyVerdict, EqualsTheTensorPath) {
  const CausalLM m = CausalLM::load(kModels / "tiny-qwen3", at::kCPU, GetParam());
  const Eagle3Head h = Eagle3Head::load(kModels / "tiny-eagle3", m);
  auto drafter = make_eagle3_drafter(h);
  std::vector<GenRequest> batch;
  // Enough steps that each accepted-prefix length occurs: the head accepts its first draft in ~92 %
  // of steps (models/README.md), so 4 short answers had no step that rejected it.
  for (const auto& problem : synth_gsm(8, 3, "test"))
    batch.push_back({tokenizer().encode(qwen3_chat_prompt(problem.prompt, false)), 0, problem.id});
  std::vector<int64_t> hist(7, 0);
  for (Drafter* d : {static_cast<Drafter*>(nullptr), drafter.get()}) {
    Engine engine(m, d, &tokenizer());
    for (auto kind : {VerifierSpec::Baseline, VerifierSpec::Ears, VerifierSpec::Typical, VerifierSpec::Greedy}) {
      SCOPED_TRACE(std::string(d ? "eagle3 " : "target-only ") + to_string(kind));
      DecodeParams p = greedy(64);
      p.verifier.kind = kind;
      p.verifier.beta = 0.5;
      const auto host = engine.generate(batch, p);
      p.host_greedy = false;
      const auto tensors = engine.generate(batch, p);
      for (size_t i = 0; i < batch.size(); ++i) {
        const GenStats &a = host[i].stats, &b = tensors[i].stats;
        EXPECT_EQ(host[i].ids, tensors[i].ids) << batch[i].key;
        EXPECT_EQ(host[i].finish_reason, tensors[i].finish_reason);
        EXPECT_EQ(std::tie(a.steps, a.drafted, a.accepted, a.corrections, a.bonus, a.pardoned, a.host_syncs),
                  std::tie(b.steps, b.drafted, b.accepted, b.corrections, b.bonus, b.pardoned, b.host_syncs));
        EXPECT_EQ(a.accept_length_hist, b.accept_length_hist);
        EXPECT_EQ(a.accepted_per_position, b.accepted_per_position);
        EXPECT_EQ(a.drafted_by_u, b.drafted_by_u);
        EXPECT_EQ(std::tie(a.uncertainty_sum, a.distortion_sum, a.distortion_n),
                  std::tie(b.uncertainty_sum, b.distortion_sum, b.distortion_n));
        if (d) for (size_t n = 0; n < hist.size(); ++n) hist[n] += a.accept_length_hist[n];
      }
    }
  }
  // Steps that rejected the first draft, accepted a partial prefix, and accepted all five.
  const std::string counts = fmt::format("accept-length histogram {}", fmt::join(hist, " "));
  EXPECT_GT(hist[1], 0) << counts;
  EXPECT_GT(hist[2] + hist[3] + hist[4] + hist[5], 0) << counts;
  EXPECT_GT(hist[6], 0) << counts;
}

// The quickstart computes in bf16 (the shipped dtype). For T = 0 speculative output to equal
// target-only greedy there too, a token decoded alone must get the very logits it gets inside a
// γ+1-token verification forward: six 1-token steps == one 6-token step, bit for bit.
class Bf16Rounding : public ::testing::TestWithParam<kernels::Path> {};
INSTANTIATE_TEST_SUITE_P(Paths, Bf16Rounding, EARS_KERNEL_PATHS, test::path_param_name);

TEST_P(Bf16Rounding, DecodeStepsRoundLikeOneVerificationForwardAtAnyBatch) {
  EARS_SKIP_UNSUPPORTED_PATH(GetParam());
  test::KernelPathGuard guard(GetParam());
  const CausalLM m = CausalLM::load(kModels / "tiny-qwen3", at::kCPU, at::kBFloat16);
  const auto ids = tokenizer().encode(qwen3_chat_prompt("Tom has 12 apples and buys 7 more. How many now?", false));
  const auto longs = at::TensorOptions().dtype(at::kLong);
  const at::Tensor prompt = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), longs).view({1, -1});
  const at::Tensor next = at::tensor(std::vector<int64_t>{1, 900, 17, 2000, 5, 333}, longs).view({1, 6});
  KVCache cache = m.new_cache(1, prompt.size(1) + 6);
  m.forward(prompt, cache);
  const int64_t prefix = cache.length(0);
  std::vector<at::Tensor> single;
  for (int64_t i = 0; i < 6; ++i) single.push_back(m.forward(next.narrow(1, i, 1), cache).logits.select(1, 0));
  cache.truncate(0, prefix);
  const at::Tensor six = m.forward(next, cache).logits;  // [1, 6, V]
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_TRUE(at::equal(single[static_cast<size_t>(i)], six.select(1, i)))
        << "position " << i << ": max |diff| "
        << (single[static_cast<size_t>(i)].to(at::kFloat) - six.select(1, i).to(at::kFloat)).abs().max().item<float>();
  // Batched verification: the same 6 tokens in each of 4 sequences (24 rows per linear) round
  // like the lone decode steps. LibTorch's own GEMM (aten path) gives no such guarantee.
  if (GetParam() == kernels::Path::aten) return;
  KVCache batch_cache = m.new_cache(4, prompt.size(1) + 6);
  m.forward(prompt.expand({4, prompt.size(1)}).contiguous(), batch_cache);
  const at::Tensor batched = m.forward(next.expand({4, 6}).contiguous(), batch_cache).logits;  // [4, 6, V]
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t i = 0; i < 6; ++i)
      EXPECT_TRUE(at::equal(single[static_cast<size_t>(i)].squeeze(0), batched[b][i])) << "sequence " << b << " position " << i;
}
