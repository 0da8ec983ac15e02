#include <privdiff/diffusion/unet_recipe.hpp>

namespace privdiff::sdk::diffusion {

namespace {

// LDM's SpatialTransformer options, with DP-LDM's MNIST values as defaults.
void add_transformer_keys(Schema& schema) {
  schema.add(Key::integer("transformer_heads").at_least(1).defaults(2).doc("attention heads (DP-LDM: 2)"))
      .add(Key::integer("transformer_head_dim").at_least(0).defaults(0)
               .doc("width of a head; 0: the block's channels / heads (LDM's num_head_channels = -1)"))
      .add(Key::integer("transformer_depth").at_least(1).defaults(1).doc("transformer blocks per SpatialTransformer"))
      .add(Key::integer("context_dim").at_least(0).defaults(0)
               .doc("width of the class embedding the transformers cross-attend to; 0: 4 x channels"));
}

}  // namespace

Schema& add_unet_keys(Schema& schema, const UnetKeyDefaults& d) {
  schema.add(Key::integer("channels").at_least(4).defaults(d.channels.value).doc(d.channels.doc))
      .add(Key::integer_list("channel_mult").at_least(1).defaults(ConfigValue{d.channel_mult.value})
               .doc(d.channel_mult.doc))
      .add(Key::integer("num_res_blocks").at_least(1).defaults(d.num_res_blocks.value).doc(d.num_res_blocks.doc))
      .add(Key::integer_list("attention_resolutions").at_least(1).defaults(ConfigValue{d.attention_resolutions.value})
               .doc(d.attention_resolutions.doc));
  if (d.spatial_transformers) add_transformer_keys(schema);
  return schema.add(Key::number("dropout").at_least(0).less_than(1).defaults(0.0).doc("dropout in residual blocks"))
      .add(Key::integer("num_classes").at_least(static_cast<double>(d.min_classes)).defaults(10).doc(d.num_classes_doc))
      .add(Key::string("preconditioning").one_of({"edm", "vp", "ve", "v"}).defaults("edm").doc(d.preconditioning_doc))
      .add(Key::number("label_dropout").at_least(0).less_than(1).defaults(0.1)
               .doc("probability of training with the null label (classifier-free guidance), per example"))
      .add(Key::integer("image_size").at_least(4).defaults(28).doc("image height and width"))
      .add(Key::integer("image_channels").at_least(1).defaults(1).doc("image channels"));
}

UnetConfig unet_config(const Config& c, std::int64_t input_channels, std::int64_t input_size) {
  UnetConfig u{input_channels, input_size, c.get_int("channels"), c.get_int_list("channel_mult"),
               c.get_int("num_res_blocks"), c.get_int_list("attention_resolutions"), c.get_double("dropout"),
               c.get_int("num_classes")};
  if (c.has("transformer_heads")) {
    u.transformer_heads = c.get_int("transformer_heads");
    u.transformer_head_dim = c.get_int("transformer_head_dim");
    u.transformer_depth = c.get_int("transformer_depth");
    u.context_dim = c.get_int("context_dim");
  }
  return u;
}

}  // namespace privdiff::sdk::diffusion
