#include "decoders/layers.h"

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/pow.h>
#if __has_include(<ATen/ops/scaled_dot_product_attention.h>)  // LibTorch >= 2.0 (EARS_HAVE_SDPA: >= 2.1)
#include <ATen/ops/scaled_dot_product_attention.h>
#endif
#include <ATen/ops/silu.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/where.h>
#include <torch/csrc/api/include/torch/version.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "decoders/aten_operators.h"
#include "decoders/cpu_avx2.h"
#include "decoders/cpu_bf16.h"
#include "decoders/kernel_path.h"
#include "decoders/line_feed.h"
#include "decoders/weight_memory.h"
#include "decoders/work_pool.h"
#include "harness/base/error.h"

namespace ears {
namespace layers {

namespace {
// The kernels' loops: decoders/work_pool.h's loop on as many threads as LibTorch's intra-op setting
// (decoders/runtime.h's set_threads). Under at::parallel_for's OpenMP region the caller joined every
// thread, waiting out a worker's wake (35-65 us on these VMs once it slept) or a vCPU another process
// held: with `yes` on one of 2 vCPUs and --threads 2, the 100M decode went 18.4 -> 13.1 ms and the
// bundled pair's T = 0 EAGLE-3 run 540-935 -> 2390-2550 tok/s (docs/performance-log.md, thirty-third
// session).
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  work_pool::parallel_for(at::get_num_threads(), begin, end, grain, f);
}

// Bounds for the two kernels that are not used for every size (decoders/cpu_bf16.h):
//  - row dots for a linear with a PLAIN weight (CPUs with AVX-512 BF16 but no AMX; prepared
//    weights on AMX CPUs take amx_gemm at any size): at most 8 rows, where they beat LibTorch's
//    GEMM 1.3-2x (measured, 768 -> 4096 and 768 -> 32000); at 16 rows they were 1.1-1.7x slower.
//    The two round differently, so on such CPUs T=0 identity holds only while every forward of a
//    sequence stays on one side (batch 1, gamma <= 7); EARS_NO_CPU_KERNELS=1 restores it;
//  - attention: at most 16 new tokens per sequence (decode steps and verification of gamma <= 15
//    drafts, at any batch size); longer prefills take the ATen path, the same in every arm.
constexpr int64_t kRowDotMaxRows = 8;
constexpr int64_t kAttentionMaxTokens = 16;
// Attention splits its (b, KV head, t) items over the threads when each thread gets at least this
// many query-row x key x head_dim products (~10-20 us of work): a 1-token decode of the 100M
// bench model (4 KV heads x 3 query rows x 129 keys x 64) splits in two, 20 -> 14 us per layer
// (Intel Xeon), where it had run on one thread while the other's OpenMP worker waited.
constexpr int64_t kAttentionForkWork = 32 * 1024;
// Items per thread for attention items of `item_work` such products each.
int64_t attention_grain(int64_t item_work) {
  return std::max<int64_t>(1, (kAttentionForkWork + item_work - 1) / std::max<int64_t>(1, item_work));
}
// cpu_avx2's float32 attend_rows (named: the overload set is taken by its address).
using F32AttendRows = void (*)(const float*, int64_t, int64_t, int64_t, const int64_t*, const float*, int64_t,
                               const float*, int64_t, int64_t, float, float*, int64_t, const NextKV*);

// The bf16 row kernels of the kernel path in effect (decoders/kernel_path.h); null on aten.
struct Bf16RowKernels {
  decltype(&cpu_bf16::rms_norm_rows) rms_norm_rows;
  decltype(&cpu_bf16::rope_rows) rope_rows;
  decltype(&cpu_bf16::attend_rows) attend_rows;     // the rows sharing one KV head
  decltype(&cpu_bf16::swiglu_rows) swiglu_rows;     // the same bits on every path
  PackedLayout layout;                             // the layout this path's linear reads:
  decltype(&cpu_bf16::amx_packed_elems) packed_elems;  // its size,
  decltype(&cpu_bf16::amx_pack) pack;                  // the packing at load,
  decltype(&cpu_bf16::amx_gemm) packed_gemm;           // the product over it,
  int64_t block_rows;                                  // over ranges of blocks of this many rows
  int64_t attention_max_tokens;                    // longer prefills take ATen (AMX tiles there)
};
const Bf16RowKernels* bf16_kernels() {
  constexpr PackedLayout tiles = PackedLayout::bf16_amx_tiles;
  static const Bf16RowKernels amx{cpu_bf16::rms_norm_rows, cpu_bf16::rope_rows,
                                  cpu_bf16::attend_rows,   cpu_bf16::swiglu_rows,
                                  tiles,                   cpu_bf16::amx_packed_elems,
                                  cpu_bf16::amx_pack,      cpu_bf16::amx_gemm,          32,
                                  kAttentionMaxTokens};
  static const Bf16RowKernels vnni{cpu_bf16::rms_norm_rows, cpu_bf16::rope_rows,
                                   cpu_bf16::attend_rows,   cpu_bf16::swiglu_rows,
                                   tiles,                   cpu_bf16::amx_packed_elems,
                                   cpu_bf16::amx_pack,      cpu_bf16::vnni_gemm,         32,
                                   std::numeric_limits<int64_t>::max()};
  // Without AMX, attention takes the kernel at any length: on avx512bf16 ATen's eager attention
  // (scores over the whole cache, masked) made a 76-token prefill of the bundled target 10.6 ms, the
  // kernel 6.7 (attention 3.45 -> 0.43 ms; Intel Xeon without AMX, docs/performance-log.md, 11-29);
  // on avx2 ATen's bf16 matmul is emulated.
  static const Bf16RowKernels avx2{cpu_avx2::rms_norm_rows,       cpu_avx2::rope_rows,
                                   cpu_avx2::attend_rows,         cpu_avx2::swiglu_rows,
                                   PackedLayout::bf16_panels,     cpu_avx2::panel_bf16_elems,
                                   cpu_avx2::panel_bf16_pack,     cpu_avx2::gemm_bf16,
                                   cpu_avx2::kPanelGroupRows,     std::numeric_limits<int64_t>::max()};
  switch (kernels::path()) {
    case kernels::Path::amx: return &amx;
    case kernels::Path::avx512bf16: return &vnni;
    case kernels::Path::avx2: return &avx2;
    default: return nullptr;
  }
}

// The layout the bf16 linear of the path in effect reads (none on aten).
PackedLayout bf16_layout() {
  const Bf16RowKernels* k = bf16_kernels();
  return k ? k->layout : PackedLayout::none;
}

// A bf16 CPU tensor outside autograd, and a kernel path is on: its row kernels may take it.
bool cpu_bf16_tensor(const at::Tensor& x) {
  return x.device().is_cpu() && x.scalar_type() == at::kBFloat16 &&
         !(at::GradMode::is_enabled() && x.requires_grad()) && bf16_kernels() != nullptr;
}
// Or a float32 one: cpu_avx2's float32 row kernels run on every path but aten.
bool cpu_f32_tensor(const at::Tensor& x) {
  return x.device().is_cpu() && x.scalar_type() == at::kFloat && !(at::GradMode::is_enabled() && x.requires_grad()) &&
         kernels::path() != kernels::Path::aten;
}
bool cpu_kernel_tensor(const at::Tensor& x) { return cpu_bf16_tensor(x) || cpu_f32_tensor(x); }


// Stride between tokens (b, t) -> b * T + t when x [B, T, n, D] holds each token's n rows of D
// elements contiguously one after another (contiguous, or a head view of a wider projection such
// as q and k inside the fused qkv); -1 otherwise. A size-1 dimension's stride is whatever the view
// made it (a batched decode's [B, 1, n, D] head view of qkv has stride(1) = n * D, not the
// projection's width), so it is never compared.
int64_t token_stride(const at::Tensor& x) {
  if (x.dim() != 4 || x.stride(3) != 1 || (x.size(2) > 1 && x.stride(2) != x.size(3))) return -1;
  const int64_t B = x.size(0), T = x.size(1);
  if (T == 1) return B == 1 ? 0 : x.stride(0);
  if (B != 1 && x.stride(0) != T * x.stride(1)) return -1;
  return x.stride(1);
}

// Splits `rows` rows of `row_elems` elements (RMSNorm, RoPE, SwiGLU, adds) over the threads, at
// least kRowGrain elements per thread; fewer run on the calling thread. A 16-sequence decode step's
// element-wise rows ran serially between the parallel linears, long enough (10-40 us) for the idle
// worker to go to sleep (at the then GOMP_SPINCOUNT=1000, harness/run/environment.h) and need waking
// at the next linear; split, the step was 0.5-1.5 ms faster and the 6-token verify ~0.5 ms (Zen 4,
// `avx2`, 100M model; docs/performance-log.md, "2026-11-25, fourteenth session"). A 1-token decode's
// rows stay serial.
constexpr int64_t kRowGrain = 4096;
template <class F>
void for_rows(int64_t rows, int64_t row_elems, const F& f) {
  const int64_t grain = std::max<int64_t>(1, kRowGrain / std::max<int64_t>(1, row_elems));
  if (rows <= grain) return f(int64_t{0}, rows);
  parallel_for(0, rows, grain, f);
}

const uint16_t* bits(const at::Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr()); }
uint16_t* bits_mut(at::Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr()); }

}  // namespace

std::string kernel_path_name(c10::Device device, c10::ScalarType dtype) {
  if (!device.is_cpu()) return c10::DeviceTypeName(device.type(), /*lower_case=*/true);
  const kernels::Path p = kernels::path();
  if (dtype == at::kBFloat16) return kernels::path_name(p);
  if (dtype == at::kFloat && p != kernels::Path::aten) return kernels::path_name(kernels::Path::avx2);
  return kernels::path_name(kernels::Path::aten);
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const int64_t D = x.size(-1);
  const bool per_inner = weight.dim() == 2;  // [inner, D]: one weight row per x.size(-2) index
  const int64_t inner = per_inner ? weight.size(0) : 1;
  if (D > 0 && x.numel() > 0 && cpu_kernel_tensor(x) && weight.scalar_type() == x.scalar_type() &&
      weight.is_contiguous() && weight.size(-1) == D && (!per_inner || (x.dim() >= 3 && x.size(-2) == inner)) &&
      !(at::GradMode::is_enabled() && weight.requires_grad())) {
    // Rows as [outer, inner, D]: a contiguous x, or a [B, T, n, D] view of a wider projection
    // (the q and k heads of the fused qkv) whose D-element rows are contiguous.
    const int64_t outer = x.numel() / (inner * D);
    int64_t outer_stride = -1;
    if (x.is_contiguous()) {
      outer_stride = inner * D;
    } else if (per_inner || (x.dim() == 4 && x.size(2) == 1)) {
      outer_stride = token_stride(x);
    }
    if (outer_stride >= 0) {
      at::Tensor y = at::empty(x.sizes(), x.options());
      const float feps = static_cast<float>(eps);
      for_rows(outer, inner * D, [&](int64_t o0, int64_t o1) {
        if (x.scalar_type() == at::kFloat) {
          cpu_avx2::rms_norm_rows(x.data_ptr<float>() + o0 * outer_stride, o1 - o0, outer_stride, inner, D,
                                  weight.data_ptr<float>(), per_inner, feps, y.data_ptr<float>() + o0 * inner * D);
        } else {
          bf16_kernels()->rms_norm_rows(bits(x) + o0 * outer_stride, o1 - o0, outer_stride, inner, D, bits(weight),
                                        per_inner, feps, bits_mut(y) + o0 * inner * D);
        }
      });
      return y;
    }
  }
  const at::Tensor xf = x.to(at::kFloat);  // no copy when x is already fp32
  const at::Tensor inv = xf.pow(2).mean(-1, /*keepdim=*/true).add_(eps).rsqrt_();
  at::Tensor y = xf * inv;
  if (x.scalar_type() != at::kFloat) y = y.to(x.scalar_type());
  return y.mul_(weight);
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  const c10::optional<at::Tensor> b = bias.defined() ? c10::optional<at::Tensor>(bias) : c10::nullopt;
  const int64_t in = x.size(-1);
  const int64_t rows = in == 0 ? 0 : x.numel() / in;
  std::vector<int64_t> out_sizes(x.sizes().begin(), x.sizes().end());
  out_sizes.back() = w.size(0);
  if (rows > 0 && rows <= kRowDotMaxRows && cpu_bf16_tensor(x) && cpu_bf16::available() && w.scalar_type() == at::kBFloat16 && w.dim() == 2 &&
      w.size(1) == in && w.is_contiguous() && !(at::GradMode::is_enabled() && w.requires_grad()) &&
      (!bias.defined() || (bias.scalar_type() == at::kBFloat16 && bias.is_contiguous()))) {
    const at::Tensor x2 = x.reshape({rows, in}).contiguous();
    const int64_t N = w.size(0);
    at::Tensor y = at::empty({rows, N}, x.options());
    const uint16_t* xb = bits(x2);
    const uint16_t* wb = bits(w);
    const uint16_t* bb = bias.defined() ? bits(bias) : nullptr;
    uint16_t* yb = bits_mut(y);
    parallel_for(0, N, 64, [&](int64_t n0, int64_t n1) {
      cpu_bf16::gemm_nt(xb, in, rows, wb, in, in, bb, yb, N, n0, n1);
    });
    return y.view(out_sizes);
  }
  const bool reduced = x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf;
  if (reduced && rows == 1) {
    // Row-count-invariant rounding. For a single row, LibTorch's reduced-precision GEMM takes a
    // matrix-vector path that accumulates in another order than the multi-row kernel (measured
    // on LibTorch 1.13 bf16: rows of a 1-row product differ from the same rows of a 2..48-row
    // product, rows of 2..48-row products agree). A batch-1 decode step would then round
    // differently from the same token inside a γ+1-token verification, and T=0 speculative
    // decoding would drift from target-only greedy. Two rows take the GEMM path; keep the first.
    return at::linear(x.reshape({1, in}).expand({2, in}), w, b).narrow(0, 0, 1).reshape(out_sizes);
  }
  return at::linear(x, w, b);
}

namespace {
// The SwiGLU kernel of the path in effect: bf16 on cpu_bf16's (amx, avx512bf16) or cpu_avx2's, which
// give the same bits; float32 on cpu_avx2's everywhere.
void swiglu_kernel(const uint16_t* gate_up, int64_t rows, int64_t I, uint16_t* act) {
  bf16_kernels()->swiglu_rows(gate_up, rows, I, act);
}
void swiglu_kernel(const float* gate_up, int64_t rows, int64_t I, float* act) {
  cpu_avx2::swiglu_rows(gate_up, rows, I, act);
}
// silu(gate) * up over `rows` rows of [gate | up] (2 * I elements) into rows of I, split like
// the other element-wise rows: the kernel silu_mlp's raw path and swiglu_rows take too.
template <class E>
void swiglu_into(const E* gate_up, int64_t rows, int64_t I, E* act) {
  for_rows(rows, 2 * I, [=](int64_t r0, int64_t r1) { swiglu_kernel(gate_up + r0 * 2 * I, r1 - r0, I, act + r0 * I); });
}

// silu(gate) * up. On a CPU kernel path one pass of the SwiGLU kernel (LibTorch's bf16 silu
// and mul are two single-threaded passes: 1.2 ms of a 16-sequence decode step of the 100M model).
at::Tensor swiglu(const at::Tensor& gate_up) {
  const int64_t inter = gate_up.size(-1) / 2;
  if (cpu_kernel_tensor(gate_up) && gate_up.is_contiguous() && gate_up.numel() > 0) {
    std::vector<int64_t> sizes = gate_up.sizes().vec();
    sizes.back() = inter;
    at::Tensor act = at::empty(sizes, gate_up.options());
    const int64_t rows = gate_up.numel() / (2 * inter);
    if (gate_up.scalar_type() == at::kFloat)
      swiglu_into(gate_up.data_ptr<float>(), rows, inter, act.data_ptr<float>());
    else
      swiglu_into(bits(gate_up), rows, inter, bits_mut(act));
    return act;
  }
  at::Tensor act = at::silu(gate_up.narrow(-1, 0, inter));
  return act.mul_(gate_up.narrow(-1, inter, inter));
}

// True when x's rows may go through lw's packed kernel: a CPU tensor outside autograd, in the
// packed weight's dtype, and the weight packed in the layout the kernel path in effect reads.
bool packed_kernel_takes(const at::Tensor& x, const LinearWeight& lw) {
  if (!lw.packed.defined() || !x.device().is_cpu() || x.scalar_type() != lw.packed.scalar_type() ||
      (at::GradMode::is_enabled() && x.requires_grad()))
    return false;
  if (x.scalar_type() == at::kFloat) return kernels::path() != kernels::Path::aten && lw.layout == PackedLayout::f32_panels;
  return bf16_layout() == lw.layout;
}
}  // namespace

void residual_add_(at::Tensor& h, const at::Tensor& x) {
  if (h.numel() > 0 && cpu_kernel_tensor(h) && x.scalar_type() == h.scalar_type() && x.device() == h.device() &&
      x.sizes() == h.sizes() && h.is_contiguous() && x.is_contiguous() &&
      !(at::GradMode::is_enabled() && x.requires_grad())) {
    const int64_t D = h.size(-1), rows = h.numel() / D;
    for_rows(rows, D, [&](int64_t r0, int64_t r1) {
      if (h.scalar_type() == at::kFloat) {
        cpu_avx2::add_into(x.data_ptr<float>() + r0 * D, (r1 - r0) * D, h.data_ptr<float>() + r0 * D);
      } else {
        cpu_avx2::add_into(bits(x) + r0 * D, (r1 - r0) * D, bits_mut(h) + r0 * D);
      }
    });
    return;
  }
  h.add_(x);
}

at::Tensor silu_mlp(const at::Tensor& x, const at::Tensor& gate_up_w, const at::Tensor& down_w,
                    const at::Tensor& gate_up_b, const at::Tensor& down_b) {
  return linear(swiglu(linear(x, gate_up_w, gate_up_b)), down_w, down_b);
}

namespace {
// silu_mlp on a CPU kernel path: both linears and SwiGLU on raw rows (the kernels linear() and
// swiglu() call, so the same rounding) through scratch arrays, without their ATen ops — reshape,
// contiguous, empty, view: ~4-6 us a layer on the bundled pair (docs/performance-log.md,
// thirty-seventh session).
template <class E>
at::Tensor silu_mlp_rows(const at::Tensor& x, const LinearWeight& gate_up, const LinearWeight& down) {
  const int64_t I = down.in_features, rows = x.numel() / gate_up.in_features;
  const std::unique_ptr<E[]> gu(new E[static_cast<size_t>(rows * 2 * I)]), act(new E[static_cast<size_t>(rows * I)]);
  E* const g = gu.get();
  E* const a = act.get();
  linear_rows(static_cast<const E*>(x.data_ptr()), rows, gate_up, g);
  swiglu_into(g, rows, I, a);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = down.out_features;
  at::Tensor y = at::empty(sizes, x.options());
  linear_rows(a, rows, down, static_cast<E*>(y.data_ptr()));
  return y;
}

// True when x is contiguous and both weights' packed kernels take it.
bool mlp_rows_ready(const at::Tensor& x, const LinearWeight& gate_up, const LinearWeight& down) {
  return x.is_contiguous() && x.numel() > 0 && x.size(-1) == gate_up.in_features &&
         gate_up.out_features == 2 * down.in_features && packed_kernel_takes(x, gate_up) && packed_kernel_takes(x, down);
}
}  // namespace

at::Tensor silu_mlp(const at::Tensor& x, const LinearWeight& gate_up, const LinearWeight& down) {
  if (mlp_rows_ready(x, gate_up, down))
    return x.scalar_type() == at::kFloat ? silu_mlp_rows<float>(x, gate_up, down)
                                         : silu_mlp_rows<uint16_t>(x, gate_up, down);
  return linear(swiglu(linear(x, gate_up)), down);
}

LinearWeight prepare_linear(const at::Tensor& w, const at::Tensor& bias) {
  if (!w.defined() || w.dim() != 2) fail("prepare_linear: the weight must be a 2-D [out, in] tensor");
  LinearWeight lw;
  lw.bias = bias;
  lw.out_features = w.size(0);
  lw.in_features = w.size(1);
  const kernels::Path path = kernels::path();
  const bool cpu_weight = w.device().is_cpu() && !w.requires_grad() && path != kernels::Path::aten;
  if (cpu_weight && w.scalar_type() == at::kBFloat16) {
    // In the layout of this path's kernel; it reads the bias as bf16 bits.
    const Bf16RowKernels& k = *bf16_kernels();
    if (bias.defined()) lw.bias = bias.to(at::kBFloat16).contiguous();
    const at::Tensor dense = w.contiguous();
    lw.packed = weight_memory::empty(k.packed_elems(lw.out_features, lw.in_features), at::kBFloat16);
    k.pack(bits(dense), lw.out_features, lw.in_features, bits_mut(lw.packed));
    lw.layout = k.layout;
  } else if (cpu_weight && w.scalar_type() == at::kFloat) {
    if (bias.defined()) lw.bias = bias.to(at::kFloat).contiguous();
    const at::Tensor dense = w.contiguous();
    lw.packed = weight_memory::empty(cpu_avx2::panel_f32_elems(lw.out_features, lw.in_features), at::kFloat);
    cpu_avx2::panel_f32_pack(dense.data_ptr<float>(), lw.out_features, lw.in_features, lw.packed.data_ptr<float>());
    lw.layout = PackedLayout::f32_panels;
  } else {
    lw.w = w;
  }
  return lw;
}

at::Tensor LinearWeight::dense() const {
  if (!packed.defined()) return w;
  at::Tensor out = at::empty({out_features, in_features}, packed.options());
  switch (layout) {
    case PackedLayout::f32_panels:
      cpu_avx2::panel_f32_unpack(packed.data_ptr<float>(), out_features, in_features, out.data_ptr<float>());
      break;
    case PackedLayout::bf16_panels:
      cpu_avx2::panel_bf16_unpack(bits(packed), out_features, in_features, bits_mut(out));
      break;
    case PackedLayout::bf16_amx_tiles:
      cpu_bf16::amx_unpack(bits(packed), out_features, in_features, bits_mut(out));
      break;
    case PackedLayout::none: fail("LinearWeight::dense: a packed weight without its layout");
  }
  return out;
}

namespace {
// Splits blocks of `block_rows` weight rows over the threads, at least ~256 KiB of weights
// per thread for one row of x, less for more rows (the work grows with the rows: a 6-row verify
// of the bundled tiny models' 128-768 KiB linears is compute, not a weight stream). Forking for
// less costs more than it saves.
template <class F>
void for_weight_blocks(int64_t N, int64_t K, int64_t rows, int64_t block_rows, int64_t elem_bytes, const F& f) {
  const int64_t work = block_rows * elem_bytes * K * std::min<int64_t>(rows, 8);
  const int64_t grain = std::max<int64_t>(1, (int64_t{256} << 10) / work);
  parallel_for(0, (N + block_rows - 1) / block_rows, grain, f);
}
}  // namespace

at::Tensor linear(const at::Tensor& x, const LinearWeight& lw) {
  if (!lw.packed.defined()) return linear(x, lw.w, lw.bias);
  const int64_t in = lw.in_features, N = lw.out_features;
  if (x.size(-1) != in)
    fail("linear: input has {} features but the weight expects {}", x.size(-1), in);
  if (!packed_kernel_takes(x, lw)) {
    const at::ScalarType wt = lw.packed.scalar_type();
    return at::linear(x.to(wt), lw.dense(), lw.bias.defined() ? c10::optional<at::Tensor>(lw.bias) : c10::nullopt);
  }
  const int64_t rows = x.numel() / in;
  std::vector<int64_t> out_sizes(x.sizes().begin(), x.sizes().end());
  out_sizes.back() = N;
  at::Tensor y = at::empty(out_sizes, x.options());  // rows x N, contiguous
  if (rows == 0) return y;
  // Rows read in place when contiguous (every ATen op here costs ~1 us on a small model's step).
  const at::Tensor x2 = x.is_contiguous() ? x : x.reshape({rows, in}).contiguous();
  if (x.scalar_type() == at::kFloat)
    linear_rows(x2.data_ptr<float>(), rows, lw, y.data_ptr<float>());
  else
    linear_rows(bits(x2), rows, lw, bits_mut(y));
  return y;
}

bool rows_available(c10::ScalarType dtype) {
  if (dtype == at::kFloat) return kernels::path() != kernels::Path::aten;
  return dtype == at::kBFloat16 && bf16_kernels() != nullptr;
}

void linear_rows(const uint16_t* x, int64_t rows, const LinearWeight& lw, uint16_t* y) {
  if (bf16_layout() != lw.layout) fail("linear_rows: the weight was not packed for the kernel path in effect");
  const int64_t in = lw.in_features, N = lw.out_features;
  const uint16_t* wb = bits(lw.packed);
  const uint16_t* bb = lw.bias.defined() ? bits(lw.bias) : nullptr;
  const Bf16RowKernels* k = bf16_kernels();
  for_weight_blocks(N, in, rows, k->block_rows, 2,
                    [&](int64_t nb0, int64_t nb1) { k->packed_gemm(x, in, rows, wb, N, in, bb, y, N, nb0, nb1); });
}

void linear_rows(const float* x, int64_t rows, const LinearWeight& lw, float* y) {
  const int64_t in = lw.in_features, N = lw.out_features;
  const float* wb = lw.packed.data_ptr<float>();
  const float* bb = lw.bias.defined() ? lw.bias.data_ptr<float>() : nullptr;
  for_weight_blocks(N, in, rows, 16, 4, [&](int64_t p0, int64_t p1) { cpu_avx2::gemm_f32(x, in, rows, wb, N, in, bb, y, N, p0, p1); });
}

void rms_norm_rows(const uint16_t* x, int64_t rows, int64_t x_stride, int64_t D, const uint16_t* w, float eps,
                   uint16_t* y) {
  bf16_kernels()->rms_norm_rows(x, rows, x_stride, 1, D, w, false, eps, y);
}
void rms_norm_rows(const float* x, int64_t rows, int64_t x_stride, int64_t D, const float* w, float eps, float* y) {
  cpu_avx2::rms_norm_rows(x, rows, x_stride, 1, D, w, false, eps, y);
}

void rope_rows(const uint16_t* x, int64_t tokens, int64_t x_stride, int64_t n_heads, int64_t hd, const uint16_t* cos,
               const uint16_t* sin, uint16_t* y) {
  bf16_kernels()->rope_rows(x, tokens, x_stride, n_heads, hd, cos, sin, y);
}
void rope_rows(const float* x, int64_t tokens, int64_t x_stride, int64_t n_heads, int64_t hd, const float* cos,
               const float* sin, float* y) {
  cpu_avx2::rope_rows(x, tokens, x_stride, n_heads, hd, cos, sin, y);
}

void swiglu_rows(const uint16_t* gate_up, int64_t rows, int64_t I, uint16_t* act) {
  swiglu_into(gate_up, rows, I, act);
}
void swiglu_rows(const float* gate_up, int64_t rows, int64_t I, float* act) { swiglu_into(gate_up, rows, I, act); }
void add_rows(const uint16_t* x, int64_t n, uint16_t* y) { cpu_avx2::add_into(x, n, y); }
void add_rows(const float* x, int64_t n, float* y) { cpu_avx2::add_into(x, n, y); }

namespace {
template <class E, class Kernel>
void attend_kv_heads(const E* q, int64_t ldq, int64_t T, int64_t K, int64_t G, const int64_t* n_keys, const E* k,
                     const E* v, int64_t kv_stride, int64_t hd, float scale, E* out, int64_t ldo, Kernel attend) {
  const int64_t grain = attention_grain(T * G * *std::max_element(n_keys, n_keys + T) * hd);  // per KV head
  parallel_for(0, K, grain, [&](int64_t h0, int64_t h1) {
    for (int64_t kh = h0; kh < h1; ++kh)
      attend(q + kh * G * hd, ldq, T, G, n_keys, k + kh * kv_stride, hd, v + kh * kv_stride, hd, hd, scale,
             out + kh * G * hd, ldo, nullptr);
  });
}
}  // namespace

void attend_rows(const uint16_t* q, int64_t ldq, int64_t T, int64_t K, int64_t G, const int64_t* n_keys,
                 const uint16_t* k, const uint16_t* v, int64_t kv_stride, int64_t hd, float scale, uint16_t* out,
                 int64_t ldo) {
  attend_kv_heads(q, ldq, T, K, G, n_keys, k, v, kv_stride, hd, scale, out, ldo, bf16_kernels()->attend_rows);
}
void attend_rows(const float* q, int64_t ldq, int64_t T, int64_t K, int64_t G, const int64_t* n_keys, const float* k,
                 const float* v, int64_t kv_stride, int64_t hd, float scale, float* out, int64_t ldo) {
  attend_kv_heads(q, ldq, T, K, G, n_keys, k, v, kv_stride, hd, scale, out, ldo,
                  static_cast<F32AttendRows>(cpu_avx2::attend_rows));
}

at::Tensor rope_inv_freq(int64_t head_dim, const RopeConfig& rope, c10::Device device) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  // HF: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all in fp32.
  const at::Tensor exponent = at::arange(0, head_dim, 2, f32.dtype(at::kLong)).to(at::kFloat).div_(
      static_cast<double>(head_dim));
  at::Tensor inv_freq = at::pow(rope.theta, exponent).reciprocal_();
  if (rope.type == "default") return inv_freq;
  if (rope.type == "linear") return inv_freq.div_(rope.factor);
  if (rope.type == "llama3") {
    // transformers _compute_llama3_parameters, same op order in fp32.
    const double old_ctx = static_cast<double>(rope.original_max_position_embeddings);
    const double low_freq_wavelen = old_ctx / rope.low_freq_factor;
    const double high_freq_wavelen = old_ctx / rope.high_freq_factor;
    const at::Tensor wavelen = inv_freq.reciprocal().mul_(2.0 * M_PI);
    const at::Tensor scaled =
        at::where(wavelen > low_freq_wavelen, inv_freq / rope.factor, inv_freq);
    const at::Tensor smooth = (wavelen.reciprocal() * old_ctx - rope.low_freq_factor) /
                              (rope.high_freq_factor - rope.low_freq_factor);
    const at::Tensor smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled;
    const at::Tensor medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
    return at::where(medium, smoothed, scaled);
  }
  fail("rope type '{}' is not supported (supported: default, linear, llama3)", rope.type);
}

RopeTables rope_tables(const at::Tensor& inv_freq, const at::Tensor& positions, c10::ScalarType dtype) {
  const at::Tensor angle = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;  // [B, T, hd/2]
  const at::Tensor emb = at::cat({angle, angle}, -1);
  RopeTables t;
  t.cos = emb.cos();
  t.sin = emb.sin();
  if (dtype != at::kFloat) {
    t.cos = t.cos.to(dtype);
    t.sin = t.sin.to(dtype);
  }
  return t;
}

RopeCache RopeCache::build(const at::Tensor& inv_freq, int64_t max_position_embeddings, c10::ScalarType dtype) {
  RopeCache c;
  c.inv_freq = inv_freq;
  c.dtype = dtype;
  const int64_t n = std::min<int64_t>(max_position_embeddings > 0 ? max_position_embeddings : 4096, 8192);
  const at::Tensor pos = at::arange(n, at::TensorOptions().dtype(at::kLong).device(inv_freq.device())).view({1, n});
  const RopeTables t = rope_tables(inv_freq, pos, dtype);
  c.table.cos = t.cos.view({n, -1});
  c.table.sin = t.sin.view({n, -1});
  return c;
}

RopeTables RopeCache::lookup(const at::Tensor& positions, int64_t span, int64_t uniform_start) const {
  const int64_t B = positions.size(0), T = positions.size(1), n = table.cos.size(0), hd = table.cos.size(1);
  if (uniform_start >= 0 && uniform_start + T <= n && B == 1)
    return {table.cos.narrow(0, uniform_start, T).view({1, T, hd}), table.sin.narrow(0, uniform_start, T).view({1, T, hd})};
  if (span <= n) {
    const at::Tensor flat = positions.reshape({-1});
    return {table.cos.index_select(0, flat).view({B, T, hd}), table.sin.index_select(0, flat).view({B, T, hd})};
  }
  return rope_tables(inv_freq, positions, dtype);
}

at::Tensor apply_rope(const at::Tensor& x, const RopeTables& rope) {
  // x: [B, T, n, hd]; cos/sin: [B, T, hd] -> broadcast over heads.
  const int64_t hd = x.size(-1);
  const at::ScalarType dt = x.scalar_type();
  const int64_t stride = x.dim() == 4 ? token_stride(x) : -1;
  if (x.dim() == 4 && x.numel() > 0 && hd % 2 == 0 && cpu_kernel_tensor(x) && stride >= 0 &&
      rope.cos.scalar_type() == dt && rope.sin.scalar_type() == dt && rope.cos.is_contiguous() &&
      rope.sin.is_contiguous() && rope.cos.numel() == x.size(0) * x.size(1) * hd && rope.sin.numel() == rope.cos.numel()) {
    at::Tensor y = at::empty(x.sizes(), x.options());
    const int64_t outer = x.size(0) * x.size(1);
    const int64_t n = x.size(2);
    for_rows(outer, n * hd, [&](int64_t o0, int64_t o1) {
      if (dt == at::kFloat) {
        cpu_avx2::rope_rows(x.data_ptr<float>() + o0 * stride, o1 - o0, stride, n, hd, rope.cos.data_ptr<float>() + o0 * hd,
                            rope.sin.data_ptr<float>() + o0 * hd, y.data_ptr<float>() + o0 * n * hd);
      } else {
        bf16_kernels()->rope_rows(bits(x) + o0 * stride, o1 - o0, stride, n, hd, bits(rope.cos) + o0 * hd,
                                  bits(rope.sin) + o0 * hd, bits_mut(y) + o0 * n * hd);
      }
    });
    return y;
  }
  const int64_t half = x.size(-1) / 2;
  const at::Tensor cos = rope.cos.unsqueeze(2);
  const at::Tensor sin = rope.sin.unsqueeze(2);
  const at::Tensor rotated = at::cat({x.narrow(-1, half, half).neg(), x.narrow(-1, 0, half)}, -1);
  at::Tensor out = x * cos;
  out.add_(rotated.mul_(sin));
  return out;
}

int64_t attention_kernel_tokens(c10::ScalarType dtype) {
  if (dtype == at::kFloat) return kernels::path() != kernels::Path::aten ? kAttentionMaxTokens : 0;
  const Bf16RowKernels* k = dtype == at::kBFloat16 ? bf16_kernels() : nullptr;
  return k ? k->attention_max_tokens : 0;
}

at::Tensor take_rows(const at::Tensor& t, const at::Tensor& rows) {
  std::vector<int64_t> shape = t.sizes().vec();
  shape[1] = rows.size(1);
  at::Tensor idx = rows;
  while (idx.dim() < t.dim()) idx = idx.unsqueeze(-1);
  return t.gather(1, idx.expand(shape));
}

namespace {

// Whether the CPU attention kernel takes this call: CPU f32 / bf16 tensors of one dtype, few enough
// query tokens for the kernel path, unit-stride head_dim <= 512, positions given, no autograd.
bool attention_kernel_applies(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& positions) {
  const int64_t T = q.size(1), hd = q.size(3);
  const int64_t max_tokens = cpu_f32_tensor(q) || cpu_bf16_tensor(q) ? attention_kernel_tokens(q.scalar_type()) : 0;
  return positions.defined() && T <= max_tokens && k.scalar_type() == q.scalar_type() &&
         v.scalar_type() == q.scalar_type() && k.stride(3) == 1 && v.stride(3) == 1 && hd <= 512 &&
         !(at::GradMode::is_enabled() && (k.requires_grad() || v.requires_grad()));
}

// Keys each query row (b, t) sees: positions[b, t] + 1 of the S, row-major [B * T].
// positions [B, T] read through its strides: the cache plans it as an expanded view when every
// sequence has the same length, and copying it (.contiguous()) was an ATen op of ~11 us per layer
// at 16 sequences (Intel Xeon masked to avx2).
std::vector<int64_t> visible_keys(const at::Tensor& positions, int64_t S) {
  const int64_t B = positions.size(0), T = positions.size(1);
  const at::Tensor pos = positions.scalar_type() == at::kLong ? positions : positions.to(at::kLong);
  const auto pos_at = pos.accessor<int64_t, 2>();
  std::vector<int64_t> n_keys(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) n_keys[b * T + t] = std::min<int64_t>(pos_at[b][t] + 1, S);
  return n_keys;
}

// The CPU kernel (attention_kernel_applies): one query row per (b, t, h) over its visible prefix
// of keys. Work items (b, KV head, t), each the G query heads sharing that KV head; a thread's
// consecutive items of one (b, KV head) go to the kernel together (they share its K and V).
at::Tensor attention_cpu_kernel(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                const at::Tensor& positions) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), hd = q.size(3);
  const int64_t K = k.size(1), S = k.size(2);
  const int64_t G = H / K;
  // q read in place when its tokens' H rows are contiguous (the q heads of the fused qk after
  // RoPE): the copy was one of ATen's parallel ops per layer at 16 x 6 tokens.
  const int64_t q_stride = token_stride(q);
  const int64_t q_ld = q_stride >= 0 ? std::max<int64_t>(q_stride, H * hd) : H * hd;
  const at::Tensor qc = q_stride >= 0 ? q : q.contiguous();
  at::Tensor out = at::empty({B, T, H * hd}, q.options());
  const std::vector<int64_t> n_keys = visible_keys(positions, S);
  const float fscale = static_cast<float>(scale);
  // Fork when each thread gets >= kAttentionForkWork query-row x key x head_dim products.
  const int64_t grain = attention_grain(G * S * hd);
  // Work items from i on that share item i's (b, KV head), up to i1: one attend_rows call.
  struct Run {
    int64_t b, kvh, t0, n;
  };
  auto run_at = [&](int64_t i, int64_t i1) {
    const int64_t bk = i / T, t0 = i % T;
    return Run{bk / K, bk % K, t0, std::min(T - t0, i1 - i)};
  };
  // Where a run's K and V rows start (elements from the tensors' data).
  auto k_at = [&](const Run& r) { return r.b * k.stride(0) + r.kvh * k.stride(1); };
  auto v_at = [&](const Run& r) { return r.b * v.stride(0) + r.kvh * v.stride(1); };
  // A run's K and V rows (its longest query's keys): short streams (one KV head's keys: 16 KiB for
  // 128 keys of 64 bf16) that the hardware prefetcher barely ramps up on. A chunk's first run
  // is prefetched whole before it starts; each later one is handed to the kernel of the run
  // before it, which brings it into L2 as its loops go (decoders/line_feed.h). Prefetched in one
  // burst before each run, a 16-sequence decode step's attention had gone 18.5 -> 16.5 ms (Intel
  // Xeon masked to avx2, nineteenth session); fed, on the 100M model 2.05 -> 1.69 ms masked to
  // avx2 and 2.04 -> 1.66 ms on amx (docs/performance-log.md, thirty-second session).
  auto run_rows = [&](auto* kb, auto* vb, const Run& r) {
    const int64_t* nk = n_keys.data() + r.b * T + r.t0;
    const int64_t keys = *std::max_element(nk, nk + r.n);
    const int64_t elt = static_cast<int64_t>(sizeof(*kb));
    return NextKV{RowSpan{kb + k_at(r), keys, k.stride(2) * elt, hd * elt},
                  RowSpan{vb + v_at(r), keys, v.stride(2) * elt, hd * elt}};
  };
  auto rows = [&](auto* qb, auto* kb, auto* vb, auto* ob, auto attend_rows) {
    parallel_for(0, B * K * T, grain, [&](int64_t i0, int64_t i1) {
      prefetch_all(run_rows(kb, vb, run_at(i0, i1)));
      for (int64_t i = i0; i < i1;) {
        const Run r = run_at(i, i1);
        const int64_t token0 = r.b * T + r.t0, head0 = r.kvh * G;  // query row (b, t0, kvh * G)
        const int64_t row0 = token0 * H + head0;
        const NextKV next = i + r.n < i1 ? run_rows(kb, vb, run_at(i + r.n, i1)) : NextKV{};
        attend_rows(qb + token0 * q_ld + head0 * hd, q_ld, r.n, G, n_keys.data() + token0, kb + k_at(r),
                    k.stride(2), vb + v_at(r), v.stride(2), hd, fscale, ob + row0 * hd, H * hd, &next);
        i += r.n;
      }
    });
  };
  if (cpu_f32_tensor(q))
    rows(qc.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), out.data_ptr<float>(),
         static_cast<F32AttendRows>(cpu_avx2::attend_rows));
  else
    rows(bits(qc), bits(k), bits(v), bits_mut(out), bf16_kernels()->attend_rows);
  return out;
}

}  // namespace

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const at::Tensor& blocked, double scale, const at::Tensor& positions) {
  if (attention_kernel_applies(q, k, v, positions)) return attention_cpu_kernel(q, k, v, scale, positions);
#ifdef EARS_HAVE_SDPA
  // On an accelerator, LibTorch >= 2.1's fused attention (flash / memory-efficient kernels on
  // CUDA). It rounds differently from the eager path (which follows HF eager exactly);
  // EARS_EAGER_ATTENTION=1 selects the eager path everywhere.
  static const bool eager_only = [] {
    const char* e = std::getenv("EARS_EAGER_ATTENTION");
    return e && *e && std::string(e) != "0";
  }();
  if (!q.device().is_cpu() && !eager_only &&
      !(at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad())))
    return attention_sdpa(q, k, v, blocked, scale);
#endif
  return attention_eager(q, k, v, blocked, scale);
}

at::Tensor attention_eager(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked,
                           double scale) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), hd = q.size(3);
  const int64_t K = k.size(1), S = k.size(2), G = H / K;
  // [B, T, K, G, hd] -> [B, K, T, G, hd] -> [B, K, T*G, hd]; a view when T == 1.
  const at::Tensor qg = q.reshape({B, T, K, G, hd}).permute({0, 2, 1, 3, 4}).reshape({B, K, T * G, hd});
  at::Tensor scores = at::matmul(qg, k.transpose(-1, -2));  // [B, K, T*G, S]
  scores.mul_(scale);
  scores.view({B, K, T, G, S}).masked_fill_(blocked.view({B, 1, T, 1, S}),
                                             -std::numeric_limits<double>::infinity());
  at::Tensor probs = at::softmax(scores, -1, at::kFloat);
  if (probs.scalar_type() != q.scalar_type()) probs = probs.to(q.scalar_type());
  const at::Tensor out = at::matmul(probs, v);  // [B, K, T*G, hd]
  return out.view({B, K, T, G, hd}).permute({0, 2, 1, 3, 4}).reshape({B, T, H * hd});
}

#ifdef EARS_HAVE_SDPA
at::Tensor attention_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked,
                          double scale) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), hd = q.size(3);
  const int64_t K = k.size(1), S = k.size(2), G = H / K;
  const at::Tensor qh = q.permute({0, 2, 1, 3});                                         // [B, H, T, hd]
  const at::Tensor kh = k.unsqueeze(2).expand({B, K, G, S, hd}).reshape({B, H, S, hd});  // repeat_kv
  const at::Tensor vh = v.unsqueeze(2).expand({B, K, G, S, hd}).reshape({B, H, S, hd});
  const at::Tensor allowed = blocked.logical_not().view({B, 1, T, S});
  const at::Tensor o = at::scaled_dot_product_attention(qh, kh, vh, allowed, 0.0, false, scale);
  return o.permute({0, 2, 1, 3}).reshape({B, T, H * hd});
}
#endif

}  // namespace layers

}  // namespace ears
