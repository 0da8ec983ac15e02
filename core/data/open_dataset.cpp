#include "data/open_dataset.hpp"

#include <stdexcept>

namespace privdiff::core {

std::unique_ptr<sdk::Dataset> open_dataset(const sdk::Config& data) {
  // Dataset readers (IDX / Fashion-MNIST first) are the next piece of the pipeline; until they
  // exist a recipe with training stages is validated and composed but cannot train.
  const std::string name = data.has("dataset") ? data.get_string("dataset") : "(none)";
  throw std::runtime_error("data.dataset: cannot open dataset '" + name +
                           "': this build of privdiff has no dataset readers yet");
}

}  // namespace privdiff::core
