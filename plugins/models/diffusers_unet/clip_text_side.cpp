#include "clip_text_side.hpp"

#include <privdiff/config/key_value_error.hpp>
#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/text_encoders/caption_tokens.hpp>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <filesystem>
#include <optional>
#include <stdexcept>

namespace privdiff::plugins::diffusers_unet {

using namespace privdiff::sdk;
namespace fs = std::filesystem;

namespace {

// The CLIPTextModel folder the key names (config.json, model.safetensors), its weights loaded, frozen.
std::shared_ptr<text_encoders::ClipTextModel> encoder_of(const Config& c, std::int64_t width) {
  const std::string at = c.path() + ".text_encoder";
  const fs::path dir = c.get_string("text_encoder");
  if (dir.empty()) {
    throw KeyValueError(at, "the UNet2DConditionModel cross-attends to a text encoder's states: name its CLIPTextModel "
                            "folder (a Stable Diffusion pipeline's text_encoder/)");
  }
  if (!fs::is_regular_file(dir / "config.json") || !fs::is_regular_file(dir / "model.safetensors")) {
    throw KeyValueError(at, dir.string() + " is not a transformers model folder (config.json and model.safetensors)");
  }
  std::shared_ptr<text_encoders::ClipTextModel> encoder;
  try {
    encoder = std::make_shared<text_encoders::ClipTextModel>(
        text_encoders::clip_text_config(read_file(dir / "config.json"), (dir / "config.json").string()));
    load_pretrained_weights(dir / "model.safetensors", *encoder);  // transformers 4 or 5 names
  } catch (const std::exception& e) {
    throw KeyValueError(at, e.what());
  }
  if (encoder->config().hidden_size != width) {
    throw KeyValueError(at, "its hidden_size is " + std::to_string(encoder->config().hidden_size) + ", but the UNet's "
                            "cross_attention_dim is " + std::to_string(width) + " (another model's text encoder?)");
  }
  for (auto& p : encoder->parameters()) p.set_requires_grad(false);
  encoder->eval();
  return encoder;
}

// The pad token of a tokenizer folder's tokenizer_config.json: "!" (id 0) for SD 2.x, else <|endoftext|>.
ClipTokenizer::Padding padding_of(const fs::path& folder) {
  const fs::path config = folder / "tokenizer_config.json";
  if (!fs::is_regular_file(config)) return ClipTokenizer::Padding::end_of_text;
  const nlohmann::json j = nlohmann::json::parse(read_file(config), nullptr, false);
  if (!j.is_object() || !j.contains("pad_token")) return ClipTokenizer::Padding::end_of_text;
  const nlohmann::json& pad = j["pad_token"];
  const std::string token = pad.is_string() ? pad.get<std::string>() : pad.is_object() ? pad.value("content", "") : "";
  return token == "!" ? ClipTokenizer::Padding::zero : ClipTokenizer::Padding::end_of_text;
}

// The key's merges (a tokenizer/ folder's merges.txt, or the file itself), as wide a vocabulary as the
// encoder's and a context it has positions for.
ClipTokenizer tokenizer_of(const Config& c, const text_encoders::ClipTextModel& encoder) {
  const std::string at = c.path() + ".tokenizer";
  const fs::path given = c.get_string("tokenizer");
  if (given.empty()) {
    throw KeyValueError(at, "the text encoder reads CLIP's token ids: name the pipeline's tokenizer/ folder (its "
                            "merges.txt) or a merges file (open_clip's bpe_simple_vocab_16e6.txt.gz)");
  }
  const bool folder = fs::is_directory(given);
  const auto& t = encoder.config();
  std::optional<ClipTokenizer> tokenizer;
  try {
    tokenizer = ClipTokenizer::from_file(folder ? given / "merges.txt" : given, static_cast<std::size_t>(t.max_position_embeddings),
                                         folder ? padding_of(given) : ClipTokenizer::Padding::end_of_text);
  } catch (const std::exception& e) {
    throw KeyValueError(at, e.what());
  }
  if (static_cast<std::int64_t>(tokenizer->vocabulary_size()) != t.vocab_size) {
    throw KeyValueError(at, std::to_string(tokenizer->vocabulary_size()) + " tokens, but the text encoder has " +
                                std::to_string(t.vocab_size) + " (the tokenizer of another model?)");
  }
  return std::move(*tokenizer);
}

}  // namespace

ClipTextSide::ClipTextSide(const Config& c, std::int64_t cross_attention_dim)
    : encoder_(encoder_of(c, cross_attention_dim)), tokenizer_(tokenizer_of(c, *encoder_)) {}

at::Tensor ClipTextSide::hidden_states(const std::vector<std::string>& captions, std::int64_t n, c10::Device device,
                                       at::ScalarType dtype) {
  const at::Tensor w = encoder_->parameters().front();  // (a copy: parameters() is a temporary)
  if (w.device() != device || w.scalar_type() != dtype) encoder_->to(device, dtype);
  const at::Tensor ids = text_encoders::caption_token_ids(tokenizer_, captions, n, device, "diffusers_unet");
  torch::NoGradGuard no_grad;
  return encoder_->forward(ids).last_hidden_state;  // SD passes no mask
}

}  // namespace privdiff::plugins::diffusers_unet
