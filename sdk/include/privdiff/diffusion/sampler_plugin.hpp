#pragma once
/// @file
/// A sampler plugin on the Karras schedule in one declaration. Samplers differ only in their id,
/// description, own keys and update rule; the KarrasSampler around the rule, the registration and
/// the plugin descriptor (which repeats the description) are the same for all and are made here:
///
///     at::Tensor my_rule(const privdiff::sdk::diffusion::KarrasRun& run) { ... }
///     PRIVDIFF_KARRAS_SAMPLER_PLUGIN("my_sampler", "0.1.0", "one line about it",
///                                    privdiff::sdk::diffusion::karras_sampler_schema(50), my_rule)

#include <privdiff/components/model.hpp>
#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/diffusion/sampling.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/plugin/registrar.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace privdiff::sdk::diffusion {

/// One call of a sampler's update rule (KarrasSampler::integrate): everything it reads, by reference.
struct KarrasRun {
  Model& model;
  const at::Tensor& noise;   ///< unit variance, [count, ...model.sample_shape()]
  const Conditioning& cond;  ///< labels int64 [count] (or undefined), captions (one per sample, or none)
  double guidance;           ///< classifier-free guidance weight w
  std::int64_t steps;        ///< the Karras schedule, from the sampler's keys
  double sigma_min, sigma_max, rho;
  const Config& config;      ///< the sampler's whole section, for its own keys (eta, s_churn, ...)
  at::Generator& generator;  ///< for stochastic rules
};

/// A sampler's update rule: from `run.noise` to samples in the model's sampler space.
using KarrasUpdateRule = at::Tensor (*)(const KarrasRun& run);

/// Registers under `id` a KarrasSampler whose integrate() calls `rule` (a function of the calling
/// plugin, which stays loaded for the life of the process). `schema`: karras_sampler_schema(...)
/// plus the sampler's own keys. Throws std::invalid_argument for a null rule, and as Registrar::add.
PRIVDIFF_SDK_API void add_karras_sampler(Registrar& registrar, std::string id, std::string description, Schema schema,
                                         KarrasUpdateRule rule);

}  // namespace privdiff::sdk::diffusion

/// Defines a whole sampler plugin: its registration function (add_karras_sampler) and its
/// descriptor (PRIVDIFF_PLUGIN), both with `description`. `schema` is an expression evaluated at
/// registration; `rule` a KarrasUpdateRule. Use once per library, at global scope.
#define PRIVDIFF_KARRAS_SAMPLER_PLUGIN(sampler_id, sampler_version, sampler_description, sampler_schema, sampler_rule) \
  namespace {                                                                                                          \
  void privdiff_register_karras_sampler(::privdiff::sdk::Registrar* registrar) {                                       \
    ::privdiff::sdk::diffusion::add_karras_sampler(*registrar, sampler_id, sampler_description, sampler_schema,        \
                                                   sampler_rule);                                                      \
  }                                                                                                                    \
  }                                                                                                                    \
  PRIVDIFF_PLUGIN(sampler_id, sampler_version, sampler_description, privdiff_register_karras_sampler)
