#pragma once
/// @file
/// Collective: the processes of a data-parallel run, as a mechanism sees them — its rank, how many
/// there are, and the two collectives a DP-SGD step needs. The host implements it on LibTorch's
/// c10d (Gloo on the CPU, NCCL on GPUs; `privdiff run --nproc`, or torchrun's variables); a test
/// may implement it in-process. Every rank calls the collectives in the same order, with tensors of
/// the same shapes, or the run hangs until the host's timeout ends it.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <vector>

namespace privdiff::sdk {

class PRIVDIFF_SDK_API Collective {
 public:
  virtual ~Collective();
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// Replaces each tensor by its element-wise sum over the ranks (on every rank).
  virtual void all_reduce_sum(std::vector<at::Tensor>& tensors) = 0;
  /// Overwrites `tensor` on every rank with rank `root`'s (same shape and dtype everywhere).
  virtual void broadcast(at::Tensor& tensor, int root) = 0;
};

/// Rank 0's 1-D int64 tensor on every rank (the others pass anything: their sizes need not match).
PRIVDIFF_SDK_API at::Tensor broadcast_from_rank0(Collective& group, const at::Tensor& int64_vector);

/// Rank 0's flag on every rank: a decision (e.g. stop now) that all ranks must take together.
PRIVDIFF_SDK_API bool agree_with_rank0(Collective& group, bool flag);

}  // namespace privdiff::sdk
