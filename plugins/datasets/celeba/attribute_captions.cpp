#include "attribute_captions.hpp"

#include <privdiff/text/caption_templates.hpp>

#include <map>

namespace privdiff::plugins::celeba {

namespace {

enum class Kind { adjective, has, wearing };

struct Phrase {
  Kind kind;
  const char* text;
};

// Every attribute but Male (the noun) and Blurry (the photograph's, not the face's).
const std::map<std::string, Phrase>& phrases() {
  static const std::map<std::string, Phrase> table = {
      {"5_o_Clock_Shadow", {Kind::has, "a five o'clock shadow"}}, {"Arched_Eyebrows", {Kind::has, "arched eyebrows"}},
      {"Attractive", {Kind::adjective, "attractive"}},            {"Bags_Under_Eyes", {Kind::has, "bags under the eyes"}},
      {"Bald", {Kind::adjective, "bald"}},                        {"Bangs", {Kind::has, "bangs"}},
      {"Big_Lips", {Kind::has, "big lips"}},                      {"Big_Nose", {Kind::has, "a big nose"}},
      {"Black_Hair", {Kind::has, "black hair"}},                  {"Blond_Hair", {Kind::has, "blond hair"}},
      {"Brown_Hair", {Kind::has, "brown hair"}},                  {"Bushy_Eyebrows", {Kind::has, "bushy eyebrows"}},
      {"Chubby", {Kind::adjective, "chubby"}},                    {"Double_Chin", {Kind::has, "a double chin"}},
      {"Eyeglasses", {Kind::wearing, "eyeglasses"}},              {"Goatee", {Kind::has, "a goatee"}},
      {"Gray_Hair", {Kind::has, "gray hair"}},                    {"Heavy_Makeup", {Kind::wearing, "heavy makeup"}},
      {"High_Cheekbones", {Kind::has, "high cheekbones"}},        {"Mouth_Slightly_Open", {Kind::has, "a slightly open mouth"}},
      {"Mustache", {Kind::has, "a mustache"}},                    {"Narrow_Eyes", {Kind::has, "narrow eyes"}},
      {"No_Beard", {Kind::has, "no beard"}},                      {"Oval_Face", {Kind::has, "an oval face"}},
      {"Pale_Skin", {Kind::has, "pale skin"}},                    {"Pointy_Nose", {Kind::has, "a pointy nose"}},
      {"Receding_Hairline", {Kind::has, "a receding hairline"}},  {"Rosy_Cheeks", {Kind::has, "rosy cheeks"}},
      {"Sideburns", {Kind::has, "sideburns"}},                    {"Smiling", {Kind::adjective, "smiling"}},
      {"Straight_Hair", {Kind::has, "straight hair"}},            {"Wavy_Hair", {Kind::has, "wavy hair"}},
      {"Wearing_Earrings", {Kind::wearing, "earrings"}},          {"Wearing_Hat", {Kind::wearing, "a hat"}},
      {"Wearing_Lipstick", {Kind::wearing, "lipstick"}},          {"Wearing_Necklace", {Kind::wearing, "a necklace"}},
      {"Wearing_Necktie", {Kind::wearing, "a necktie"}},          {"Young", {Kind::adjective, "young"}}};
  return table;
}

// "a", "a and b", "a, b and c".
std::string listed(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  }
  return out;
}

}  // namespace

std::string attribute_caption(const std::vector<std::string>& names, const std::vector<bool>& values,
                              std::uint64_t seed, std::int64_t record) {
  bool male = false;
  std::vector<std::string> adjectives, has, wearing;
  for (std::size_t k = 0; k < names.size() && k < values.size(); ++k) {
    if (names[k] == "Male") male = values[k];
    const auto found = phrases().find(names[k]);
    if (!values[k] || found == phrases().end()) continue;
    auto& into = found->second.kind == Kind::adjective ? adjectives : found->second.kind == Kind::has ? has : wearing;
    into.emplace_back(found->second.text);
  }
  // The facial features in a drawn order (Fisher-Yates on the record's own draws), as a grammar would.
  for (std::size_t i = has.size(); i > 1; --i) {
    std::swap(has[i - 1], has[sdk::caption_choice(seed, record, i, i)]);
  }
  std::string subject;
  for (const auto& a : adjectives) subject += a + " ";
  subject += male ? "man" : "woman";
  const char* opener = sdk::caption_choice(seed, record, 0, 2) == 0 ? "The " : "This ";
  std::string caption = has.empty() ? std::string("A photo of a") + (subject[0] == 'a' ? "n " : " ") + subject + "."
                                    : opener + subject + " has " + listed(has) + ".";
  if (!wearing.empty()) caption += std::string(male ? " He" : " She") + " is wearing " + listed(wearing) + ".";
  return caption;
}

}  // namespace privdiff::plugins::celeba
