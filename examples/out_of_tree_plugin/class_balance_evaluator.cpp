// class_balance: an out-of-tree evaluator. How far the samples' class frequencies are from the real
// test split's: the total variation distance between the two label histograms (0 = the same
// proportions, 1 = no class in common). A few lines on the SDK's Evaluator interface.
#include <privdiff/components/evaluator.hpp>
#include <privdiff/plugin/export.hpp>

#include <ATen/ATen.h>

namespace zcdp_example {

using namespace privdiff::sdk;

class ClassBalance : public Evaluator {
 public:
  explicit ClassBalance(const Config&) {}

  EvaluationResult evaluate(const EvaluationInput& in) override {
    const LabelledImages& test = in.real("test");
    auto frequencies = [&](const at::Tensor& labels) {
      return at::bincount(labels.to(at::kLong), {}, in.num_classes).to(at::kDouble) / labels.size(0);
    };
    EvaluationResult result;
    const double distance = 0.5 * (frequencies(in.samples.labels) - frequencies(test.labels)).abs().sum().item<double>();
    result.metrics.emplace_back("label_tv_distance", distance);
    result.provenance = "total variation distance of the label histograms (samples vs " + in.real_name + " test)";
    result.counts = {{"samples", in.samples.count()}, {"real_test", test.count()}};
    return result;
  }
};

void register_evaluator(Registrar* registrar) {
  registrar->add<ClassBalance>("class_balance", "how far the samples' class frequencies are from the real data's",
                               Schema{});
}

}  // namespace zcdp_example

PRIVDIFF_PLUGIN("class_balance", "0.1.0", "an out-of-tree evaluator: label histogram distance",
                zcdp_example::register_evaluator)
