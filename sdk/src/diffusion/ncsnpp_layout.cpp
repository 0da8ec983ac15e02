// DPDM's checkpoint layout: its score_sde NIN names, and the NCSN++ configuration read off the
// weights' module sequence (then checked by building it and comparing every shape).
#include <privdiff/diffusion/ncsnpp.hpp>

#include <regex>
#include <stdexcept>

namespace privdiff::sdk::diffusion {

namespace {

const std::regex nin_name(R"((.*\.NIN_\d+)\.(weight|bias|W|b))");

using Shapes = std::map<std::string, std::vector<std::int64_t>>;

// Reads one module's tensors ("all_modules.N." + suffix) from the weights, whichever layout.
class ModuleReader {
 public:
  explicit ModuleReader(const Shapes& shapes) : shapes_(shapes) {}
  bool has(std::int64_t module, const std::string& suffix) const { return shapes_.count(key(module, suffix)) > 0; }
  const std::vector<std::int64_t>& shape(std::int64_t module, const std::string& suffix) const {
    const auto it = shapes_.find(key(module, suffix));
    if (it == shapes_.end()) fail(module, "has no " + suffix);
    return it->second;
  }
  bool is_attention(std::int64_t m) const { return has(m, "NIN_0.W") || has(m, "NIN_0.weight"); }
  bool is_resblock(std::int64_t m) const { return has(m, "Conv_0.weight") && has(m, "GroupNorm_0.weight"); }
  std::int64_t out_width(std::int64_t m) const { return shape(m, "Conv_0.weight").at(0); }
  // A resampling block keeps its width and still has the 1x1 shortcut.
  bool is_resample(std::int64_t m) const {
    return is_resblock(m) && has(m, "Conv_2.weight") && shape(m, "Conv_0.weight").at(0) == shape(m, "Conv_0.weight").at(1);
  }
  [[noreturn]] void fail(std::int64_t module, const std::string& what) const {
    throw std::invalid_argument("not DPDM's NCSN++ layout: all_modules." + std::to_string(module) + " " + what);
  }

 private:
  static std::string key(std::int64_t module, const std::string& suffix) {
    return "all_modules." + std::to_string(module) + "." + suffix;
  }
  const Shapes& shapes_;
};

// The down path from module `m` on: widths, blocks per level and attention, up to the middle.
std::int64_t read_down_path(const ModuleReader& r, std::int64_t m, NcsnppConfig& c) {
  std::vector<bool> attention;
  for (std::int64_t level = 0;; ++level) {
    std::int64_t blocks = 0;
    bool attended = false;
    // Every level but the last ends in a resampling block; the last has num_res_blocks blocks.
    while (r.is_resblock(m) && !r.is_resample(m) && (level == 0 || blocks < c.num_res_blocks)) {
      if (blocks == 0) c.ch_mult.push_back(r.out_width(m) / c.nf);
      ++blocks, ++m;
      if (r.is_attention(m)) attended = true, ++m;
      if (level == 0 && !r.is_resblock(m)) r.fail(m, "is neither a residual nor an attention block");
    }
    if (level == 0) {
      if (!r.is_resample(m)) r.fail(m, "should be the first level's down-sampling block (one level is not supported)");
      c.num_res_blocks = blocks;
    } else if (blocks != c.num_res_blocks) {
      r.fail(m, "ends level " + std::to_string(level) + " after " + std::to_string(blocks) + " blocks, not " +
                    std::to_string(c.num_res_blocks));
    }
    attention.push_back(attended);
    if (!r.is_resample(m)) break;
    ++m;
  }
  for (std::size_t level = 0; level < attention.size(); ++level) {
    if (attention[level]) c.attn_resolutions.push_back(c.image_size >> level);
  }
  return m;
}

}  // namespace

PortSource ncsnpp_port_source(const std::string& port_name) {
  std::smatch match;
  if (!std::regex_match(port_name, match, nin_name)) return {port_name, false};
  if (match[2] == "weight") return {match[1].str() + ".W", true};
  if (match[2] == "bias") return {match[1].str() + ".b", false};
  return {port_name, false};
}

bool looks_like_dpdm_ncsnpp(const std::vector<std::string>& names) {
  bool modules = false, nin = false;
  for (const auto& name : names) {
    if (name.rfind("all_modules.", 0) != 0) return false;
    modules = true;
    std::smatch match;
    if (std::regex_match(name, match, nin_name) && match[2] == "W") nin = true;
  }
  return modules && nin;
}

NcsnppConfig ncsnpp_config_from_shapes(const Shapes& shapes, std::int64_t image_size) {
  const ModuleReader r(shapes);
  NcsnppConfig c;
  c.image_size = image_size;
  c.ch_mult.clear();
  c.attn_resolutions.clear();
  // Module 0 is the class embedding [label_dim + 1, nf] unless it is already the first dense layer
  // [4 nf, nf], followed by the second [4 nf, 4 nf].
  const auto& first = r.shape(0, "weight");
  if (first.size() != 2) r.fail(0, "is not an embedding or a dense layer");
  const bool labelled = !(first[0] == 4 * first[1] && r.has(1, "weight") && r.shape(1, "weight") ==
                                                                               std::vector<std::int64_t>{first[0], first[0]});
  std::int64_t m = labelled ? 1 : 0;
  c.nf = first[1];
  c.label_dim = labelled ? first[0] - 1 : 0;
  m += 2;  // the two dense layers of the noise-level embedding
  const auto& conv_in = r.shape(m, "weight");
  if (conv_in.size() != 4 || conv_in[0] != c.nf) r.fail(m, "is not the input convolution to " + std::to_string(c.nf) + " channels");
  c.in_channels = conv_in[1];
  m = read_down_path(r, m + 1, c);
  // The output convolution is the last module.
  std::int64_t last = m;
  while (r.has(last + 1, "weight") || r.is_resblock(last + 1) || r.is_attention(last + 1)) ++last;
  c.out_channels = r.shape(last, "weight").at(0);
  // Build it and compare every tensor: a sequence that only looked right is refused here.
  Ncsnpp port(c);
  std::size_t count = 0;
  for (const auto& p : port.named_parameters(true)) {
    const auto direct = shapes.find(p.key());
    const PortSource source = ncsnpp_port_source(p.key());
    const auto found = direct != shapes.end() ? direct : shapes.find(source.name);
    if (found == shapes.end()) throw std::invalid_argument("not DPDM's NCSN++ layout: no " + source.name);
    std::vector<std::int64_t> want(p.value().sizes().begin(), p.value().sizes().end());
    if (found == shapes.find(source.name) && source.transposed) std::reverse(want.begin(), want.end());
    if (found->second != want) throw std::invalid_argument("not DPDM's NCSN++ layout: " + found->first + " has another shape");
    ++count;
  }
  if (count != shapes.size()) {
    throw std::invalid_argument("not DPDM's NCSN++ layout: " + std::to_string(shapes.size()) + " tensors for a network of " +
                                std::to_string(count));
  }
  return c;
}

}  // namespace privdiff::sdk::diffusion
