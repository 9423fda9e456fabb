// A Hugging Face checkpoint's weights: one model.safetensors or a sharded set described by
// model.safetensors.index.json. Files are memory-mapped; every header is validated on open
// (decoders/safetensors_header.h); tensors are materialised on request, on the requested
// device and dtype, straight from the mapping (no second full host copy).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "decoders/safetensors_header.h"

namespace ears {

// The LibTorch dtype of a file dtype, and back (std::nullopt: a dtype safetensors files here do not hold).
c10::ScalarType to_scalar_type(SafetensorsDtype dtype);
std::optional<SafetensorsDtype> from_scalar_type(c10::ScalarType type);

class Checkpoint {
 public:
  // dir holds model.safetensors, or model.safetensors.index.json + shards (a path to a single
  // .safetensors file also works). Throws ears::Error naming the file (and tensor) on any problem.
  static Checkpoint open(const std::filesystem::path& dir);

  bool contains(const std::string& name) const;
  std::vector<std::string> names() const;                 // sorted
  std::vector<int64_t> shape(const std::string& name) const;
  c10::ScalarType dtype(const std::string& name) const;   // stored dtype
  uint64_t total_bytes() const;                            // sum of tensor bytes

  // Loads `name` converted to (device, dtype). When expected_shape is given and differs, throws
  // "<file>: tensor '<name>' has shape [..] but config.json implies [..]". A missing tensor
  // throws "<dir>: tensor '<name>' not found (checkpoint has N tensors)".
  at::Tensor load(const std::string& name, c10::Device device, c10::ScalarType dtype,
                  const std::optional<std::vector<int64_t>>& expected_shape = std::nullopt) const;

  const std::filesystem::path& path() const { return path_; }

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

 private:
  Checkpoint();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::filesystem::path path_;
};

}  // namespace ears
