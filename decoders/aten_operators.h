// at::Tensor's binary operators (a + b, a * 2.0, 1.0 - a, a < b, a == 2, a & b, ...) without
// <ATen/ATen.h>. <ATen/core/Tensor.h> has the methods and the compound ones (+=, -a, a[i]); the
// binary ones live in <ATen/TensorOperators.h>, which includes all of <ATen/Functions.h> (every
// operator: seconds of parsing per translation unit) unless AT_PER_OPERATOR_HEADERS is defined,
// in which case it includes only <ATen/ops/empty_like.h> (for Scalar - Tensor and the like).
// Same definitions either way (LibTorch 1.13 and 2.x); the macro is defined for this one include
// only, so no other header sees it.
#pragma once

#include <ATen/core/Tensor.h>

#ifdef AT_PER_OPERATOR_HEADERS
#include <ATen/TensorOperators.h>
#else
#define AT_PER_OPERATOR_HEADERS
#include <ATen/TensorOperators.h>
#undef AT_PER_OPERATOR_HEADERS
#endif
