// Checkpoint (mmap'd safetensors reader) and the torch-free header validator.
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "decoders/safetensors.h"
#include "decoders/safetensors_header.h"
#include "harness/base/error.h"
#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ears::Checkpoint;

fs::path fixtures() { return ears::test::shared_dir() / "fixtures"; }

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() / fmt::format("ears_safetensors_test_{}_{}", ::getpid(), counter++);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file from a header text and raw data; the header is padded with spaces so the
// data section starts at a multiple of 8 (as real writers do).
std::string make_safetensors(std::string header, const std::string& data) {
  while ((8 + header.size()) % 8 != 0) header += ' ';
  return u64_le(header.size()) + header + data;
}

// Runs f, expecting an ears::Error; returns its message ("" after recording a failure otherwise).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ears::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ears::Error, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected ears::Error, nothing was thrown";
  return "";
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  const std::string msg = error_of(f);
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
  for (const auto& part : parts)
    EXPECT_NE(msg.find(part), std::string::npos) << "message lacks '" << part << "': " << msg;
}

// Independent reading of a safetensors file (nlohmann only): name -> raw bytes of the tensor.
std::map<std::string, std::string> raw_tensors(const fs::path& file) {
  const std::string bytes = ears::test::read_file(file);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  json header = json::parse(bytes.substr(8, n));
  std::map<std::string, std::string> out;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    uint64_t b = entry["data_offsets"][0], e = entry["data_offsets"][1];
    out[name] = bytes.substr(8 + n + b, e - b);
  }
  return out;
}

std::string tensor_bytes(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// float32 -> bfloat16 with round-to-nearest-even, returned as the float32 it represents.
float round_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// Shapes the fixture README / config.json imply for the Qwen3 tiny checkpoint.
std::map<std::string, std::vector<int64_t>> qwen3_shapes(const fs::path& config_path, bool with_lm_head) {
  json c = json::parse(ears::test::read_file(config_path));
  const int64_t hidden = c["hidden_size"], inter = c["intermediate_size"], vocab = c["vocab_size"];
  const int64_t hd = c["head_dim"], heads = c["num_attention_heads"], kv = c["num_key_value_heads"];
  std::map<std::string, std::vector<int64_t>> s;
  s["model.embed_tokens.weight"] = {vocab, hidden};
  s["model.norm.weight"] = {hidden};
  if (with_lm_head) s["lm_head.weight"] = {vocab, hidden};
  for (int i = 0; i < c["num_hidden_layers"].get<int>(); ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    s[p + "input_layernorm.weight"] = {hidden};
    s[p + "post_attention_layernorm.weight"] = {hidden};
    s[p + "self_attn.q_proj.weight"] = {heads * hd, hidden};
    s[p + "self_attn.k_proj.weight"] = {kv * hd, hidden};
    s[p + "self_attn.v_proj.weight"] = {kv * hd, hidden};
    s[p + "self_attn.o_proj.weight"] = {hidden, heads * hd};
    s[p + "self_attn.q_norm.weight"] = {hd};
    s[p + "self_attn.k_norm.weight"] = {hd};
    s[p + "mlp.gate_proj.weight"] = {inter, hidden};
    s[p + "mlp.up_proj.weight"] = {inter, hidden};
    s[p + "mlp.down_proj.weight"] = {hidden, inter};
  }
  return s;
}

const c10::Device kCPU(c10::kCPU);

// ---------------------------------------------------------------- fixtures on disk

TEST(Checkpoint, SingleFileShapesDtypesAndBytes) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path dir = fixtures() / "qwen3-tiny";
  Checkpoint ckpt = Checkpoint::open(dir);
  const auto shapes = qwen3_shapes(dir / "config.json", true);
  std::vector<std::string> expected_names;
  for (const auto& [name, shape] : shapes) expected_names.push_back(name);
  EXPECT_EQ(ckpt.names(), expected_names);
  EXPECT_EQ(ckpt.total_bytes(), 1347968u);  // index.json total_size of the sharded copy

  const auto raw = raw_tensors(dir / "model.safetensors");
  for (const auto& [name, shape] : shapes) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(ckpt.contains(name));
    EXPECT_EQ(ckpt.shape(name), shape);
    EXPECT_EQ(ckpt.dtype(name), at::kFloat);
    at::Tensor t = ckpt.load(name, kCPU, at::kFloat, shape);
    EXPECT_EQ(t.sizes().vec(), shape);
    EXPECT_EQ(t.scalar_type(), at::kFloat);
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(tensor_bytes(t), raw.at(name));
  }
  EXPECT_FALSE(ckpt.contains("model.layers.6.input_layernorm.weight"));
}

TEST(Checkpoint, LoadedTensorsOwnTheirMemory) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  Checkpoint ckpt = Checkpoint::open(fixtures() / "qwen3-tiny");
  at::Tensor a = ckpt.load("model.norm.weight", kCPU, at::kFloat);
  at::Tensor b = ckpt.load("model.norm.weight", kCPU, at::kFloat);
  EXPECT_NE(a.data_ptr(), b.data_ptr());
  at::Tensor before = b.clone();
  a.fill_(123.0f);  // would crash if `a` viewed the read-only mapping
  EXPECT_TRUE(at::equal(ckpt.load("model.norm.weight", kCPU, at::kFloat), before));
  // The tensor stays valid after the checkpoint is gone.
  at::Tensor kept;
  {
    Checkpoint tmp = Checkpoint::open(fixtures() / "qwen3-tiny");
    kept = tmp.load("model.norm.weight", kCPU, at::kFloat);
  }
  EXPECT_TRUE(at::equal(kept, before));
}

TEST(Checkpoint, DirectFilePathAndMove) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path file = fixtures() / "qwen3-tiny" / "model.safetensors";
  Checkpoint a = Checkpoint::open(file);
  EXPECT_EQ(a.path(), file);
  EXPECT_EQ(a.names().size(), 69u);
  Checkpoint b = std::move(a);
  EXPECT_EQ(b.shape("lm_head.weight"), (std::vector<int64_t>{320, 64}));
  EXPECT_EQ(b.load("lm_head.weight", kCPU, at::kFloat).size(0), 320);
}

TEST(Checkpoint, ShardedEqualsSingleFileBitForBit) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny-sharded");
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  Checkpoint single = Checkpoint::open(fixtures() / "qwen3-tiny");
  Checkpoint sharded = Checkpoint::open(fixtures() / "qwen3-tiny-sharded");
  ASSERT_EQ(sharded.names(), single.names());
  EXPECT_EQ(sharded.total_bytes(), single.total_bytes());
  json index = json::parse(ears::test::read_file(fixtures() / "qwen3-tiny-sharded/model.safetensors.index.json"));
  EXPECT_EQ(sharded.total_bytes(), index["metadata"]["total_size"].get<uint64_t>());
  for (const auto& name : single.names()) {
    SCOPED_TRACE(name);
    at::Tensor a = single.load(name, kCPU, at::kFloat);
    at::Tensor b = sharded.load(name, kCPU, at::kFloat);
    EXPECT_EQ(tensor_bytes(a), tensor_bytes(b));
    EXPECT_EQ(sharded.shape(name), single.shape(name));
  }
  // Both shards are really used.
  EXPECT_EQ(sharded.load("model.embed_tokens.weight", kCPU, at::kFloat).size(0), 320);
  EXPECT_EQ(sharded.load("model.layers.5.mlp.down_proj.weight", kCPU, at::kFloat).size(1), 160);
}

TEST(Checkpoint, Bf16LoadsAsRoundedFloat32) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny-bf16");
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  Checkpoint f32 = Checkpoint::open(fixtures() / "qwen3-tiny");
  Checkpoint bf16 = Checkpoint::open(fixtures() / "qwen3-tiny-bf16");
  const auto shapes = qwen3_shapes(fixtures() / "qwen3-tiny-bf16" / "config.json", false);
  EXPECT_EQ(bf16.names().size(), shapes.size());
  EXPECT_FALSE(bf16.contains("lm_head.weight"));
  const auto raw = raw_tensors(fixtures() / "qwen3-tiny-bf16" / "model.safetensors");
  for (const auto& [name, shape] : shapes) {
    SCOPED_TRACE(name);
    EXPECT_EQ(bf16.dtype(name), at::kBFloat16);
    at::Tensor as_bf16 = bf16.load(name, kCPU, at::kBFloat16, shape);
    EXPECT_EQ(as_bf16.scalar_type(), at::kBFloat16);
    EXPECT_EQ(tensor_bytes(as_bf16), raw.at(name));
    at::Tensor as_f32 = bf16.load(name, kCPU, at::kFloat, shape);
    ASSERT_EQ(as_f32.scalar_type(), at::kFloat);
    // Reference: the float32 checkpoint rounded to bf16 by hand (round-to-nearest-even).
    at::Tensor ref = f32.load(name, kCPU, at::kFloat).contiguous();
    const float* r = ref.data_ptr<float>();
    const float* v = as_f32.data_ptr<float>();
    int64_t mismatches = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) mismatches += round_to_bf16(r[i]) != v[i];
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(Checkpoint, Eagle3IntegerAndBoolMaps) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  Checkpoint ckpt = Checkpoint::open(fixtures() / "eagle3-tiny");
  json expected = json::parse(ears::test::read_file(fixtures() / "eagle3-tiny" / "expected.json"));
  const std::vector<int64_t> hot = expected["hot_target_ids"];
  ASSERT_EQ(hot.size(), 96u);
  EXPECT_FALSE(ckpt.contains("embed_tokens.weight"));
  EXPECT_EQ(ckpt.shape("fc.weight"), (std::vector<int64_t>{64, 192}));

  EXPECT_EQ(ckpt.dtype("d2t"), at::kLong);
  at::Tensor d2t = ckpt.load("d2t", kCPU, at::kLong, std::vector<int64_t>{96});
  ASSERT_EQ(d2t.scalar_type(), at::kLong);
  for (int64_t i = 0; i < 96; ++i) EXPECT_EQ(d2t[i].item<int64_t>(), hot[i] - i) << i;

  EXPECT_EQ(ckpt.dtype("t2d"), at::kBool);
  at::Tensor t2d = ckpt.load("t2d", kCPU, at::kBool, std::vector<int64_t>{320});
  ASSERT_EQ(t2d.scalar_type(), at::kBool);
  std::set<int64_t> hot_set(hot.begin(), hot.end());
  for (int64_t j = 0; j < 320; ++j) EXPECT_EQ(t2d[j].item<bool>(), hot_set.count(j) == 1) << j;
  EXPECT_EQ(ckpt.load("t2d", kCPU, at::kLong).sum().item<int64_t>(), 96);
}

// ---------------------------------------------------------------- hand-built file

TEST(Checkpoint, HandBuiltF16I32U8RoundTrip) {
  TempDir tmp;
  // Data layout (relative offsets): u8 "bytes" [0,3), i32 "ints" [3,15) (misaligned on purpose),
  // f16 "halves" [16,28) (aligned), i32 scalar "one" [28,32), f16 "empty" [0x3] at [32,32).
  const std::vector<uint16_t> half_bits = {0x3C00, 0xC000, 0x3800, 0x7BFF, 0x0001, 0x8000};
  const std::vector<float> half_values = {1.0f, -2.0f, 0.5f, 65504.0f, 5.9604644775390625e-8f, -0.0f};
  const std::vector<int32_t> ints = {-7, 2147483647, -2147483647 - 1};
  std::string data;
  data += std::string("\x00\x7f\xff", 3);
  for (int32_t v : ints) data.append(reinterpret_cast<const char*>(&v), 4);
  data += '\0';  // gap byte
  for (uint16_t v : half_bits) data.append(reinterpret_cast<const char*>(&v), 2);
  int32_t one = 42;
  data.append(reinterpret_cast<const char*>(&one), 4);
  const std::string header =
      R"({"__metadata__":{"format":"pt","note":"hand"},)"
      R"("bytes":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
      R"("ints":{"dtype":"I32","shape":[3,1],"data_offsets":[3,15]},)"
      R"("halves":{"dtype":"F16","shape":[2,3],"data_offsets":[16,28]},)"
      R"("one":{"dtype":"I32","shape":[],"data_offsets":[28,32]},)"
      R"("empty":{"dtype":"F16","shape":[0,3],"data_offsets":[32,32]}})";
  const std::string bytes = make_safetensors(header, data);
  write_file(tmp.path / "model.safetensors", bytes);

  // The torch-free parser.
  auto h = ears::parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "x");
  EXPECT_EQ(h.data_offset % 8, 0u);
  EXPECT_EQ(h.data_offset, 8 + h.header_size);
  EXPECT_EQ(h.metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"note", "hand"}}));
  ASSERT_EQ(h.tensors.size(), 5u);
  EXPECT_EQ(h.tensors[0].name, "bytes");  // sorted by name
  const auto* ints_t = h.find("ints");
  ASSERT_NE(ints_t, nullptr);
  EXPECT_EQ(ints_t->dtype, ears::SafetensorsDtype::I32);
  EXPECT_EQ(ints_t->begin, h.data_offset + 3);
  EXPECT_EQ(ints_t->end, h.data_offset + 15);
  EXPECT_EQ(ints_t->numel(), 3u);
  EXPECT_EQ(h.find("nope"), nullptr);
  EXPECT_EQ(h.find("one")->shape, std::vector<int64_t>{});

  Checkpoint ckpt = Checkpoint::open(tmp.path);
  EXPECT_EQ(ckpt.total_bytes(), 31u);  // the gap byte is not a tensor
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"bytes", "empty", "halves", "ints", "one"}));

  at::Tensor u8 = ckpt.load("bytes", kCPU, at::kByte);
  ASSERT_EQ(u8.scalar_type(), at::kByte);
  EXPECT_EQ(u8[0].item<int64_t>(), 0);
  EXPECT_EQ(u8[1].item<int64_t>(), 127);
  EXPECT_EQ(u8[2].item<int64_t>(), 255);
  EXPECT_EQ(ckpt.load("bytes", kCPU, at::kFloat)[2].item<float>(), 255.0f);

  at::Tensor i32 = ckpt.load("ints", kCPU, at::kInt, std::vector<int64_t>{3, 1});
  ASSERT_EQ(i32.scalar_type(), at::kInt);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(i32[i][0].item<int32_t>(), ints[i]);
  at::Tensor i64 = ckpt.load("ints", kCPU, at::kLong);
  EXPECT_EQ(i64[2][0].item<int64_t>(), -2147483648LL);

  at::Tensor f16 = ckpt.load("halves", kCPU, at::kHalf);
  ASSERT_EQ(f16.scalar_type(), at::kHalf);
  EXPECT_EQ(tensor_bytes(f16), data.substr(16, 12));
  at::Tensor f32 = ckpt.load("halves", kCPU, at::kFloat, std::vector<int64_t>{2, 3}).reshape({-1});
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(f32[i].item<float>(), half_values[i]) << i;
    EXPECT_EQ(std::signbit(f32[i].item<float>()), std::signbit(half_values[i])) << i;
  }

  at::Tensor scalar = ckpt.load("one", kCPU, at::kInt);
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item<int32_t>(), 42);

  at::Tensor empty = ckpt.load("empty", kCPU, at::kFloat);
  EXPECT_EQ(empty.sizes().vec(), (std::vector<int64_t>{0, 3}));
}

// ---------------------------------------------------------------- corrupt files

// A valid two-tensor file; corruption tests edit its header text or its bytes.
const std::string kGoodData = std::string(16, '\x01');
std::string good_header(const std::string& a_entry = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})",
                        const std::string& b_entry = R"({"dtype":"F32","shape":[2],"data_offsets":[8,16]})") {
  return R"({"__metadata__":{"format":"pt"},"alpha.weight":)" + a_entry + R"(,"beta.weight":)" + b_entry + "}";
}

struct Corrupt : ::testing::Test {
  TempDir tmp;
  // Writes bytes as <tmp>/<file_name>.safetensors and returns the path.
  fs::path write(const std::string& file_name, const std::string& bytes) {
    fs::path p = tmp.path / (file_name + ".safetensors");
    write_file(p, bytes);
    return p;
  }
  void expect_open_error(const std::string& file_name, const std::string& bytes,
                         std::vector<std::string> parts) {
    fs::path p = write(file_name, bytes);
    parts.push_back(p.string());
    expect_error([&] { Checkpoint::open(p); }, parts);
    // The torch-free parser gives the same verdict.
    expect_error(
        [&] {
          ears::parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                         p.string());
        },
        parts);
  }
};

TEST_F(Corrupt, GoodFileOpens) {
  Checkpoint c = Checkpoint::open(write("good", make_safetensors(good_header(), kGoodData)));
  EXPECT_EQ(c.names().size(), 2u);
}

TEST_F(Corrupt, ShorterThanLengthField) {
  expect_open_error("tiny", "abc", {"shorter than the 8-byte", "truncated or not a safetensors file"});
  expect_open_error("zero", "", {"0 bytes"});
}

TEST_F(Corrupt, HeaderLengthLongerThanFile) {
  std::string bytes = make_safetensors(good_header(), kGoodData);
  std::string bad = u64_le(bytes.size()) + bytes.substr(8);
  expect_open_error("hdrlen", bad, {"header length", "truncated or not a safetensors file"});
  expect_open_error("hdrhuge", u64_le(~0ull) + bytes.substr(8), {"truncated or not a safetensors file"});
}

TEST_F(Corrupt, TruncatedFixture) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const std::string bytes = ears::test::read_file(fixtures() / "qwen3-tiny" / "model.safetensors");
  const size_t cut = 1000000;
  // The first tensor (in name order, the order the header is checked) that the cut damages.
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  json header = json::parse(bytes.substr(8, n));
  std::string first_damaged;
  for (const auto& [name, entry] : header.items())
    if (name != "__metadata__" && 8 + n + entry["data_offsets"][1].get<uint64_t>() > cut) {
      first_damaged = name;
      break;
    }
  ASSERT_FALSE(first_damaged.empty());
  expect_open_error("truncated", bytes.substr(0, cut),
                    {"'" + first_damaged + "'", "offsets past the end of file", "re-download"});
  expect_open_error("truncated_in_header", bytes.substr(0, 100), {"truncated or not a safetensors file"});
}

TEST_F(Corrupt, OffsetsPastEnd) {
  std::string h = good_header(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})",
                              R"({"dtype":"F32","shape":[4],"data_offsets":[8,24]})");
  expect_open_error("pastend", make_safetensors(h, kGoodData), {"'beta.weight'", "offsets past the end of file"});
}

TEST_F(Corrupt, OverlappingOffsets) {
  std::string h = good_header(R"({"dtype":"F32","shape":[3],"data_offsets":[0,12]})",
                              R"({"dtype":"F32","shape":[2],"data_offsets":[8,16]})");
  expect_open_error("overlap", make_safetensors(h, kGoodData), {"'alpha.weight'", "'beta.weight'", "overlap"});
  // Identical spans overlap too; empty spans never do.
  std::string same = good_header(R"({"dtype":"F32","shape":[2],"data_offsets":[8,16]})",
                                 R"({"dtype":"F32","shape":[2],"data_offsets":[8,16]})");
  expect_open_error("overlap_same", make_safetensors(same, kGoodData), {"overlap"});
  std::string empty = good_header(R"({"dtype":"F32","shape":[0],"data_offsets":[8,8]})",
                                  R"({"dtype":"F32","shape":[2],"data_offsets":[8,16]})");
  EXPECT_NO_THROW(Checkpoint::open(write("empty_span", make_safetensors(empty, kGoodData))));
}

TEST_F(Corrupt, ShapeTimesDtypeNotSpan) {
  std::string h = good_header(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})");
  expect_open_error("span", make_safetensors(h, kGoodData), {"'alpha.weight'", "needs 12 bytes", "span 8"});
  std::string bf = good_header(R"({"dtype":"BF16","shape":[2],"data_offsets":[0,8]})");
  expect_open_error("span_bf16", make_safetensors(bf, kGoodData), {"'alpha.weight'", "BF16"});
}

TEST_F(Corrupt, UnknownAndUnsupportedDtype) {
  std::string h = good_header(R"({"dtype":"F33","shape":[2],"data_offsets":[0,8]})");
  expect_open_error("dtype", make_safetensors(h, kGoodData), {"unknown dtype 'F33'", "'alpha.weight'"});
  std::string f8 = good_header(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})",
                               R"({"dtype":"F8_E4M3","shape":[8],"data_offsets":[8,16]})");
  expect_open_error("f8", make_safetensors(f8, kGoodData), {"unsupported dtype F8_E4M3 for tensor 'beta.weight'"});
  std::string num = good_header(R"({"dtype":4,"shape":[2],"data_offsets":[0,8]})");
  expect_open_error("dtype_num", make_safetensors(num, kGoodData), {"'alpha.weight'", "dtype"});
}

TEST_F(Corrupt, MalformedJson) {
  std::string h = good_header();
  h.pop_back();  // drop the closing brace
  expect_open_error("json", make_safetensors(h, kGoodData), {"not valid JSON"});
  expect_open_error("json_array", make_safetensors("[1,2]", kGoodData), {"instead of a JSON object"});
  expect_open_error("json_newline", make_safetensors("{\"a\n\":1}", kGoodData), {"not valid JSON"});
  expect_open_error("entry", make_safetensors(good_header("[0,8]"), kGoodData),
                    {"'alpha.weight'", "instead of an object"});
  expect_open_error("meta", make_safetensors(R"({"__metadata__":[1]})", kGoodData), {"__metadata__"});
  std::string missing = good_header(R"({"dtype":"F32","data_offsets":[0,8]})");
  expect_open_error("noshape", make_safetensors(missing, kGoodData), {"'alpha.weight'", "\"shape\""});
  std::string dup = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  expect_open_error("dup", make_safetensors(dup, kGoodData), {"'a' appears twice"});
}

TEST_F(Corrupt, BadShapesAndOffsets) {
  auto entry = [](const std::string& shape, const std::string& offsets) {
    return good_header(R"({"dtype":"F32","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}");
  };
  expect_open_error("neg", make_safetensors(entry("[-2]", "[0,8]"), kGoodData),
                    {"'alpha.weight'", "not a non-negative integer"});
  expect_open_error("float", make_safetensors(entry("[2.0]", "[0,8]"), kGoodData),
                    {"'alpha.weight'", "not a non-negative integer"});
  expect_open_error("notarray", make_safetensors(entry("2", "[0,8]"), kGoodData), {"'alpha.weight'", "shape"});
  expect_open_error("overflow",
                    make_safetensors(entry("[4611686018427387904,4611686018427387904]", "[0,8]"), kGoodData),
                    {"'alpha.weight'", "overflows"});
  expect_open_error("overflow2", make_safetensors(entry("[4611686018427387904]", "[0,8]"), kGoodData),
                    {"'alpha.weight'", "overflows"});
  expect_open_error("huge_dim", make_safetensors(entry("[18446744073709551615]", "[0,8]"), kGoodData),
                    {"'alpha.weight'", "not a non-negative integer"});
  expect_open_error("three_offsets", make_safetensors(entry("[2]", "[0,8,9]"), kGoodData),
                    {"'alpha.weight'", "data_offsets"});
  expect_open_error("neg_offsets", make_safetensors(entry("[2]", "[-8,0]"), kGoodData),
                    {"'alpha.weight'", "data_offsets"});
  expect_open_error("reversed", make_safetensors(entry("[0]", "[8,0]"), kGoodData),
                    {"'alpha.weight'", "begin > end"});
}

TEST_F(Corrupt, RandomMutationsOnlyThrowEarsError) {
  const std::string good = make_safetensors(good_header(), kGoodData);
  std::mt19937 rng(1234);
  int accepted = 0, rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = good;
    const int edits = 1 + trial % 4;
    for (int e = 0; e < edits; ++e)
      bytes[rng() % bytes.size()] = static_cast<char>(trial % 3 == 0 ? "0123456789[]{},:\"-"[rng() % 18] : rng());
    if (trial % 5 == 0) bytes.resize(rng() % bytes.size());
    try {
      auto h = ears::parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "m");
      ++accepted;
      for (const auto& t : h.tensors) {  // whatever is accepted is self-consistent
        ASSERT_LE(t.begin, t.end);
        ASSERT_LE(t.end, bytes.size());
        ASSERT_GE(t.begin, h.data_offset);
        ASSERT_EQ(t.nbytes(), t.numel() * ears::safetensors_dtype_size(t.dtype));
      }
    } catch (const ears::Error& e) {
      ++rejected;
      ASSERT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(accepted, 0);  // e.g. edits inside the padding or the data
}

// ---------------------------------------------------------------- checkpoint-level errors

TEST(CheckpointErrors, MissingTensorAndShapeMismatch) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path dir = fixtures() / "qwen3-tiny";
  Checkpoint ckpt = Checkpoint::open(dir);
  expect_error([&] { ckpt.load("model.layers.9.mlp.up_proj.weight", kCPU, at::kFloat); },
               {dir.string(), "'model.layers.9.mlp.up_proj.weight'", "not found", "69 tensors"});
  expect_error([&] { ckpt.shape("nope"); }, {"'nope'", "not found"});
  expect_error([&] { ckpt.dtype("nope"); }, {"'nope'", "not found"});
  expect_error(
      [&] { ckpt.load("lm_head.weight", kCPU, at::kFloat, std::vector<int64_t>{64, 320}); },
      {(dir / "model.safetensors").string(), "'lm_head.weight'", "[320, 64]", "config.json implies [64, 320]"});
}

TEST(CheckpointErrors, MissingOrEmptyDirectory) {
  TempDir tmp;
  const fs::path missing = tmp.path / "no_such_model";
  expect_error([&] { Checkpoint::open(missing); }, {missing.string(), "does not exist"});
  expect_error([&] { Checkpoint::open(tmp.path); }, {tmp.path.string(), "no model.safetensors"});
  write_file(tmp.path / "pytorch_model.bin", "x");
  expect_error([&] { Checkpoint::open(tmp.path); }, {tmp.path.string(), ".bin"});
  write_file(tmp.path / "weights.txt", "x");
  expect_error([&] { Checkpoint::open(tmp.path / "weights.txt"); }, {"weights.txt", "not a .safetensors file"});
}

TEST(CheckpointErrors, BrokenShardedCheckpoints) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny-sharded");
  const fs::path src = fixtures() / "qwen3-tiny-sharded";
  const std::string shard1 = "model-00001-of-00002.safetensors", shard2 = "model-00002-of-00002.safetensors";
  const std::string index_text = ears::test::read_file(src / "model.safetensors.index.json");
  {
    TempDir tmp;
    fs::copy_file(src / shard1, tmp.path / shard1);
    write_file(tmp.path / "model.safetensors.index.json", index_text);
    expect_error([&] { Checkpoint::open(tmp.path); }, {"missing shard", shard2, "listed in index.json"});
  }
  {
    TempDir tmp;
    fs::copy_file(src / shard1, tmp.path / shard1);
    fs::copy_file(src / shard2, tmp.path / shard2);
    json index = json::parse(index_text);
    index["weight_map"]["model.layers.9.extra.weight"] = shard1;
    write_file(tmp.path / "model.safetensors.index.json", index.dump());
    expect_error([&] { Checkpoint::open(tmp.path); }, {shard1, "'model.layers.9.extra.weight'", "does not contain"});
    // Wrong shard for an existing tensor.
    index = json::parse(index_text);
    index["weight_map"]["lm_head.weight"] = shard1;
    write_file(tmp.path / "model.safetensors.index.json", index.dump());
    expect_error([&] { Checkpoint::open(tmp.path); }, {shard1, "'lm_head.weight'"});
    // total_size is ignored.
    index = json::parse(index_text);
    index["metadata"]["total_size"] = 5;
    write_file(tmp.path / "model.safetensors.index.json", index.dump());
    EXPECT_EQ(Checkpoint::open(tmp.path).total_bytes(), 1347968u);
    // Malformed index files.
    write_file(tmp.path / "model.safetensors.index.json", "{\"weight_map\": ");
    expect_error([&] { Checkpoint::open(tmp.path); }, {"model.safetensors.index.json", "not valid JSON"});
    write_file(tmp.path / "model.safetensors.index.json", R"({"metadata":{}})");
    expect_error([&] { Checkpoint::open(tmp.path); }, {"model.safetensors.index.json", "weight_map"});
    write_file(tmp.path / "model.safetensors.index.json", R"({"weight_map":{"lm_head.weight":3}})");
    expect_error([&] { Checkpoint::open(tmp.path); }, {"'lm_head.weight'", "shard file name"});
  }
  {
    TempDir tmp;  // a corrupt shard is reported by its own file name
    fs::copy_file(src / shard1, tmp.path / shard1);
    write_file(tmp.path / shard2, ears::test::read_file(src / shard2).substr(0, 4000));
    write_file(tmp.path / "model.safetensors.index.json", index_text);
    expect_error([&] { Checkpoint::open(tmp.path); }, {(tmp.path / shard2).string(), "offsets past the end"});
  }
}

}  // namespace
