#pragma once
// Captions of CelebA faces made from their 40 binary attributes, in the manner of MM-CelebA-HQ's
// (Xia et al., TediGAN, CVPR 2021: ten sentences per image generated from the attributes by a
// probabilistic grammar). An approximation, not a copy: our phrasings and one caption per image, e.g.
// "The smiling young woman has wavy hair, arched eyebrows and high cheekbones. She is wearing lipstick."
// docs/text.md lists the phrases. Deterministic for (seed, record).

#include <cstdint>
#include <string>
#include <vector>

namespace privdiff::plugins::celeba {

/// The caption of record `record` whose attributes `names` (list_attr_celeba.txt's line 2) are
/// `values`. Attributes the phrases do not know (another list's columns) are left out.
std::string attribute_caption(const std::vector<std::string>& names, const std::vector<bool>& values,
                              std::uint64_t seed, std::int64_t record);

}  // namespace privdiff::plugins::celeba
