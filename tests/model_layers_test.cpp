// decoders/ layers and CPU kernels, Qwen2 / Llama bias paths on tiny random checkpoints, parameter
// counts, and the fused attention path.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/mv.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "decoders/aten_operators.h"
#include "decoders/cpu_avx2.h"
#include "decoders/cpu_bf16.h"
#include "decoders/kernel_path.h"
#include "decoders/layers.h"
#include "decoders/line_feed.h"
#include "decoders/model.h"
#include "decoders/model_config.h"
#include "decoders/safetensors_header.h"
#include "harness/base/error.h"
#include "tests/tensor_test_util.h"
#include "tests/kernel_paths.h"
#include "tests/test_util.h"
#include "tests/model_test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using ears::CausalLM;
using ears::ForwardOptions;
using ears::KVCache;
using ears::test::max_abs;
using ears::test::mean_abs;
using ears::test::row_tensor;
using ears::test::to_tensor;
using ears::test::model_test::load_error;

// ---------------------------------------------------------------------------------------------
// KV cache: each new row lands at (b, KV head, len_b + t), uniform or ragged lengths, from a
// strided head view (the fused qkv's k) on the memcpy path or a dtype-converting one on ATen's.

TEST(KVCacheWrite, RowsLandAtEachSequencesLengthFromAnyView) {
  for (const at::ScalarType dt : {at::kBFloat16, at::kFloat}) {
    for (const at::ScalarType src_dt : {dt, at::kDouble}) {  // kDouble: converted, ATen's copy
      const int64_t B = 3, K = 2, L = 8, hd = 4, T = 2;
      KVCache cache(2, B, K, L, hd, dt, at::kCPU);
      cache.commit(cache.prepare_append(3));
      cache.set_lengths({3, 1, 2});
      for (const bool ragged : {true, false}) {
        if (!ragged) cache.set_lengths({1, 1, 1});
        const std::vector<int64_t> len = cache.lengths();
        // k and v as head views of one [B, T, 3K, hd] projection, like the fused qkv.
        const at::Tensor proj = at::randn({B, T, 3 * K, hd}, at::TensorOptions().dtype(src_dt));
        const at::Tensor k = proj.narrow(2, K, K), v = proj.narrow(2, 2 * K, K);
        const auto plan = cache.prepare_append(T);
        cache.write(1, plan, k, v);
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < K; ++h)
            for (int64_t t = 0; t < T; ++t) {
              const int64_t pos = len[static_cast<size_t>(b)] + t;
              EXPECT_TRUE(at::equal(cache.k(1)[b][h][pos], k[b][t][h].to(dt))) << b << h << t << ragged;
              EXPECT_TRUE(at::equal(cache.v(1)[b][h][pos], v[b][t][h].to(dt))) << b << h << t << ragged;
            }
        EXPECT_EQ(cache.k(0).abs().sum().item<double>(), 0.0) << "layer 0 untouched";
        cache.commit(plan);
      }
    }
  }
}

// Storage: zeros at the start and the kept rows after select, on both sides of the 2 MiB from
// which a CPU cache takes a huge-page mapping of its own (decoders/kv_cache.cpp).
TEST(KVCacheStorage, StartsZeroAndSelectKeepsTheChosenSequences) {
  for (const int64_t L : {8, 512}) {  // 6 KiB and 12 MiB of float32
    const int64_t B = 3, K = 4, hd = 128;
    KVCache cache(2, B, K, L, hd, at::kFloat, at::kCPU);
    EXPECT_EQ(cache.k(1).abs().sum().item<double>() + cache.v(0).abs().sum().item<double>(), 0.0) << L;
    for (int64_t layer = 0; layer < 2; ++layer)
      for (int64_t b = 0; b < B; ++b) {
        cache.k(layer)[b].fill_(static_cast<double>(10 * layer + b + 1));
        cache.v(layer)[b].fill_(static_cast<double>(-(10 * layer + b + 1)));
      }
    cache.commit(cache.prepare_append(7));
    cache.set_lengths({5, 6, 7});
    cache.select({2, 0});
    ASSERT_EQ(cache.batch(), 2);
    EXPECT_EQ(cache.lengths(), (std::vector<int64_t>{7, 5}));
    for (int64_t layer = 0; layer < 2; ++layer)
      for (const auto& [row, was] : std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {1, 0}}) {
        const double want = static_cast<double>(10 * layer + was + 1);
        EXPECT_TRUE(at::equal(cache.k(layer)[row], at::full({K, L, hd}, want))) << L << layer << row;
        EXPECT_TRUE(at::equal(cache.v(layer)[row], at::full({K, L, hd}, -want))) << L << layer << row;
      }
  }
  // One that cannot be mapped (2 EiB: past even 57-bit address spaces) is one error naming the
  // cache and the fix.
  try {
    KVCache huge(1, 1, 1, int64_t{1} << 47, 2048, at::kFloat, at::kCPU);
    ADD_FAILURE() << "a 2 EiB KV cache was created";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("a KV cache of 1 sequences x 140737488355328 positions (out of memory: lower"),
              std::string::npos)
        << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// layers: RoPE scaling variants and attention against a naive repeat_kv reference

TEST(Layers, RopeInvFreqVariants) {
  ears::RopeConfig rope;
  rope.theta = 500000.0;
  const at::Tensor base = ears::layers::rope_inv_freq(64, rope, at::kCPU);
  ASSERT_EQ(base.size(0), 32);
  EXPECT_NEAR(base[0].item<double>(), 1.0, 1e-7);
  EXPECT_NEAR(base[1].item<double>(), std::pow(500000.0, -2.0 / 64), 1e-7);
  rope.type = "linear";
  rope.factor = 4.0;
  EXPECT_TRUE(at::allclose(ears::layers::rope_inv_freq(64, rope, at::kCPU), base / 4.0));
  rope.type = "llama3";
  rope.factor = 8.0;
  rope.low_freq_factor = 1.0;
  rope.high_freq_factor = 4.0;
  rope.original_max_position_embeddings = 8192;
  const at::Tensor l3 = ears::layers::rope_inv_freq(64, rope, at::kCPU);
  EXPECT_EQ(l3[0].item<float>(), base[0].item<float>());            // high frequency: unchanged
  EXPECT_FLOAT_EQ(l3[31].item<float>(), base[31].item<float>() / 8);  // low frequency: / factor
}

TEST(Layers, AttentionMatchesNaiveGqa) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const int64_t B = 2, T = 3, H = 6, K = 2, S = 9, hd = 8;
  const at::Tensor q = at::randn({B, T, H, hd}, gen, at::kFloat);
  const at::Tensor k = at::randn({B, K, S, hd}, gen, at::kFloat);
  const at::Tensor v = at::randn({B, K, S, hd}, gen, at::kFloat);
  // Sequence 0 at positions 2..4, sequence 1 at 6..8.
  const at::Tensor pos = at::tensor(std::vector<int64_t>{2, 3, 4, 6, 7, 8}, at::kLong).view({B, T});
  const at::Tensor blocked = at::arange(S, at::kLong).view({1, 1, S}) > pos.unsqueeze(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const at::Tensor got = ears::layers::attention(q, k, v, blocked, scale);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{B, T, H * hd}));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t kv = h / (H / K);
        const int64_t n = pos[b][t].item<int64_t>() + 1;
        const at::Tensor s = at::mv(k[b][kv].narrow(0, 0, n), q[b][t][h]) * scale;
        const at::Tensor o = at::mv(v[b][kv].narrow(0, 0, n).t(), at::softmax(s, 0));
        EXPECT_LE(max_abs(got[b][t].narrow(0, h * hd, hd), o), 1e-5) << b << " " << t << " " << h;
      }
}

// ---------------------------------------------------------------------------------------------
// CPU kernels (decoders/cpu_bf16, decoders/cpu_avx2) behind layers::linear / attention / rms_norm /
// apply_rope, once per kernel path the CPU supports (tests/kernel_paths.h). On the aten path the
// same assertions hold for LibTorch's own ops where they are stated for every path.

namespace {
class CpuKernels : public ::testing::TestWithParam<ears::kernels::Path> {
 protected:
  void SetUp() override {
    EARS_SKIP_UNSUPPORTED_PATH(GetParam());
    guard_ = std::make_unique<ears::test::KernelPathGuard>(GetParam());
  }
  void TearDown() override { guard_.reset(); }
  bool kernels_on() const { return GetParam() != ears::kernels::Path::aten; }

 private:
  std::unique_ptr<ears::test::KernelPathGuard> guard_;
};
}  // namespace

INSTANTIATE_TEST_SUITE_P(Paths, CpuKernels, EARS_KERNEL_PATHS, ears::test::path_param_name);

// A prepared (packed) linear: fp32 accumulation with one bf16 rounding, and every row rounds the
// same whatever the number of rows computed with it (T = 0 identity at every batch size).
TEST_P(CpuKernels, Bf16LinearIsRowInvariantForAnyRowCount) {
  if (!kernels_on()) GTEST_SKIP() << "LibTorch's GEMM is not row-invariant (layers::linear works around it for 1 row only)";
  auto gen = at::make_generator<at::CPUGeneratorImpl>(14);
  // K = 200: six full 32-wide chunks plus a zero-padded tail; N: full 32-row blocks plus a padded
  // one; 40 rows: full and partial row tiles of every kernel. N = 4099 (164k outputs: a changed
  // summation order shows up in some bf16 rounding; 1.8 MB packed: avx2 takes one 16-output panel
  // at a time at every row count); N = 301 (141 kB: avx2 takes 1 row four panels at once and 2
  // rows two, the last group's fourth panel all padding) with K = 203: rows of x that end inside an
  // 8; N = 70 with K = 600: two full k blocks of 8 chunks and a short one (avx2's row tiles carry
  // their partial sums from one block to the next).
  const int64_t M = 40;
  for (const auto& [N, K] : {std::pair<int64_t, int64_t>{4099, 200}, std::pair<int64_t, int64_t>{301, 203},
                             std::pair<int64_t, int64_t>{70, 600}}) {
    SCOPED_TRACE("N = " + std::to_string(N) + ", K = " + std::to_string(K));
    const at::Tensor x = at::randn({M, K}, gen, at::kFloat).to(at::kBFloat16);
    const at::Tensor w = (at::randn({N, K}, gen, at::kFloat) * 0.1).to(at::kBFloat16);
    const at::Tensor bias = at::randn({N}, gen, at::kFloat).to(at::kBFloat16);
    const ears::layers::LinearWeight lw = ears::layers::prepare_linear(w, bias);
    ASSERT_TRUE(lw.packed.defined());
    EXPECT_FALSE(lw.w.defined());  // the plain copy is dropped
    EXPECT_TRUE(at::equal(lw.dense(), w));
    const at::Tensor all = ears::layers::linear(x, lw);
    ASSERT_EQ(all.scalar_type(), at::kBFloat16);
    const at::Tensor ref = at::linear(x.to(at::kFloat), w.to(at::kFloat), bias.to(at::kFloat));
    // Half a bf16 ulp (2^-8 relative) plus the fp32 summation error of 200-600 products.
    const at::Tensor err = (all.to(at::kFloat) - ref).abs();
    EXPECT_TRUE(err.le(ref.abs() * (1.0 / 256) + 1e-4).all().item<bool>()) << "max error " << err.max().item<float>();
    for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 33}) {  // tiles of 3 to 6 rows (16: 6 + 5 + 5)
      const at::Tensor part = ears::layers::linear(x.narrow(0, M - m, m).view({1, m, K}), lw);
      EXPECT_TRUE(at::equal(part.view({m, N}), all.narrow(0, M - m, m))) << m << " rows round differently";
    }
    // Every row decoded alone (the decode step's kernel); on avx512bf16 both ways a lone row streams
    // a weight from memory (N = 4099): one 32-row block at a time and two side by side.
    const bool one_block = ears::cpu_bf16::lone_row_one_block();
    for (const bool one : {one_block, !one_block}) {
      ears::cpu_bf16::set_lone_row_one_block(one);
      for (int64_t r = 0; r < M; ++r)
        EXPECT_TRUE(at::equal(ears::layers::linear(x.narrow(0, r, 1), lw), all.narrow(0, r, 1)))
            << "row " << r << " alone, " << (one ? "one block" : "two blocks");
    }
    ears::cpu_bf16::set_lone_row_one_block(one_block);
  }
}

TEST_P(CpuKernels, Float32LinearIsRowInvariantAndMatchesAten) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(16);
  const int64_t K = 200, N = 37, M = 40;
  const at::Tensor x = at::randn({M, K}, gen, at::kFloat);
  const at::Tensor w = at::randn({N, K}, gen, at::kFloat) * 0.1;
  const at::Tensor bias = at::randn({N}, gen, at::kFloat);
  const ears::layers::LinearWeight lw = ears::layers::prepare_linear(w, bias);
  EXPECT_EQ(lw.packed.defined(), kernels_on());
  EXPECT_TRUE(at::equal(lw.dense(), w));
  const at::Tensor all = ears::layers::linear(x, lw);
  EXPECT_LE(max_abs(all, at::linear(x.to(at::kDouble), w.to(at::kDouble), bias.to(at::kDouble)).to(at::kFloat)), 1e-4);
  if (!kernels_on()) return;
  for (int64_t m : {1, 2, 3, 4, 5, 8, 17, 33}) {
    const at::Tensor part = ears::layers::linear(x.narrow(0, M - m, m).view({1, m, K}), lw);
    EXPECT_TRUE(at::equal(part.view({m, N}), all.narrow(0, M - m, m))) << m << " rows round differently";
  }
}

// Plain (unprepared) bf16 weights: vdpbf16ps row dots for <= 8 rows on AVX-512 BF16 CPUs.
TEST_P(CpuKernels, Bf16PlainWeightLinearMatchesFloat32) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  const int64_t K = 200, N = 37;
  const at::Tensor x = at::randn({8, K}, gen, at::kFloat).to(at::kBFloat16);
  const at::Tensor w = (at::randn({N, K}, gen, at::kFloat) * 0.1).to(at::kBFloat16);
  const at::Tensor bias = at::randn({N}, gen, at::kFloat).to(at::kBFloat16);
  const at::Tensor ref = at::linear(x.to(at::kFloat), w.to(at::kFloat), bias.to(at::kFloat));
  const at::Tensor all = ears::layers::linear(x, w, bias);
  ASSERT_EQ(all.scalar_type(), at::kBFloat16);
  const at::Tensor err = (all.to(at::kFloat) - ref).abs();
  EXPECT_TRUE(err.le(ref.abs() * (1.0 / 128) + 1e-3).all().item<bool>()) << "max error " << err.max().item<float>();
  if (!ears::cpu_bf16::available()) return;  // row dots: row-invariant up to 8 rows
  for (int64_t m = 1; m <= 8; ++m) {
    const at::Tensor part = ears::layers::linear(x.narrow(0, 0, m).view({1, m, K}), w, bias);
    EXPECT_TRUE(at::equal(part.view({m, N}), all.narrow(0, 0, m))) << m << " rows round differently";
  }
}

TEST_P(CpuKernels, RmsNormMatchesTheFormulaOnRowsAndHeadViews) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(13);
  const double eps = 1e-6;
  auto formula = [&](const at::Tensor& x, const at::Tensor& w) {
    const at::Tensor xf = x.to(at::kFloat);
    return (xf * xf.pow(2).mean(-1, true).add(eps).rsqrt()).to(at::kBFloat16).mul(w);
  };
  // D = 44: full 16- and 8-lane chunks plus a tail.
  const at::Tensor x = (at::randn({2, 3, 44}, gen, at::kFloat) * 3).to(at::kBFloat16);
  const at::Tensor w = (at::rand({44}, gen, at::kFloat) + 0.5).to(at::kBFloat16);
  const at::Tensor y = ears::layers::rms_norm(x, w, eps);
  ASSERT_EQ(y.sizes(), x.sizes());
  // Only the fp32 sum order differs from the formula: at most one bf16 rounding step apart.
  EXPECT_LE(max_abs(y, formula(x, w)), 0.02 * 3);
  EXPECT_LE(mean_abs(y, formula(x, w)), 1e-3);
  // The q and k heads of a fused projection: a strided [B, T, n, hd] view, one weight row per head;
  // T = 1 is a batched decode, whose view has stride(1) = n * hd, not the projection's width;
  // T = 40: 8000 elements, split over 2 threads (layers.cpp for_rows).
  const at::Tensor hw = (at::rand({5, 20}, gen, at::kFloat) + 0.5).to(at::kBFloat16);
  const ears::test::ThreadsGuard two(2);
  for (int64_t T : {3, 1, 40}) {
    const at::Tensor qkv = at::randn({2, T, 7 * 20}, gen, at::kFloat).to(at::kBFloat16);
    const at::Tensor heads = qkv.narrow(-1, 0, 5 * 20).view({2, T, 5, 20});
    ASSERT_FALSE(heads.is_contiguous());
    const at::Tensor hy = ears::layers::rms_norm(heads, hw, eps);
    EXPECT_LE(max_abs(hy, formula(heads, hw)), 0.02 * 3) << "T = " << T;
    EXPECT_LE(mean_abs(hy, formula(heads, hw)), 1e-3) << "T = " << T;
  }
}

TEST_P(CpuKernels, RopeRoundsLikeTheBf16Formula) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(15);
  // hd = 44: half = 22, full 16- and 8-lane chunks plus a tail per half; q and k heads as a view
  // (T = 1: a batched decode's view, T = 40: split over 2 threads; see the RMSNorm test).
  const int64_t B = 2, n = 5, hd = 44;
  ears::RopeConfig rc;
  rc.theta = 10000.0;
  const ears::test::ThreadsGuard two(2);
  for (int64_t T : {3, 1, 40}) {
    const at::Tensor qkv = (at::randn({B, T, (n + 2) * hd}, gen, at::kFloat) * 2).to(at::kBFloat16);
    const at::Tensor x = qkv.narrow(-1, 0, n * hd).view({B, T, n, hd});
    const at::Tensor pos = (at::arange(T, at::kLong) + at::tensor(std::vector<int64_t>{3, 17}, at::kLong).view({B, 1}));
    const ears::layers::RopeTables rope =
        ears::layers::rope_tables(ears::layers::rope_inv_freq(hd, rc, at::kCPU), pos, at::kBFloat16);
    const at::Tensor y = ears::layers::apply_rope(x, rope);
    // The formula in bf16 tensor ops (each op rounds once, as Hugging Face eager does).
    const at::Tensor cos = rope.cos.unsqueeze(2), sin = rope.sin.unsqueeze(2);
    const at::Tensor rot = at::cat({x.narrow(-1, hd / 2, hd / 2).neg(), x.narrow(-1, 0, hd / 2)}, -1);
    const at::Tensor ref = x * cos + rot * sin;
    EXPECT_TRUE(at::equal(y, ref)) << "T = " << T << ": max |diff| " << max_abs(y, ref);
  }
}

TEST_P(CpuKernels, AttentionMatchesAtenPathAndIgnoresKeysPastThePosition) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(12);
  // hd = 84: full 32/16/8-wide steps plus tails; S = 21: a partial 8/16-key exp chunk.
  const int64_t B = 2, T = 3, H = 4, K = 2, S = 21, hd = 84;
  const at::Tensor q = at::randn({B, T, H, hd}, gen, at::kFloat).to(at::kBFloat16);
  at::Tensor k = at::randn({B, K, S, hd}, gen, at::kFloat).to(at::kBFloat16);
  at::Tensor v = at::randn({B, K, S, hd}, gen, at::kFloat).to(at::kBFloat16);
  const at::Tensor pos = at::tensor(std::vector<int64_t>{2, 3, 4, 15, 16, 17}, at::kLong).view({B, T});
  const at::Tensor blocked = at::arange(S, at::kLong).view({1, 1, S}) > pos.unsqueeze(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const at::Tensor aten = ears::layers::attention(q, k, v, blocked, scale);
  // The kernels never read keys past every position: NaN there must not reach the output (the
  // ATen path multiplies them by probability 0).
  if (kernels_on()) {
    k.narrow(2, 18, S - 18).fill_(std::numeric_limits<float>::quiet_NaN());
    v.narrow(2, 18, S - 18).fill_(std::numeric_limits<float>::quiet_NaN());
  }
  const at::Tensor kernel = ears::layers::attention(q, k, v, blocked, scale, pos);
  ASSERT_EQ(kernel.sizes(), aten.sizes());
  ASSERT_TRUE(at::isfinite(kernel).all().item<bool>());
  // Same roundings as the ATen path (bf16 scores, bf16 probabilities); only the order of the fp32
  // sums differs, which can move a bf16 rounding by one ulp. Where LibTorch's bf16 matmul is its
  // own (no AVX-512, or oneDNN capped below it), probs @ v does not accumulate in fp32: LibTorch
  // 1.13 measured mean |error| 1.16e-3 against the fp32 product rounded once (oneDNN: 0).
  EXPECT_LE(max_abs(kernel, aten), 0.02);
  EXPECT_LE(mean_abs(kernel, aten), ears::kernels::native_bf16() ? 1e-3 : 3e-3);
}

// The query rows that share a KV head go to the kernel together (every kernel path: the G heads of
// a token in groups of up to 4 that load each K / V chunk once and reduce their scores together —
// 16 at a time on avx512bf16 / amx, 4 or 8 on avx2; avx2 bf16 from 32 rows on: K and V widened to
// fp32 once for all of them);
// each row must come out exactly as when it is the only row of its KV head (one token, one query
// head per KV head), and as layers::attend_rows (raw rows, the draft head's step) gives it.
struct SharedKvShape {
  int64_t T, H, hd;  // B 2, K 2: G = H / 2 query heads per KV head
};

TEST_P(CpuKernels, AttentionRowsSharingAKvHeadMatchEachRowAlone) {
  if (!kernels_on()) GTEST_SKIP() << "the ATen path has no row kernels";
  auto gen = at::make_generator<at::CPUGeneratorImpl>(15);
  // 12 tokens x 3 query heads = 36 rows per KV head: past cpu_avx2's widening threshold (32);
  // below it, groups of 2, 3, 4 and 5 = 3 + 2 heads, hd with and without a partial 8-lane chunk.
  // T 20: a prefill, on the paths whose kernels take one (attention_kernel_tokens).
  for (const SharedKvShape shape : {SharedKvShape{12, 6, 76}, SharedKvShape{2, 4, 64}, SharedKvShape{3, 6, 36},
                                    SharedKvShape{2, 8, 76}, SharedKvShape{1, 10, 44}, SharedKvShape{20, 4, 64}}) {
    for (const auto dtype : {at::kBFloat16, at::kFloat}) {
      if (shape.T > ears::layers::attention_kernel_tokens(dtype)) continue;
      const int64_t B = 2, T = shape.T, H = shape.H, K = 2, G = H / K, S = std::max<int64_t>(29, 17 + T), hd = shape.hd;
      SCOPED_TRACE(::testing::Message() << "T " << T << " G " << G << " hd " << hd);
      const at::Tensor q = at::randn({B, T, H, hd}, gen, at::kFloat).to(dtype);
      const at::Tensor k = at::randn({B, K, S, hd}, gen, at::kFloat).to(dtype);
      const at::Tensor v = at::randn({B, K, S, hd}, gen, at::kFloat).to(dtype);
      const at::Tensor pos = at::cat({at::arange(3, 3 + T, at::kLong), at::arange(16, 16 + T, at::kLong)}).view({B, T});
      const at::Tensor blocked = at::arange(S, at::kLong).view({1, 1, S}) > pos.unsqueeze(2);
      const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
      const at::Tensor together = ears::layers::attention(q, k, v, blocked, scale, pos).view({B, T, H, hd});
      for (int64_t t = 0; t < T; ++t)
        for (int64_t g = 0; g < G; ++g) {
          // Query head g of every KV head, one token: one row per KV head.
          const at::Tensor heads = at::arange(K, at::kLong) * G + g;
          const at::Tensor qi = q.narrow(1, t, 1).index_select(2, heads);
          const at::Tensor alone = ears::layers::attention(qi, k, v, blocked.narrow(1, t, 1), scale, pos.narrow(1, t, 1));
          const at::Tensor want = together.narrow(1, t, 1).index_select(2, heads).reshape(alone.sizes());
          EXPECT_TRUE(at::equal(alone, want)) << c10::toString(dtype) << " t " << t << " g " << g << " max |diff| "
                                              << max_abs(alone, want);
        }
      // And the raw rows (the draft head's step, layers::attend_rows): each sequence's T tokens x H
      // query heads over its K KV heads in one call.
      for (int64_t b = 0; b < B; ++b) {
        const at::Tensor qb = q[b].contiguous(), kb = k[b].contiguous(), vb = v[b].contiguous();
        at::Tensor rows = at::empty({T, H, hd}, q.options());
        std::vector<int64_t> n_keys(static_cast<size_t>(T));
        for (int64_t t = 0; t < T; ++t) n_keys[t] = pos[b][t].item<int64_t>() + 1;
        const float sc = static_cast<float>(scale);
        if (dtype == at::kFloat) {
          ears::layers::attend_rows(qb.data_ptr<float>(), H * hd, T, K, G, n_keys.data(), kb.data_ptr<float>(),
                                    vb.data_ptr<float>(), S * hd, hd, sc, rows.data_ptr<float>(), H * hd);
        } else {
          auto u16 = [](const at::Tensor& x) { return static_cast<uint16_t*>(x.data_ptr()); };
          ears::layers::attend_rows(u16(qb), H * hd, T, K, G, n_keys.data(), u16(kb), u16(vb), S * hd, hd, sc,
                                    u16(rows), H * hd);
        }
        EXPECT_TRUE(at::equal(rows, together[b])) << c10::toString(dtype) << " attend_rows b " << b << " max |diff| "
                                                  << max_abs(rows, together[b]);
      }
    }
  }
}

// SwiGLU rows against the formula computed independently (fp64 silu, rounded like the kernel's
// contract: bf16(bf16(silu(g)) * u)). The kernel's fp32 e^-g is within 2e-7 relative, so a bf16
// rounding can flip only where the exact value sits that close to a rounding boundary: ~1e-4 of
// the elements; allow 1 in 256, each at most one bf16 step off. g spans [-100, 100]: past the
// e^88 cap on both sides.
TEST_P(CpuKernels, SwigluRowsMatchTheFormula) {
  if (!kernels_on()) GTEST_SKIP() << "raw rows exist on CPU kernel paths only";
  auto gen = at::make_generator<at::CPUGeneratorImpl>(19);
  const int64_t rows = 5, I = 1001;  // I: full 8-lane chunks plus a tail
  at::Tensor gu = at::randn({rows, 2 * I}, gen, at::kFloat) * 4;
  gu.narrow(1, 0, 40).copy_(at::linspace(-100, 100, 40).view({1, 40}).expand({rows, 40}));
  const at::Tensor g64 = gu.narrow(1, 0, I).to(at::kDouble);
  const at::Tensor silu64 = g64 / (1 + at::exp(-g64));
  {  // bf16
    const at::Tensor gub = gu.to(at::kBFloat16);
    at::Tensor act = at::empty({rows, I}, gub.options());
    ears::layers::swiglu_rows(reinterpret_cast<const uint16_t*>(gub.data_ptr()), rows, I,
                              reinterpret_cast<uint16_t*>(act.data_ptr()));
    const at::Tensor s = (gub.narrow(1, 0, I).to(at::kDouble) / (1 + at::exp(-gub.narrow(1, 0, I).to(at::kDouble))));
    const at::Tensor ref = (s.to(at::kBFloat16).to(at::kDouble) * gub.narrow(1, I, I).to(at::kDouble)).to(at::kBFloat16);
    const at::Tensor off = act.ne(ref);
    EXPECT_LE(off.sum().item<int64_t>(), rows * I / 256) << "elements off the formula";
    const at::Tensor step = ref.to(at::kFloat).abs() * (1.0 / 128) + 1e-30;
    EXPECT_TRUE((act.to(at::kFloat) - ref.to(at::kFloat)).abs().le(step).all().item<bool>());
    // The MLP takes the same kernel, its rows split over 2 threads (10k elements): through
    // identity projections (x * 1 + 0s: exact) silu_mlp is the SwiGLU alone.
    const ears::test::ThreadsGuard two(2);
    const at::Tensor mlp = ears::layers::silu_mlp(gub, at::eye(2 * I).to(at::kBFloat16), at::eye(I).to(at::kBFloat16));
    EXPECT_TRUE(at::equal(mlp, act));
  }
  {  // float32: silu * up, no rounding beyond fp32's
    at::Tensor act = at::empty({rows, I}, gu.options());
    ears::layers::swiglu_rows(gu.data_ptr<float>(), rows, I, act.data_ptr<float>());
    const at::Tensor ref = silu64 * gu.narrow(1, I, I).to(at::kDouble);
    EXPECT_TRUE((act.to(at::kDouble) - ref).abs().le(ref.abs() * 1e-6 + 1e-35).all().item<bool>())
        << "max |diff| " << (act.to(at::kDouble) - ref).abs().max().item<double>();
  }
}

// cpu_bf16's SwiGLU (the amx and avx512bf16 paths) is cpu_avx2's on 16 lanes: the same bits for
// every input, so no output depends on which of the two a path takes. Every bf16 gate value
// (NaN, infinities and denormals among them) against up values of every magnitude, I with a tail.
TEST(SwigluKernels, Avx512BitsAreTheAvx2Bits) {
  EARS_SKIP_UNSUPPORTED_PATH(ears::kernels::Path::avx512bf16);
  const int64_t I = 65536 + 5;
  std::vector<uint16_t> gate_up(static_cast<size_t>(2 * I));
  std::mt19937 rng(23);
  for (int64_t i = 0; i < I; ++i) {
    gate_up[static_cast<size_t>(i)] = static_cast<uint16_t>(i);
    gate_up[static_cast<size_t>(I + i)] = static_cast<uint16_t>(rng());
  }
  std::vector<uint16_t> avx512(static_cast<size_t>(I)), avx2(static_cast<size_t>(I));
  ears::cpu_bf16::swiglu_rows(gate_up.data(), 1, I, avx512.data());
  ears::cpu_avx2::swiglu_rows(gate_up.data(), 1, I, avx2.data());
  int64_t differ = 0, first = -1;
  for (int64_t i = 0; i < I; ++i)
    if (avx512[static_cast<size_t>(i)] != avx2[static_cast<size_t>(i)] && differ++ == 0) first = i;
  EXPECT_EQ(differ, 0) << "first at gate bits 0x" << std::hex << first;
}

// float32 activations (the float32 compute dtype): RMSNorm, RoPE and attention kernels against
// the formulas in fp64.
TEST_P(CpuKernels, Float32RowKernelsMatchTheFormulas) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(17);
  const double eps = 1e-6;
  const at::Tensor qkv = at::randn({2, 3, 7 * 20}, gen, at::kFloat);
  const at::Tensor heads = qkv.narrow(-1, 0, 5 * 20).view({2, 3, 5, 20});
  const at::Tensor hw = at::rand({5, 20}, gen, at::kFloat) + 0.5;
  const at::Tensor hd64 = heads.to(at::kDouble);
  const at::Tensor norm_ref = hd64 * hd64.pow(2).mean(-1, true).add(eps).rsqrt() * hw.to(at::kDouble);
  EXPECT_LE(max_abs(ears::layers::rms_norm(heads, hw, eps), norm_ref.to(at::kFloat)), 1e-5);

  const int64_t hd = 44;
  const at::Tensor x = at::randn({2, 3, 7 * hd}, gen, at::kFloat).narrow(-1, 0, 5 * hd).view({2, 3, 5, hd});
  const at::Tensor pos = at::tensor(std::vector<int64_t>{3, 4, 5, 17, 18, 19}, at::kLong).view({2, 3});
  ears::RopeConfig rc;
  const ears::layers::RopeTables rope =
      ears::layers::rope_tables(ears::layers::rope_inv_freq(hd, rc, at::kCPU), pos, at::kFloat);
  const at::Tensor rot = at::cat({x.narrow(-1, hd / 2, hd / 2).neg(), x.narrow(-1, 0, hd / 2)}, -1);
  const at::Tensor rope_ref = x * rope.cos.unsqueeze(2) + rot * rope.sin.unsqueeze(2);
  EXPECT_LE(max_abs(ears::layers::apply_rope(x, rope), rope_ref), 1e-6);

  const int64_t B = 2, T = 3, H = 4, K = 2, S = 21, d = 84;
  const at::Tensor q = at::randn({B, T, H, d}, gen, at::kFloat);
  const at::Tensor k = at::randn({B, K, S, d}, gen, at::kFloat);
  const at::Tensor v = at::randn({B, K, S, d}, gen, at::kFloat);
  const at::Tensor p = at::tensor(std::vector<int64_t>{2, 3, 4, 15, 16, 17}, at::kLong).view({B, T});
  const at::Tensor blocked = at::arange(S, at::kLong).view({1, 1, S}) > p.unsqueeze(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const at::Tensor got = ears::layers::attention(q, k, v, blocked, scale, p);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t kv = h / (H / K), n = p[b][t].item<int64_t>() + 1;
        const at::Tensor sc = at::mv(k[b][kv].narrow(0, 0, n).to(at::kDouble), q[b][t][h].to(at::kDouble)) * scale;
        const at::Tensor o = at::mv(v[b][kv].narrow(0, 0, n).to(at::kDouble).t(), at::softmax(sc, 0));
        EXPECT_LE(max_abs(got[b][t].narrow(0, h * d, d), o.to(at::kFloat)), 1e-5) << b << " " << t << " " << h;
      }
}

// The next attention run's lines (decoders/line_feed.h): the cursor gives every line of the keys,
// then of the values, row by row (a row of 160 bytes is 3 lines), skipping an empty span; the feed
// issues them in proportion to the steps taken — all of them by the last step, even where lines x
// 65536 / steps is not whole — and never more.
TEST(LineFeed, CursorWalksKeysThenValuesRowByRow) {
  std::vector<char> buf(4096);
  const char* kb = buf.data();
  const char* vb = buf.data() + 2048;
  const ears::NextKV kv{ears::RowSpan{kb, 3, 256, 160}, ears::RowSpan{vb, 2, 200, 64}};
  std::vector<const char*> want;
  for (int r = 0; r < 3; ++r)
    for (int off : {0, 64, 128}) want.push_back(kb + r * 256 + off);
  for (int r = 0; r < 2; ++r) want.push_back(vb + r * 200);
  ears::LineCursor c(kv);
  std::vector<const char*> got;
  for (const char* p = c.next(); p; p = c.next()) got.push_back(p);
  EXPECT_EQ(got, want);
  ears::LineCursor values_only(ears::NextKV{ears::RowSpan{}, kv.v});
  EXPECT_EQ(values_only.next(), vb);
  EXPECT_EQ(values_only.next(), vb + 200);
  EXPECT_EQ(values_only.next(), nullptr);
  EXPECT_EQ(ears::LineCursor(ears::NextKV{}).next(), nullptr);
}

TEST(LineFeed, IssuesInProportionToStepsAndAllByTheLast) {
  std::vector<char> buf(4096);
  const ears::NextKV kv{ears::RowSpan{buf.data(), 10, 64, 64}, ears::RowSpan{buf.data() + 1024, 3, 128, 128}};  // 16
  ears::LineFeed feed(&kv, 48);  // a third of a line per step
  feed.step(24);
  EXPECT_EQ(feed.issued(), 8);
  feed.step(23);
  EXPECT_EQ(feed.issued(), 15);
  feed.step();
  EXPECT_EQ(feed.issued(), 16);
  feed.step(100);
  feed.finish();
  EXPECT_EQ(feed.issued(), 16);
  ears::LineFeed rest(&kv, 1000);
  rest.step(10);
  rest.finish();
  EXPECT_EQ(rest.issued(), 16);
  ears::LineFeed none;
  none.step(1000);
  none.finish();
  EXPECT_EQ(none.issued(), 0);
}

// oneDNN's ISA names, any case: below AVX-512 switches oneDNN off (decoders/runtime.h) and makes
// native_bf16() false; AVX-512 and AVX10 caps, or none, change nothing.
TEST(KernelPath, OneDnnCapsBelowAvx512AreRecognised) {
  ears::kernels::CpuInfo c;
  for (const char* below : {"AVX2", "avx2", "Avx2_Vnni", "AVX2_VNNI_2", "AVX", "SSE41"}) {
    c.onednn_cap = below;
    EXPECT_TRUE(c.onednn_below_avx512()) << below;
  }
  for (const char* not_below : {"", "AVX512_CORE", "avx512_core_bf16", "AVX512_CORE_AMX", "AVX10_1_512", "ALL"}) {
    c.onednn_cap = not_below;
    EXPECT_FALSE(c.onednn_below_avx512()) << not_below;
  }
}

TEST(KernelPath, EnvironmentCapsThePathAndRejectsUnknownNames) {
  EXPECT_EQ(ears::kernels::parse_path("avx2", "x"), ears::kernels::Path::avx2);
  try {
    ears::kernels::parse_path("avx3", "EARS_KERNELS");
    ADD_FAILURE() << "no error";
  } catch (const ears::Error& e) {
    EXPECT_NE(std::string(e.what()).find("EARS_KERNELS: unknown kernel path 'avx3'"), std::string::npos) << e.what();
  }
  if (ears::kernels::best_path() != ears::kernels::Path::amx) {
    EXPECT_THROW(ears::kernels::set_path(ears::kernels::Path::amx), ears::Error);
  }
  EXPECT_NE(ears::kernels::cpu_info().isa(), "");
}

// ---------------------------------------------------------------------------------------------
// Qwen2 / Llama bias paths on a tiny random checkpoint written here

namespace {

void write_safetensors(const fs::path& path, const std::map<std::string, at::Tensor>& tensors) {
  json header = json::object();
  std::string data;
  for (const auto& [name, t0] : tensors) {  // std::map: sorted names
    const at::Tensor t = t0.to(at::kFloat).contiguous();
    const size_t begin = data.size();
    data.append(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()) * 4);
    header[name] = {{"dtype", "F32"}, {"shape", t.sizes().vec()}, {"data_offsets", {begin, data.size()}}};
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string h = header.dump();
  while ((8 + h.size()) % 8 != 0) h.push_back(' ');
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

struct TinyDims {
  int64_t V = 50, D = 32, I = 48, N = 2, H = 4, K = 2, hd = 8;
};

std::map<std::string, at::Tensor> random_weights(const TinyDims& d, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto r = [&](std::vector<int64_t> s, double sd = 0.2) { return at::randn(s, gen, at::kFloat) * sd; };
  std::map<std::string, at::Tensor> w;
  w["model.embed_tokens.weight"] = r({d.V, d.D}, 1.0);
  w["model.norm.weight"] = 1 + r({d.D}, 0.1);
  w["lm_head.weight"] = r({d.V, d.D});
  for (int64_t i = 0; i < d.N; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    w[p + "input_layernorm.weight"] = 1 + r({d.D}, 0.1);
    w[p + "post_attention_layernorm.weight"] = 1 + r({d.D}, 0.1);
    w[p + "self_attn.q_proj.weight"] = r({d.H * d.hd, d.D});
    w[p + "self_attn.k_proj.weight"] = r({d.K * d.hd, d.D});
    w[p + "self_attn.v_proj.weight"] = r({d.K * d.hd, d.D});
    w[p + "self_attn.o_proj.weight"] = r({d.D, d.H * d.hd});
    w[p + "mlp.gate_proj.weight"] = r({d.I, d.D});
    w[p + "mlp.up_proj.weight"] = r({d.I, d.D});
    w[p + "mlp.down_proj.weight"] = r({d.D, d.I});
  }
  return w;
}

fs::path write_model(const std::string& tag, const std::string& arch, const TinyDims& d, bool attention_bias,
                     const std::map<std::string, at::Tensor>& w) {
  const fs::path dir = fs::temp_directory_path() / ("ears_model_test_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const json cfg = {{"architectures", {arch}},       {"vocab_size", d.V},          {"hidden_size", d.D},
                    {"intermediate_size", d.I},      {"num_hidden_layers", d.N},   {"num_attention_heads", d.H},
                    {"num_key_value_heads", d.K},    {"head_dim", d.hd},           {"rms_norm_eps", 1e-6},
                    {"rope_theta", 10000.0},         {"attention_bias", attention_bias},
                    {"tie_word_embeddings", false},  {"torch_dtype", "float32"},   {"hidden_act", "silu"}};
  std::ofstream(dir / "config.json") << cfg.dump(2);
  write_safetensors(dir / "model.safetensors", w);
  return dir;
}

}  // namespace

TEST(BiasPaths, Qwen2AndLlamaBiasesAreLoadedAndUsed) {
  const TinyDims d;
  const auto w = random_weights(d, 11);
  const at::Tensor ids = at::tensor(std::vector<int64_t>{3, 17, 42, 8, 0, 49, 21}, at::kLong).view({1, -1});

  const fs::path llama_dir = write_model("llama", "LlamaForCausalLM", d, false, w);
  const at::Tensor plain = CausalLM::load(llama_dir).forward(ids).logits;

  // Qwen2 always has q/k/v biases; zero biases == no biases.
  auto wq = w;
  for (int64_t i = 0; i < d.N; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".self_attn.";
    wq[p + "q_proj.bias"] = at::zeros({d.H * d.hd});
    wq[p + "k_proj.bias"] = at::zeros({d.K * d.hd});
    wq[p + "v_proj.bias"] = at::zeros({d.K * d.hd});
  }
  const fs::path qwen2_dir = write_model("qwen2", "Qwen2ForCausalLM", d, false, wq);
  EXPECT_LE(max_abs(CausalLM::load(qwen2_dir).forward(ids).logits, plain), 1e-6);

  // A v bias adds the same vector to every attention output (softmax rows sum to 1), i.e. it is
  // equivalent to an o_proj bias of W_o @ repeat_kv(b_v): Qwen2(v bias) == Llama(o bias).
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  auto wl = w;
  for (int64_t i = 0; i < d.N; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".self_attn.";
    const at::Tensor bv = at::randn({d.K * d.hd}, gen, at::kFloat);
    wq[p + "v_proj.bias"] = bv;
    const at::Tensor per_head = bv.view({d.K, d.hd}).repeat_interleave(d.H / d.K, 0).reshape({-1});
    wl[p + "o_proj.bias"] = at::mv(w.at(p + "o_proj.weight"), per_head);
    wl[p + "q_proj.bias"] = at::zeros({d.H * d.hd});
    wl[p + "k_proj.bias"] = at::zeros({d.K * d.hd});
    wl[p + "v_proj.bias"] = at::zeros({d.K * d.hd});
  }
  write_model("qwen2", "Qwen2ForCausalLM", d, false, wq);
  const at::Tensor qwen2_v = CausalLM::load(qwen2_dir).forward(ids).logits;
  EXPECT_GT(max_abs(qwen2_v, plain), 1e-2);  // the bias matters
  const fs::path llama_b_dir = write_model("llama_b", "LlamaForCausalLM", d, true, wl);
  EXPECT_LE(max_abs(CausalLM::load(llama_b_dir).forward(ids).logits, qwen2_v), 1e-4);

  // A Qwen2 checkpoint without its biases is an error naming the tensor.
  write_model("qwen2", "Qwen2ForCausalLM", d, false, w);
  const std::string msg = load_error(qwen2_dir);
  EXPECT_NE(msg.find("model.layers.0.self_attn.q_proj.bias"), std::string::npos) << msg;
  for (const auto& p : {llama_dir, qwen2_dir, llama_b_dir}) fs::remove_all(p);
}

namespace ears {
namespace {

uint64_t checkpoint_numel(const std::filesystem::path& dir) {
  uint64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    const std::string bytes = test::read_file(e.path());
    const auto header = parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                                 e.path().string());
    for (const auto& t : header.tensors) total += t.numel();
  }
  return total;
}

// report.md's toy-model banner and size line rest on this count: it must equal the tensors a
// real checkpoint holds (tied and single/sharded files), and count biases, untied heads and
// q/k norms by hand for the other architectures.
TEST(ModelConfigFacts, ParameterCountEqualsTheCheckpointsTensors) {
  const auto bundled = test::source_dir() / "models" / "tiny-qwen3";
  EXPECT_EQ(static_cast<uint64_t>(ModelConfig::load(bundled).parameter_count()), checkpoint_numel(bundled));
  if (!test::shared_dir().empty())
    for (const char* f : {"qwen3-tiny", "qwen3-tiny-sharded"}) {
      const auto dir = test::shared_dir() / "fixtures" / f;
      if (!std::filesystem::exists(dir)) continue;
      EXPECT_EQ(static_cast<uint64_t>(ModelConfig::load(dir).parameter_count()), checkpoint_numel(dir)) << f;
    }
  // Qwen2-style: q/k/v biases, untied head, no q/k norm. h 8, 2 heads of 4, 1 KV head, I 16, V 10, 2 layers.
  const ModelConfig qwen2 = ModelConfig::parse(
      R"({"architectures": ["Qwen2ForCausalLM"], "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
          "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "tie_word_embeddings": false,
          "rms_norm_eps": 1e-6, "rope_theta": 10000, "max_position_embeddings": 64})",
      "qwen2");
  const int64_t per_layer = 8 * 8 + 2 * (8 * 4) + (8 + 4 + 4) + 8 * 8 + 3 * 16 * 8 + 2 * 8;  // q, k+v, biases, o, mlp, norms
  EXPECT_EQ(qwen2.parameter_count(), 2 * 10 * 8 + 2 * per_layer + 8);
}

}  // namespace
}  // namespace ears

namespace ears {
namespace {

// LibTorch >= 2.1's fused attention (the accelerator path) against the eager path, on the CPU:
// same GQA layout, same mask; fp32 within 1e-5, bf16 within bf16 rounding.
TEST(AttentionPaths, FusedSdpaMatchesEager) {
#ifdef EARS_HAVE_SDPA
  at::manual_seed(3);
  const int64_t B = 2, T = 5, H = 4, K = 2, S = 9, hd = 8;
  const at::Tensor q = at::randn({B, T, H, hd}), k = at::randn({B, K, S, hd}), v = at::randn({B, K, S, hd});
  // Row b sees keys s <= positions[b, t]: a ragged KV cache (b = 0 at length 4, b = 1 at 7).
  const at::Tensor pos = at::arange(T).view({1, T}) + at::tensor({4L, 7L}).view({B, 1}) - (T - 1);
  const at::Tensor blocked = at::arange(S).view({1, 1, S}) > pos.view({B, T, 1});
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const at::Tensor eager = layers::attention_eager(q, k, v, blocked, scale);
  const at::Tensor fused = layers::attention_sdpa(q, k, v, blocked, scale);
  EXPECT_LE((eager - fused).abs().max().item<double>(), 1e-5);
  const auto bf = [](const at::Tensor& x) { return x.to(at::kBFloat16); };
  const at::Tensor fused16 = layers::attention_sdpa(bf(q), bf(k), bf(v), blocked, scale).to(at::kFloat);
  EXPECT_LE((eager - fused16).abs().max().item<double>(), 0.05);
#else
  GTEST_SKIP() << "LibTorch " << TORCH_VERSION << " < 2.1: no at::scaled_dot_product_attention (the eager path runs)";
#endif
}

}  // namespace
}  // namespace ears
