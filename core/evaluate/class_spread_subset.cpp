#include "evaluate/class_spread_subset.hpp"

#include <ATen/ATen.h>

namespace privdiff::core {

sdk::LabelledImages class_spread_subset(const sdk::LabelledImages& set, std::int64_t count) {
  if (set.count() <= count) return set;
  const at::Tensor labels = set.labels.to(at::kCPU, at::kLong);
  const std::int64_t classes = labels.max().item<std::int64_t>() + 1;
  // An image's place in its class as a fraction of the class (its rank + 1/2, over the class's
  // count): taking the smallest fractions first draws from every class in proportion to its size.
  const at::Tensor one_hot = at::one_hot(labels, classes);
  const at::Tensor rank = (one_hot.cumsum(0) - one_hot).gather(1, labels.unsqueeze(1)).squeeze(1);
  const at::Tensor class_count = one_hot.sum(0).index_select(0, labels);
  const at::Tensor place = (rank.to(at::kDouble) + 0.5) / class_count.to(at::kDouble);
  const at::Tensor first = std::get<1>(place.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
  const at::Tensor chosen = std::get<0>(first.narrow(0, 0, count).sort());  // back into the set's order
  sdk::LabelledImages out{set.images.index_select(0, chosen.to(set.images.device())),
                          set.labels.index_select(0, chosen.to(set.labels.device())), {}};
  if (!set.prompts.empty()) {
    const auto* index = chosen.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < chosen.numel(); ++i) out.prompts.push_back(set.prompts.at(static_cast<std::size_t>(index[i])));
  }
  return out;
}

}  // namespace privdiff::core
