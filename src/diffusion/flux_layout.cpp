// fluxLayout: FLUX 3's layout prompt, the caption and its element table as one text (BFL's
// "FLUX 3 Image: bounding boxes"; docs/klein.md says what of it was verified).
#include <gizml/diffusion.h>
#include <gizml/error.h>

#include <nlohmann/json.hpp>
#include <set>

namespace gizml::diffusion {
namespace {

using Json = nlohmann::ordered_json;

bool validId(const std::string& id) {
  if (id.empty() || id[0] < 'a' || id[0] > 'z') return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

Json boxJson(const FluxBox& box, const std::string& what) {
  for (int64_t v : box)
    if (v < 0 || v > 1000)
      throw Error("fluxLayout: " + what + " has " + std::to_string(v) + ", outside [0, 1000]");
  if (box[2] <= box[0] || box[3] <= box[1])
    throw Error("fluxLayout: " + what + " [" + std::to_string(box[0]) + ", " + std::to_string(box[1]) + ", " +
                std::to_string(box[2]) + ", " + std::to_string(box[3]) +
                "] is empty (bottom must be below top, right beyond left)");
  return Json(box);
}

Json optionalBox(const std::optional<FluxBox>& box, const std::string& what) {
  return box ? boxJson(*box, what) : Json(nullptr);
}

Json row(const FluxElement& e) {
  const std::string what = "element " + e.id;
  if (!e.edit) return Json{{"id", e.id}, {"bbox", boxJson(e.bbox, what + "'s bbox")}, {"desc", e.desc}};
  if (!e.source && !e.target) throw Error("fluxLayout: " + what + " has neither a source nor a target box");
  if (e.from.empty() && e.source) throw Error("fluxLayout: " + what + " has a source box but no picture (from)");
  if (!e.from.empty() && !e.source) throw Error("fluxLayout: " + what + " comes from " + e.from + " without a source box");
  return Json{{"id", e.id},
              {"from", e.from.empty() ? Json(nullptr) : Json(e.from)},
              {"src_bbox", optionalBox(e.source, what + "'s source")},
              {"tgt_bbox", optionalBox(e.target, what + "'s target")},
              {"desc", e.desc}};
}

}  // namespace

std::string fluxLayout(const std::string& caption, const std::vector<FluxElement>& elements) {
  if (elements.empty()) return caption;
  if (caption.find_first_not_of(" \t\r\n") == std::string::npos) throw Error("fluxLayout: the caption is empty");
  std::string text = caption;
  Json table = Json::array();
  std::set<std::string> ids;
  for (const FluxElement& e : elements) {
    if (!validId(e.id))
      throw Error("fluxLayout: element id '" + e.id + "' is not lowercase letters, digits and _ from a letter");
    if (!ids.insert(e.id).second) throw Error("fluxLayout: element id '" + e.id + "' is repeated");
    if (e.desc.find_first_not_of(" \t\r\n") == std::string::npos)
      throw Error("fluxLayout: element " + e.id + " has no desc");
    if (e.edit != elements.front().edit)
      throw Error("fluxLayout: element " + e.id + " is an " + (e.edit ? "edit" : "image") + " row among " +
                  (e.edit ? "image" : "edit") + " rows");
    table.push_back(row(e));
    const std::string citation = "<" + e.id + ">";
    if (text.find(citation) == std::string::npos) text += " " + citation;
  }
  // Compact, the text as UTF-8 (not \u escapes): JSON.stringify's form. Invalid UTF-8 throws.
  try {
    return text + " " + table.dump(-1, ' ', false, Json::error_handler_t::strict);
  } catch (const nlohmann::json::exception&) {
    throw Error("fluxLayout: an element's desc is not valid UTF-8");
  }
}

}  // namespace gizml::diffusion
