// Rows of a batch's conditioning (labels and captions together).
#include <privdiff/components/model.hpp>

#include <ATen/ATen.h>

#include <stdexcept>

namespace privdiff::sdk {

Conditioning select_rows(const Conditioning& cond, const at::Tensor& rows) {
  Conditioning out;
  if (cond.labels.defined()) out.labels = cond.labels.index_select(0, rows.to(cond.labels.device()));
  if (cond.captions.empty()) return out;
  const at::Tensor on_cpu = rows.to(at::kCPU).to(at::kLong).contiguous();
  const std::int64_t* r = on_cpu.data_ptr<std::int64_t>();
  out.captions.reserve(static_cast<std::size_t>(on_cpu.numel()));
  for (std::int64_t i = 0; i < on_cpu.numel(); ++i) {
    if (r[i] < 0 || r[i] >= static_cast<std::int64_t>(cond.captions.size())) {
      throw std::invalid_argument("select_rows: row " + std::to_string(r[i]) + " outside a batch of " +
                                  std::to_string(cond.captions.size()) + " captions");
    }
    out.captions.push_back(cond.captions[static_cast<std::size_t>(r[i])]);
  }
  return out;
}

}  // namespace privdiff::sdk
