#pragma once
// The evaluators of DPDM's protocol, one file each, registered by one plugin (dpdm_evaluation.cpp).

#include <privdiff/plugin/registrar.hpp>

namespace privdiff::plugins::dpdm_evaluation {

void register_dpdm_classifiers(sdk::Registrar* registrar);
void register_feature_cnn(sdk::Registrar* registrar);

}  // namespace privdiff::plugins::dpdm_evaluation
