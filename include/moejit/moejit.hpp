#pragma once
/// moejit: a JIT kernel-generation compiler for Mixture-of-Experts GPU ops.

#include <moejit/context.hpp>
#include <moejit/contract.hpp>
#include <moejit/dtype.hpp>
#include <moejit/error.hpp>
#include <moejit/op.hpp>
#include <moejit/options.hpp>
#include <moejit/spec.hpp>
#include <moejit/tensor.hpp>
#include <moejit/warmup.hpp>
