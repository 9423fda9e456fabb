#include "decoders/safetensors.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "decoders/safetensors_header.h"
#include "harness/base/files.h"
#include "harness/base/error.h"

// safetensors stores little-endian data and tensors view the mapped bytes directly.
static_assert(std::endian::native == std::endian::little, "big-endian hosts are not supported");

namespace ears {
namespace fs = std::filesystem;

namespace {

// One read-only, private mapping of a whole file plus its validated header.
struct MappedFile {
  fs::path path;
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  SafetensorsHeader header;

  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data) munmap(const_cast<uint8_t*>(data), size);
  }
};

std::unique_ptr<MappedFile> map_file(const fs::path& path) {
  auto file = std::make_unique<MappedFile>();
  file->path = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open ({}); check the path and permissions", path.string(), std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail("{}: cannot stat ({})", path.string(), std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file; expected a .safetensors file", path.string());
  }
  file->size = static_cast<uint64_t>(st.st_size);
  if (file->size > 0) {
    void* addr = mmap(nullptr, file->size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    if (addr == MAP_FAILED) fail("{}: cannot memory-map {} bytes ({})", path.string(), file->size, std::strerror(err));
    file->data = static_cast<const uint8_t*>(addr);
  } else {
    ::close(fd);
  }
  file->header = parse_safetensors_header(file->data, file->size, path.string());
  return file;
}

// The one mapping between the file's dtypes and LibTorch's (both directions read it).
constexpr std::pair<SafetensorsDtype, c10::ScalarType> kScalarTypes[] = {
    {SafetensorsDtype::F64, at::kDouble}, {SafetensorsDtype::F32, at::kFloat}, {SafetensorsDtype::F16, at::kHalf},
    {SafetensorsDtype::BF16, at::kBFloat16}, {SafetensorsDtype::I64, at::kLong}, {SafetensorsDtype::I32, at::kInt},
    {SafetensorsDtype::I16, at::kShort}, {SafetensorsDtype::I8, at::kChar}, {SafetensorsDtype::U8, at::kByte},
    {SafetensorsDtype::BOOL, at::kBool},
};

}  // namespace

c10::ScalarType to_scalar_type(SafetensorsDtype dtype) {
  for (const auto& [d, t] : kScalarTypes)
    if (d == dtype) return t;
  return at::kFloat;  // unreachable: every enumerator is in the table
}

std::optional<SafetensorsDtype> from_scalar_type(c10::ScalarType type) {
  for (const auto& [d, t] : kScalarTypes)
    if (t == type) return d;
  return std::nullopt;
}

struct Checkpoint::Impl {
  struct Entry {
    const MappedFile* file;
    const SafetensorsTensor* tensor;
  };
  std::vector<std::unique_ptr<MappedFile>> files;
  std::map<std::string, Entry> tensors;

  const Entry& get(const fs::path& dir, const std::string& name) const {
    auto it = tensors.find(name);
    if (it == tensors.end())
      fail("{}: tensor '{}' not found (checkpoint has {} tensors); the checkpoint does not match config.json "
           "or the model type",
           dir.string(), name, tensors.size());
    return it->second;
  }

  void add_all(const MappedFile* file) {
    for (const auto& t : file->header.tensors) tensors[t.name] = Entry{file, &t};
  }

  void open_index(const fs::path& dir, const fs::path& index_path) {
    nlohmann::json index;
    try {
      index = nlohmann::json::parse(read_file(index_path));
    } catch (const nlohmann::json::exception& e) {
      std::string what = e.what();
      std::replace(what.begin(), what.end(), '\n', ' ');
      fail("{}: not valid JSON ({}); re-download the checkpoint", index_path.string(), what);
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      fail("{}: has no \"weight_map\" object mapping tensor names to shard files; re-download the checkpoint",
           index_path.string());
    // Map each shard once, in the order first referenced; metadata.total_size is ignored (real
    // checkpoints disagree with it in harmless ways).
    std::map<std::string, const MappedFile*> shards;
    for (const auto& [name, shard] : index["weight_map"].items()) {
      if (!shard.is_string() || shard.get<std::string>().empty())
        fail("{}: weight_map entry for tensor '{}' is {} instead of a shard file name; re-download the "
             "checkpoint",
             index_path.string(), name, shard.dump());
      const std::string shard_name = shard.get<std::string>();
      auto it = shards.find(shard_name);
      if (it == shards.end()) {
        fs::path shard_path = dir / shard_name;
        if (!fs::is_regular_file(shard_path))
          fail("{}: missing shard {} listed in index.json (needed for tensor '{}'); re-download the checkpoint",
               index_path.string(), shard_path.string(), name);
        files.push_back(map_file(shard_path));
        it = shards.emplace(shard_name, files.back().get()).first;
      }
      const SafetensorsTensor* t = it->second->header.find(name);
      if (!t)
        fail("{}: tensor '{}' is listed in index.json for this shard but the shard does not contain it; "
             "re-download the checkpoint",
             it->second->path.string(), name);
      tensors[name] = Entry{it->second, t};
    }
  }
};

Checkpoint::Checkpoint() : impl_(std::make_unique<Impl>()) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Checkpoint Checkpoint::open(const fs::path& dir) {
  Checkpoint ckpt;
  ckpt.path_ = dir;
  std::error_code ec;
  if (!fs::exists(dir, ec))
    fail("{}: checkpoint directory does not exist; pass a Hugging Face model directory containing "
         "model.safetensors",
         dir.string());
  if (fs::is_regular_file(dir, ec)) {
    if (dir.extension() != ".safetensors")
      fail("{}: not a .safetensors file; pass a model directory or a .safetensors file", dir.string());
    ckpt.impl_->files.push_back(map_file(dir));
    ckpt.impl_->add_all(ckpt.impl_->files.back().get());
    return ckpt;
  }
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(single, ec)) {
    ckpt.impl_->files.push_back(map_file(single));
    ckpt.impl_->add_all(ckpt.impl_->files.back().get());
  } else if (fs::exists(index, ec)) {
    ckpt.impl_->open_index(dir, index);
  } else if (fs::exists(dir / "pytorch_model.bin", ec) || fs::exists(dir / "pytorch_model.bin.index.json", ec)) {
    fail("{}: only PyTorch .bin weights found; convert them to model.safetensors (e.g. with the safetensors "
         "convert script)",
         dir.string());
  } else {
    fail("{}: no model.safetensors or model.safetensors.index.json in this directory; pass a Hugging Face "
         "model directory",
         dir.string());
  }
  return ckpt;
}

bool Checkpoint::contains(const std::string& name) const { return impl_->tensors.count(name) > 0; }

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(impl_->tensors.size());
  for (const auto& [name, entry] : impl_->tensors) out.push_back(name);
  return out;
}

std::vector<int64_t> Checkpoint::shape(const std::string& name) const {
  return impl_->get(path_, name).tensor->shape;
}

c10::ScalarType Checkpoint::dtype(const std::string& name) const {
  return to_scalar_type(impl_->get(path_, name).tensor->dtype);
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, entry] : impl_->tensors) total += entry.tensor->nbytes();
  return total;
}

at::Tensor Checkpoint::load(const std::string& name, c10::Device device, c10::ScalarType dtype,
                            const std::optional<std::vector<int64_t>>& expected_shape) const {
  const Impl::Entry& entry = impl_->get(path_, name);
  const SafetensorsTensor& t = *entry.tensor;
  if (expected_shape && *expected_shape != t.shape)
    fail("{}: tensor '{}' has shape {} but config.json implies {}; the checkpoint does not match its config",
         entry.file->path.string(), name, t.shape, *expected_shape);

  const c10::ScalarType stored = to_scalar_type(t.dtype);
  const uint8_t* src = entry.file->data + t.begin;
  const auto options = at::TensorOptions().dtype(stored).device(at::kCPU);
  const bool aligned = reinterpret_cast<uintptr_t>(src) % safetensors_dtype_size(t.dtype) == 0;
  if (t.nbytes() == 0 || !aligned) {
    // Misaligned for its element type (or empty): one copy into an owned, aligned buffer.
    at::Tensor owned = at::empty(t.shape, options);
    if (t.nbytes() > 0) std::memcpy(owned.data_ptr(), src, t.nbytes());
    return owned.to(device, dtype);
  }
  // Zero-copy view of the mapping; the result must never alias it, so copy explicitly when
  // .to() would be a no-op.
  at::Tensor view = at::from_blob(const_cast<uint8_t*>(src), t.shape, options);
  if (device.is_cpu() && dtype == stored) return view.clone();
  return view.to(device, dtype);
}

}  // namespace ears
