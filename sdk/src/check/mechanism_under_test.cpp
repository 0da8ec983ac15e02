#include <privdiff/check/mechanism_under_test.hpp>

#include <stdexcept>
#include <utility>

namespace privdiff::sdk::check {

const std::vector<std::string>& keys_a_check_sets() {
  static const std::vector<std::string> keys{"batch_size", "steps",     "noise_multiplier", "max_grad_norm",
                                             "seed",       "secure_noise", "physical_batch_size", "optimizer",
                                             "lr",         "momentum",  "weight_decay",     "ema",
                                             "augment_ops", "train"};
  return keys;
}

std::vector<std::string> keys_missing_for_check(const Schema& schema) {
  std::vector<std::string> missing;
  for (const auto& key : keys_a_check_sets()) {
    if (!schema.find(key)) missing.push_back(key);
  }
  return missing;
}

std::map<std::string, ConfigValue> values_for_check(std::map<std::string, ConfigValue> v, const MechanismSettings& s) {
  v["batch_size"] = s.batch_size;
  if (s.steps > 0) {
    v.erase("epochs");
    v["steps"] = s.steps;
  }
  v["noise_multiplier"] = s.noise_multiplier ? ConfigValue{*s.noise_multiplier} : ConfigValue{std::string("auto")};
  v["secure_noise"] = !s.seed.has_value();
  if (s.seed) {
    v["seed"] = static_cast<std::int64_t>(*s.seed);
  } else {
    v.erase("seed");
  }
  v["physical_batch_size"] = s.physical_batch_size;
  if (s.max_grad_norm) v["max_grad_norm"] = *s.max_grad_norm;
  v["optimizer"] = std::string("sgd");
  v["lr"] = s.lr;
  v["momentum"] = 0.0;
  v["weight_decay"] = 0.0;
  v["ema"] = 0.0;
  v["augment_ops"] = std::int64_t{0};
  v["train"] = std::string("all");
  for (const char* selection : {"train_roles", "train_blocks", "train_attention_from", "train_pattern"}) v.erase(selection);
  return v;
}

MechanismUnderTest mechanism_from_config(Schema schema, std::string path, std::map<std::string, ConfigValue> values,
                                         std::function<std::unique_ptr<Mechanism>(const Config&)> create) {
  const std::vector<std::string> missing = keys_missing_for_check(schema);
  if (!missing.empty()) {
    std::string list;
    for (const auto& k : missing) list += (list.empty() ? "" : ", ") + k;
    throw std::invalid_argument(path + ": a mechanism check sets DP-SGD's recipe keys, and this mechanism has no " +
                                list + " (derive it from DpSgdMechanism with engine::dp_sgd_schema)");
  }
  return [schema = std::move(schema), path = std::move(path), values = std::move(values),
          create = std::move(create)](const MechanismSettings& settings) {
    return create(make_config(schema, path, values_for_check(values, settings)));
  };
}

engine::DpSgdOptions options_for_check(engine::DpSgdOptions o, const MechanismSettings& s) {
  o.batch_size = s.batch_size;
  if (s.steps > 0) {
    o.epochs.reset();
    o.steps = s.steps;
  }
  o.noise_multiplier = s.noise_multiplier;
  o.secure_noise = !s.seed.has_value();
  o.seed = s.seed;
  o.physical_batch_size = s.physical_batch_size;
  if (s.max_grad_norm) o.max_grad_norm = *s.max_grad_norm;
  o.optimizer = "sgd";
  o.lr = s.lr;
  o.momentum = 0.0;
  o.weight_decay = 0.0;
  o.ema = 0.0;
  o.augment.ops_per_image = 0;
  o.trainable = engine::ParameterSelection{};
  return o;
}

}  // namespace privdiff::sdk::check
