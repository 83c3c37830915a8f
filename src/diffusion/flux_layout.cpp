// fluxLayout: FLUX 3's layout prompt, the caption and its element table as one text (BFL's
// "FLUX 3 Image: bounding boxes"; docs/klein.md says what of it was verified).
#include <gizml/diffusion.h>
#include <gizml/error.h>

#include <nlohmann/json.hpp>
#include <set>

#include "core/json_input.h"

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

// table[i]'s box `key`: four whole numbers (range and order are fluxLayout's to check), or
// nullopt where null is allowed.
std::optional<FluxBox> boxAt(const Json& j, const char* key, const std::string& what, bool nullable) {
  const Json& v = j.at(key);
  if (v.is_null() && nullable) return std::nullopt;
  if (!v.is_array() || v.size() != 4)
    throw Error("fluxElements: " + what + "'s " + key + " is not a list of 4 numbers" + (nullable ? " or null" : ""));
  FluxBox box{};
  for (size_t k = 0; k < 4; ++k) {
    if (!v[k].is_number_integer() || (v[k].is_number_unsigned() && v[k].get<uint64_t>() > 1000))
      throw Error("fluxElements: " + what + "'s " + key + " holds " +
                  (v[k].is_number() ? v[k].dump().substr(0, 40) : std::string(v[k].type_name())) +
                  ", not a whole number from 0 to 1000");
    box[k] = v[k].get<int64_t>();
  }
  return box;
}

}  // namespace

std::vector<FluxElement> fluxElements(const nlohmann::ordered_json& table) {
  if (!table.is_array()) throw Error("fluxElements: the layout is not a JSON list of elements");
  if (table.size() > kMaxFluxElements)
    throw Error("fluxElements: " + std::to_string(table.size()) + " elements, more than " +
                std::to_string(kMaxFluxElements));
  std::vector<FluxElement> elements;
  for (size_t i = 0; i < table.size(); ++i) {
    const Json& j = table[i];
    std::string what = "element " + std::to_string(i);
    if (!j.is_object()) throw Error("fluxElements: " + what + " is not an object");
    const bool edit = !j.contains("bbox");
    for (const auto& [key, value] : j.items()) {
      const bool known = key == "id" || key == "desc" || (edit ? key == "from" || key == "src_bbox" || key == "tgt_bbox"
                                                               : key == "bbox");
      if (!known)
        throw Error("fluxElements: " + what + " has '" + key.substr(0, 40) + "', which is not " +
                    (edit ? "an edit row's (id, from, src_bbox, tgt_bbox, desc)" : "an image row's (id, bbox, desc)"));
    }
    for (const char* key : {"id", "desc"})
      if (!j.contains(key) || !j[key].is_string()) throw Error("fluxElements: " + what + " has no " + key + " text");
    FluxElement e;
    e.id = j["id"].get<std::string>();
    e.desc = j["desc"].get<std::string>();
    what += " (" + e.id.substr(0, 40) + ")";
    if (!edit) {
      e.bbox = *boxAt(j, "bbox", what, false);
    } else {
      e.edit = true;
      for (const char* key : {"from", "src_bbox", "tgt_bbox"})
        if (!j.contains(key)) throw Error("fluxElements: " + what + " has no bbox (an image row) nor " + key);
      if (!j["from"].is_null() && !j["from"].is_string())
        throw Error("fluxElements: " + what + "'s from is not a picture's name (ref_image_K) or null");
      e.from = j["from"].is_null() ? "" : j["from"].get<std::string>();
      e.source = boxAt(j, "src_bbox", what, true);
      e.target = boxAt(j, "tgt_bbox", what, true);
    }
    elements.push_back(std::move(e));
  }
  return elements;
}

std::vector<FluxElement> readFluxElements(std::string_view json) {
  nlohmann::ordered_json table;
  try {
    table = parseJson(json);
  } catch (const JsonTooDeep& e) {
    throw Error("readFluxElements: the layout is " + std::string(e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("readFluxElements: the layout is not JSON: ") + e.what());
  }
  return fluxElements(table);
}

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
