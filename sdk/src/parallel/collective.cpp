#include <privdiff/parallel/collective.hpp>

#include <ATen/ATen.h>

namespace privdiff::sdk {

Collective::~Collective() = default;

at::Tensor broadcast_from_rank0(Collective& group, const at::Tensor& int64_vector) {
  at::Tensor size = at::full({1}, group.rank() == 0 ? int64_vector.numel() : 0, at::kLong);
  group.broadcast(size, 0);
  at::Tensor out = group.rank() == 0 ? int64_vector.to(at::kLong).contiguous().clone()
                                     : at::empty({size.item<std::int64_t>()}, at::kLong);
  if (out.numel() > 0) group.broadcast(out, 0);
  return out;
}

bool agree_with_rank0(Collective& group, bool flag) {
  at::Tensor value = at::full({1}, flag ? 1 : 0, at::kLong);
  group.broadcast(value, 0);
  return value.item<std::int64_t>() != 0;
}

}  // namespace privdiff::sdk
