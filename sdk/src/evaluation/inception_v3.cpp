#include <privdiff/evaluation/inception_v3.hpp>
#include <privdiff/io/content_hash.hpp>
#include <privdiff/io/shape_text.hpp>

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/serialize.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace privdiff::sdk::evaluation {

// A conv unit or a mixed block: everything between the stem's max pools and the global pool.
class InceptionLayer : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
};

namespace {

struct Kernel {
  std::int64_t height = 1, width = 1, stride = 1, pad_height = 0, pad_width = 0;
};
constexpr Kernel k3{3, 3};
constexpr Kernel k3_same{3, 3, 1, 1, 1};
constexpr Kernel k3_stride2{3, 3, 2};
constexpr Kernel k1x3{1, 3, 1, 0, 1};
constexpr Kernel k3x1{3, 1, 1, 1, 0};
constexpr Kernel k1x7{1, 7, 1, 0, 3};
constexpr Kernel k7x1{7, 1, 1, 3, 0};

// TF-Inception's unit (torchvision's BasicConv2d): bias-free convolution, BatchNorm eps 1e-3, ReLU.
class ConvUnit : public InceptionLayer {
 public:
  ConvUnit(std::int64_t in, std::int64_t out, Kernel k) {
    conv_ = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, {k.height, k.width})
                                                          .stride(k.stride)
                                                          .padding({k.pad_height, k.pad_width})
                                                          .bias(false)));
    bn_ = register_module("bn", torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(out).eps(0.001)));
  }
  at::Tensor forward(const at::Tensor& x) override { return at::relu(bn_->forward(conv_->forward(x))); }

 private:
  torch::nn::Conv2d conv_{nullptr};
  torch::nn::BatchNorm2d bn_{nullptr};
};

// TensorFlow's 3x3 average pool leaves the zero padding out of the average (the FID blocks' patch).
at::Tensor tf_average_pool(const at::Tensor& x) { return at::avg_pool2d(x, {3, 3}, {1, 1}, {1, 1}, false, false); }
at::Tensor max_pool_same(const at::Tensor& x) { return at::max_pool2d(x, {3, 3}, {1, 1}, {1, 1}); }
at::Tensor max_pool_stride2(const at::Tensor& x) { return at::max_pool2d(x, {3, 3}, {2, 2}); }

// A mixed block's branches are chains of conv units registered under torchvision's names.
class MixedBlock : public InceptionLayer {
 protected:
  using Chain = std::vector<std::shared_ptr<ConvUnit>>;
  struct Unit {
    const char* name;
    std::int64_t in, out;
    Kernel kernel;
  };
  Chain chain(std::initializer_list<Unit> units) {
    Chain out;
    for (const Unit& u : units) out.push_back(register_module(u.name, std::make_shared<ConvUnit>(u.in, u.out, u.kernel)));
    return out;
  }
  static at::Tensor run(const Chain& units, at::Tensor x) {
    for (const auto& unit : units) x = unit->forward(x);
    return x;
  }
};

// 35x35 (torchvision's InceptionA, FID pool): 1x1 | 1x1, 5x5 | 1x1, 3x3, 3x3 | avg pool, 1x1.
class MixedA : public MixedBlock {
 public:
  MixedA(std::int64_t in, std::int64_t pool_features, std::int64_t d) {
    one_ = chain({{"branch1x1", in, 64 / d, {}}});
    five_ = chain({{"branch5x5_1", in, 48 / d, {}}, {"branch5x5_2", 48 / d, 64 / d, {5, 5, 1, 2, 2}}});
    double_ = chain({{"branch3x3dbl_1", in, 64 / d, {}},
                     {"branch3x3dbl_2", 64 / d, 96 / d, k3_same},
                     {"branch3x3dbl_3", 96 / d, 96 / d, k3_same}});
    pool_ = chain({{"branch_pool", in, pool_features, {}}});
  }
  at::Tensor forward(const at::Tensor& x) override {
    return at::cat({run(one_, x), run(five_, x), run(double_, x), run(pool_, tf_average_pool(x))}, 1);
  }

 private:
  Chain one_, five_, double_, pool_;
};

// 35x35 -> 17x17 (InceptionB).
class MixedB : public MixedBlock {
 public:
  MixedB(std::int64_t in, std::int64_t d) {
    three_ = chain({{"branch3x3", in, 384 / d, k3_stride2}});
    double_ = chain({{"branch3x3dbl_1", in, 64 / d, {}},
                     {"branch3x3dbl_2", 64 / d, 96 / d, k3_same},
                     {"branch3x3dbl_3", 96 / d, 96 / d, k3_stride2}});
  }
  at::Tensor forward(const at::Tensor& x) override {
    return at::cat({run(three_, x), run(double_, x), max_pool_stride2(x)}, 1);
  }

 private:
  Chain three_, double_;
};

// 17x17 with factorised 7x7 convolutions (InceptionC, FID pool).
class MixedC : public MixedBlock {
 public:
  MixedC(std::int64_t in, std::int64_t c7, std::int64_t d) {
    one_ = chain({{"branch1x1", in, 192 / d, {}}});
    seven_ = chain({{"branch7x7_1", in, c7, {}}, {"branch7x7_2", c7, c7, k1x7}, {"branch7x7_3", c7, 192 / d, k7x1}});
    double_ = chain({{"branch7x7dbl_1", in, c7, {}},
                     {"branch7x7dbl_2", c7, c7, k7x1},
                     {"branch7x7dbl_3", c7, c7, k1x7},
                     {"branch7x7dbl_4", c7, c7, k7x1},
                     {"branch7x7dbl_5", c7, 192 / d, k1x7}});
    pool_ = chain({{"branch_pool", in, 192 / d, {}}});
  }
  at::Tensor forward(const at::Tensor& x) override {
    return at::cat({run(one_, x), run(seven_, x), run(double_, x), run(pool_, tf_average_pool(x))}, 1);
  }

 private:
  Chain one_, seven_, double_, pool_;
};

// 17x17 -> 8x8 (InceptionD).
class MixedD : public MixedBlock {
 public:
  MixedD(std::int64_t in, std::int64_t d) {
    three_ = chain({{"branch3x3_1", in, 192 / d, {}}, {"branch3x3_2", 192 / d, 320 / d, k3_stride2}});
    seven_ = chain({{"branch7x7x3_1", in, 192 / d, {}},
                    {"branch7x7x3_2", 192 / d, 192 / d, k1x7},
                    {"branch7x7x3_3", 192 / d, 192 / d, k7x1},
                    {"branch7x7x3_4", 192 / d, 192 / d, k3_stride2}});
  }
  at::Tensor forward(const at::Tensor& x) override {
    return at::cat({run(three_, x), run(seven_, x), max_pool_stride2(x)}, 1);
  }

 private:
  Chain three_, seven_;
};

// 8x8 with split 1x3 / 3x1 heads (InceptionE). The FID network average-pools the pool branch of
// Mixed_7b (without the padding) and max-pools that of Mixed_7c (the TF graph's quirk).
class MixedE : public MixedBlock {
 public:
  MixedE(std::int64_t in, std::int64_t d, bool max_pool) : max_pool_(max_pool) {
    one_ = chain({{"branch1x1", in, 320 / d, {}}});
    three_ = chain({{"branch3x3_1", in, 384 / d, {}}});
    three_a_ = chain({{"branch3x3_2a", 384 / d, 384 / d, k1x3}});
    three_b_ = chain({{"branch3x3_2b", 384 / d, 384 / d, k3x1}});
    double_ = chain({{"branch3x3dbl_1", in, 448 / d, {}}, {"branch3x3dbl_2", 448 / d, 384 / d, k3_same}});
    double_a_ = chain({{"branch3x3dbl_3a", 384 / d, 384 / d, k1x3}});
    double_b_ = chain({{"branch3x3dbl_3b", 384 / d, 384 / d, k3x1}});
    pool_ = chain({{"branch_pool", in, 192 / d, {}}});
  }
  at::Tensor forward(const at::Tensor& x) override {
    const at::Tensor t = run(three_, x), u = run(double_, x);
    const at::Tensor pooled = max_pool_ ? max_pool_same(x) : tf_average_pool(x);
    return at::cat({run(one_, x), run(three_a_, t), run(three_b_, t), run(double_a_, u), run(double_b_, u),
                    run(pool_, pooled)},
                   1);
  }

 private:
  bool max_pool_;
  Chain one_, three_, three_a_, three_b_, double_, double_a_, double_b_, pool_;
};

}  // namespace

FidInceptionV3::FidInceptionV3(std::int64_t width_divisor) : width_divisor_(width_divisor) {
  const std::int64_t d = width_divisor;
  // Every Inception channel count is a multiple of 16.
  if (d != 1 && d != 2 && d != 4 && d != 8 && d != 16) {
    throw std::invalid_argument("FidInceptionV3: width_divisor " + std::to_string(d) + " is not 1, 2, 4, 8 or 16");
  }
  const auto stem = [&](const char* name, std::int64_t in, std::int64_t out, Kernel k) {
    stem_.push_back(register_module(name, std::make_shared<ConvUnit>(in, out, k)));
  };
  stem("Conv2d_1a_3x3", 3, 32 / d, k3_stride2);
  stem("Conv2d_2a_3x3", 32 / d, 32 / d, k3);
  stem("Conv2d_2b_3x3", 32 / d, 64 / d, k3_same);
  stem("Conv2d_3b_1x1", 64 / d, 80 / d, {});
  stem("Conv2d_4a_3x3", 80 / d, 192 / d, k3);
  const auto mixed = [&](const char* name, std::shared_ptr<InceptionLayer> block) {
    mixed_.push_back(register_module(name, std::move(block)));
  };
  mixed("Mixed_5b", std::make_shared<MixedA>(192 / d, 32 / d, d));
  mixed("Mixed_5c", std::make_shared<MixedA>(256 / d, 64 / d, d));
  mixed("Mixed_5d", std::make_shared<MixedA>(288 / d, 64 / d, d));
  mixed("Mixed_6a", std::make_shared<MixedB>(288 / d, d));
  mixed("Mixed_6b", std::make_shared<MixedC>(768 / d, 128 / d, d));
  mixed("Mixed_6c", std::make_shared<MixedC>(768 / d, 160 / d, d));
  mixed("Mixed_6d", std::make_shared<MixedC>(768 / d, 160 / d, d));
  mixed("Mixed_6e", std::make_shared<MixedC>(768 / d, 192 / d, d));
  mixed("Mixed_7a", std::make_shared<MixedD>(768 / d, d));
  mixed("Mixed_7b", std::make_shared<MixedE>(1280 / d, d, false));
  mixed("Mixed_7c", std::make_shared<MixedE>(2048 / d, d, true));
  fc_ = register_module("fc", torch::nn::Linear(2048 / d, inception_classes));
}

FidInceptionV3::~FidInceptionV3() = default;

InceptionOutputs FidInceptionV3::forward(const at::Tensor& images) {
  if (images.dim() != 4 || images.size(1) != 3) {
    throw std::invalid_argument("FidInceptionV3: expected images [N, 3, H, W], got " + std::to_string(images.dim()) +
                                " dimensions");
  }
  at::Tensor x = images;
  for (std::size_t i = 0; i < stem_.size(); ++i) {
    x = stem_[i]->forward(x);
    if (i == 2 || i == 4) x = max_pool_stride2(x);  // torchvision's maxpool1 and maxpool2
  }
  for (const auto& block : mixed_) x = block->forward(x);
  InceptionOutputs out;
  out.pool3 = at::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
  out.logits = fc_->forward(out.pool3);
  return out;
}

UnverifiedInceptionWeights::~UnverifiedInceptionWeights() = default;

namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_record(const std::string& name) { return name.rfind("privdiff.", 0) == 0; }

const std::string release = "pytorch-fid's pt_inception-2015-12-05-6726825d.pth";
const std::string expected_file = "expected " + release + " converted by scripts/convert_inception_weights.py";

struct StateDict {
  std::map<std::string, at::Tensor> tensors;
  std::map<std::string, std::string> records;  ///< the conversion record ("privdiff." names)
};

// The tensors of a torch.save file, by name, and its conversion record. LibTorch's pickle_load
// reads only the zip format and turns collections.OrderedDict (what state_dict() returns) into
// None: those two get the conversion command; other files are named for what they are.
StateDict read_state_dict(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) throw std::runtime_error(file.string() + ": no such file");
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto not_weights = [&](const std::string& what) {
    return std::runtime_error(file.string() + ": " + what + ", not Inception weights (" + expected_file + ")");
  };
  const auto convert = [&](const std::string& what) {
    return std::runtime_error(file.string() + ": " + what + "; convert it once with: /usr/bin/python3 "
                              "scripts/convert_inception_weights.py " + file.string() + " OUT.pth");
  };
  const auto starts_with = [&](const std::string& magic) {
    return bytes.size() >= magic.size() && std::equal(magic.begin(), magic.end(), bytes.begin());
  };
  if (!starts_with("PK")) {  // not a zip archive
    if (starts_with("\x80")) {
      throw convert("a pickle in torch.save's legacy format (torch < 1.6, as " + release + " is), which LibTorch "
                    "cannot read");
    }
    throw not_weights(starts_with("\x89PNG") ? "a PNG image"
                      : bytes.empty()          ? "an empty file"
                                               : "not a torch.save file");
  }
  c10::IValue value;
  try {
    value = torch::pickle_load(bytes);
  } catch (const std::exception& e) {
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    const std::string what = c10_error ? c10_error->what_without_backtrace() : e.what();
    if (what.find("Expected GenericDict but got None") != std::string::npos) {
      throw convert("its dict is a collections.OrderedDict (what state_dict() returns), which LibTorch reads as None");
    }
    if (what.find("__torch__") != std::string::npos) {
      throw not_weights("a LibTorch archive of modules (torch::save; a privdiff checkpoint.pt is one)");
    }
    throw not_weights("an unreadable or damaged torch.save file (LibTorch: " + what.substr(0, what.find('\n')) + ")");
  }
  if (!value.isGenericDict()) {
    throw not_weights("a torch.save file holding a " + std::string(value.tagKind()) + ", not a dict");
  }
  StateDict out;
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.key().isString()) throw not_weights("a dict whose keys are not all strings");
    const std::string& name = entry.key().toStringRef();
    if (is_record(name) && entry.value().isString()) {
      out.records.emplace(name, entry.value().toStringRef());
    } else if (entry.value().isTensor()) {
      out.tensors.emplace(name, entry.value().toTensor());
    } else {
      throw not_weights("a dict whose entry '" + name + "' is a " + std::string(entry.value().tagKind()) +
                        ", not a tensor");
    }
  }
  return out;
}

// The width divisor of a state dict, from its first convolution ([32 / d, 3, 3, 3]).
std::int64_t width_divisor_of(const fs::path& file, const std::map<std::string, at::Tensor>& tensors) {
  const std::string name = "Conv2d_1a_3x3.conv.weight";
  const std::string expected = "expected [32, 3, 3, 3] (pytorch-fid's Inception-V3; test networks: [32 / d, 3, 3, 3] "
                               "for a width divisor d of 2, 4, 8 or 16)";
  const auto found = tensors.find(name);
  if (found == tensors.end()) throw std::runtime_error(file.string() + ": no tensor '" + name + "' (" + expected + ")");
  const at::Tensor& w = found->second;
  const std::int64_t out = w.dim() == 4 ? w.size(0) : 0;
  if (w.dim() != 4 || w.size(1) != 3 || w.size(2) != 3 || w.size(3) != 3 || out < 2 || 32 % out != 0) {
    throw std::runtime_error(file.string() + ": tensor '" + name + "' has shape " + shape_text(w.sizes()) + ", " +
                             expected);
  }
  return 32 / out;
}

// Why a full-width network's file is not provably pytorch-fid's weights ("" when it is).
std::string verification_problem(const StateDict& state, const std::string& tensors_sha256) {
  const auto source = state.records.find(source_sha256_key);
  if (source == state.records.end()) {
    return std::string("no conversion record ('") + source_sha256_key + "'): not written by scripts/"
           "convert_inception_weights.py, which checks that its input is " + release;
  }
  if (source->second != pytorch_fid_weights_sha256) {
    return "converted from a file whose SHA-256 is " + source->second + ", not " + release + " (" +
           pytorch_fid_weights_sha256 + ")";
  }
  const auto recorded = state.records.find(tensors_sha256_key);
  if (recorded == state.records.end() || recorded->second != tensors_sha256) {
    return "its tensors' SHA-256 is " + tensors_sha256 + ", not the " +
           (recorded == state.records.end() ? std::string("(missing) one") : recorded->second) +
           " recorded when it was converted: changed since";
  }
  return "";
}

}  // namespace

std::string inception_tensors_sha256(const std::map<std::string, at::Tensor>& tensors) {
  Sha256 hash;  // std::map: names in byte order, as Python's sorted() orders ASCII names
  for (const auto& [name, tensor] : tensors) {
    if (is_record(name) || ends_with(name, "num_batches_tracked")) continue;
    std::string shape;
    for (std::size_t i = 0; i < tensor.sizes().size(); ++i) {
      if (i) shape += ',';  // appended piece by piece: GCC 12 warns (-Wrestrict) on a chained +
      shape += std::to_string(tensor.size(i));
    }
    hash.update(name + "\n" + shape + "\n");
    // float32 as the host stores it: little-endian on every machine LibTorch supports.
    const at::Tensor values = tensor.detach().to(at::kCPU, at::kFloat).contiguous();
    hash.update(values.data_ptr(), values.nbytes());
  }
  return hash.hex_digest();
}

FidInceptionWeights load_fid_inception(const fs::path& file, bool allow_unverified) {
  const StateDict state = read_state_dict(file);
  const std::int64_t d = width_divisor_of(file, state.tensors);
  const std::string not_comparable = "; FIDs on it are not comparable with published ones";
  std::string reason;
  if (d != 1) {
    reason = "tensor 'Conv2d_1a_3x3.conv.weight' has shape " +
             shape_text(state.tensors.at("Conv2d_1a_3x3.conv.weight").sizes()) + ", expected [32, 3, 3, 3]: a width/" +
             std::to_string(d) + " Inception-V3 (a test network), not " + release;
    if (!allow_unverified) throw UnverifiedInceptionWeights(file.string() + ": " + reason + not_comparable);
  }
  FidInceptionWeights out;
  out.network = std::make_shared<FidInceptionV3>(d);
  const std::string context = d == 1 ? " (pytorch-fid's Inception-V3)"
                                     : " (width_divisor " + std::to_string(d) + ", from Conv2d_1a_3x3.conv.weight)";
  std::map<std::string, at::Tensor> expected;
  for (const auto& item : out.network->named_parameters()) expected.emplace(item.key(), item.value());
  for (const auto& item : out.network->named_buffers()) {
    if (!ends_with(item.key(), "num_batches_tracked")) expected.emplace(item.key(), item.value());
  }
  for (const auto& [name, tensor] : state.tensors) {
    if (!expected.count(name) && !ends_with(name, "num_batches_tracked")) {
      throw std::runtime_error(file.string() + ": unexpected tensor '" + name + "' " + shape_text(tensor.sizes()) +
                               ", not part of the FID Inception-V3 (which has no AuxLogits)");
    }
  }
  for (const auto& [name, target] : expected) {
    const auto found = state.tensors.find(name);
    if (found == state.tensors.end()) {
      throw std::runtime_error(file.string() + ": missing tensor '" + name + "', expected shape " +
                               shape_text(target.sizes()) + context);
    }
    const at::Tensor& source = found->second;
    if (source.sizes() != target.sizes()) {
      throw std::runtime_error(file.string() + ": tensor '" + name + "' has shape " + shape_text(source.sizes()) +
                               ", expected " + shape_text(target.sizes()) + context);
    }
    if (!at::isFloatingType(source.scalar_type())) {
      throw std::runtime_error(file.string() + ": tensor '" + name + "' is not floating point");
    }
  }
  out.tensors_sha256 = inception_tensors_sha256(state.tensors);
  if (reason.empty()) reason = verification_problem(state, out.tensors_sha256);
  if (!reason.empty() && !allow_unverified) {
    throw UnverifiedInceptionWeights(file.string() + ": " + reason + not_comparable);
  }
  out.verified = reason.empty();
  out.unverified_reason = reason;
  at::NoGradGuard no_grad;
  for (auto& [name, target] : expected) target.copy_(state.tensors.at(name));
  out.network->eval();
  return out;
}

InceptionOutputs inception_features(FidInceptionV3& network, const at::Tensor& images, std::int64_t batch) {
  if (images.dim() != 4 || (images.size(1) != 1 && images.size(1) != 3)) {
    throw std::invalid_argument("inception_features: expected images [N, 1 or 3, H, W]");
  }
  if (batch < 1) throw std::invalid_argument("inception_features: batch must be positive");
  const at::Device device = network.parameters().front().device();
  network.eval();
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> pools, logits;
  const std::array<std::int64_t, 2> side{inception_input_size, inception_input_size};
  for (std::int64_t start = 0; start < images.size(0); start += batch) {
    at::Tensor x = images.narrow(0, start, std::min(batch, images.size(0) - start)).to(device, at::kFloat);
    if (x.size(1) == 1) x = x.expand({-1, 3, -1, -1});
    // pytorch-fid resizes [0, 1] pixels and then maps them to [-1, 1]; bilinear resizing is
    // linear and preserves constants, so it commutes with that affine map: resizing [-1, 1]
    // pixels directly gives the same input up to float rounding (~1e-7).
    x = at::upsample_bilinear2d(x.contiguous(), at::IntArrayRef(side), /*align_corners=*/false);
    InceptionOutputs out = network.forward(x);
    pools.push_back(out.pool3.to(at::kCPU));
    logits.push_back(out.logits.to(at::kCPU));
  }
  if (pools.empty()) {
    return {at::empty({0, network.feature_dimension()}), at::empty({0, inception_classes})};
  }
  return {at::cat(pools, 0), at::cat(logits, 0)};
}

InceptionScore inception_score(const at::Tensor& logits, std::int64_t splits) {
  if (logits.dim() != 2 || splits < 1 || logits.size(0) < splits) {
    throw std::invalid_argument("inception_score: expected logits [N, K] with N >= splits >= 1");
  }
  const std::int64_t n = logits.size(0);
  const at::Tensor log_p = at::log_softmax(logits.to(at::kCPU, at::kDouble), 1);
  const at::Tensor p = log_p.exp();
  std::vector<double> scores;
  for (std::int64_t i = 0; i < splits; ++i) {
    const std::int64_t lo = i * n / splits, hi = (i + 1) * n / splits;
    const at::Tensor p_i = p.slice(0, lo, hi), log_p_i = log_p.slice(0, lo, hi);
    const at::Tensor log_marginal = p_i.mean(0, /*keepdim=*/true).log();
    // 0 * log 0 = 0: a class whose probability underflows everywhere in the split adds nothing.
    const at::Tensor terms = at::where(p_i > 0, p_i * (log_p_i - log_marginal), at::zeros_like(p_i));
    scores.push_back(std::exp(terms.sum(1).mean().item<double>()));
  }
  InceptionScore out;
  for (double s : scores) out.mean += s / static_cast<double>(splits);
  for (double s : scores) out.std += (s - out.mean) * (s - out.mean) / static_cast<double>(splits);
  out.std = std::sqrt(out.std);
  return out;
}

}  // namespace privdiff::sdk::evaluation
