// gizml::diffusion::fluxLayout against tests/reference/make_flux_layout_cases.py: BFL's layout
// prompt form with the element table written by Python's json (JSON.stringify's compact form),
// a new image's rows and an edit's, read from the cases' JSON by fluxElements and back from the
// table the prompt ends with; and every malformed element and table refused by name.
#include <gizml/diffusion.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/expect_error.h"
#include "diffusion/weight_fixture.h"

using namespace gizml;
using diffusion::FluxBox;
using diffusion::FluxElement;

namespace {

FluxElement box(const std::string& id, FluxBox b, const std::string& desc = "a thing") {
  FluxElement e;
  e.id = id;
  e.desc = desc;
  e.bbox = b;
  return e;
}

}  // namespace

TEST(FluxLayout, PromptsAsTheReference) {
  std::ifstream in(test::diffusionData("flux_layout_cases.json"));
  const nlohmann::json cases = nlohmann::json::parse(in);
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& c : cases) {
    const std::vector<FluxElement> elements = diffusion::fluxElements(c.at("elements"));
    EXPECT_EQ(diffusion::fluxLayout(c.at("caption"), elements), c.at("prompt").get<std::string>());
    // The table the prompt ends with reads back as the same elements.
    const std::string prompt = c.at("prompt");
    const auto table = nlohmann::ordered_json::parse(prompt.substr(prompt.find(" [{") + 1));
    EXPECT_EQ(diffusion::fluxLayout(c.at("caption"), diffusion::fluxElements(table)), prompt);
  }
}

TEST(FluxLayout, NoElementsLeavesTheCaption) {
  EXPECT_EQ(diffusion::fluxLayout("A red fox in fresh snow", {}), "A red fox in fresh snow");
}

TEST(FluxLayout, RefusesBadElements) {
  const FluxBox whole{0, 0, 1000, 1000};
  expectError([&] { diffusion::fluxLayout("  ", {box("a_1", whole)}); }, {"caption is empty"});
  expectError([&] { diffusion::fluxLayout("x", {box("Cat_1", whole)}); }, {"'Cat_1'", "lowercase"});
  expectError([&] { diffusion::fluxLayout("x", {box("1cat", whole)}); }, {"'1cat'"});
  expectError([&] { diffusion::fluxLayout("x", {box("a_1", whole), box("a_1", whole)}); }, {"'a_1'", "repeated"});
  expectError([&] { diffusion::fluxLayout("x", {box("a_1", {0, 0, 1001, 10})}); }, {"a_1's bbox", "1001", "[0, 1000]"});
  expectError([&] { diffusion::fluxLayout("x", {box("a_1", {-1, 0, 10, 10})}); }, {"-1"});
  expectError([&] { diffusion::fluxLayout("x", {box("a_1", {500, 0, 500, 10})}); }, {"a_1's bbox", "empty"});
  expectError([&] { diffusion::fluxLayout("x", {box("a_1", whole, " ")}); }, {"a_1 has no desc"});
  expectError([&] { diffusion::fluxLayout("x", {box("a_1", whole, "bad \xff utf-8")}); }, {"not valid UTF-8"});
  FluxElement edit{.id = "b_1", .desc = "moved", .edit = true, .from = "ref_image_0", .source = whole, .target = whole};
  expectError([&] { diffusion::fluxLayout("x", {box("a_1", whole), edit}); }, {"b_1", "edit row among image rows"});
  edit.source.reset();
  expectError([&] { diffusion::fluxLayout("x", {edit}); }, {"b_1 comes from ref_image_0", "without a source box"});
  edit.from.clear();
  edit.source = whole;
  expectError([&] { diffusion::fluxLayout("x", {edit}); }, {"b_1 has a source box but no picture"});
  edit.source.reset();
  edit.target.reset();
  expectError([&] { diffusion::fluxLayout("x", {edit}); }, {"b_1 has neither"});
}

TEST(FluxLayout, RefusesBadTables) {
  const auto read = [](const char* json) { return diffusion::fluxElements(nlohmann::ordered_json::parse(json)); };
  expectError([&] { read(R"({"id": "a_1"})"); }, {"not a JSON list"});
  expectError([&] { read(R"([3])"); }, {"element 0 is not an object"});
  expectError([&] { read(R"([{"id": "a_1", "bbox": [0, 0, 9, 9]}])"); }, {"element 0", "no desc"});
  expectError([&] { read(R"([{"id": 7, "bbox": [0, 0, 9, 9], "desc": "d"}])"); }, {"element 0", "no id"});
  expectError([&] { read(R"([{"id": "a_1", "bbox": [0, 0, 9], "desc": "d"}])"); }, {"(a_1)'s bbox", "4 numbers"});
  expectError([&] { read(R"([{"id": "a_1", "bbox": [0, 0, 9.5, 9], "desc": "d"}])"); }, {"9.5", "whole number"});
  expectError([&] { read(R"([{"id": "a_1", "bbox": [0, 0, 1e30, 9], "desc": "d"}])"); }, {"whole number"});
  expectError([&] { read(R"([{"id": "a_1", "bbox": [0, 0, 18446744073709551615, 9], "desc": "d"}])"); },
              {"whole number"});
  expectError([&] { read(R"([{"id": "a_1", "bbox": [0, 0, 9, 9], "desc": "d", "color": "red"}])"); },
              {"element 0", "'color'", "image row"});
  expectError([&] { read(R"([{"id": "a_1", "desc": "d", "from": null, "tgt_bbox": [0, 0, 9, 9]}])"); },
              {"(a_1)", "src_bbox"});
  expectError([&] { read(R"([{"id": "a_1", "desc": "d", "from": 3, "src_bbox": null, "tgt_bbox": null}])"); },
              {"(a_1)'s from"});
  expectError([&] { read(R"([{"id": "a_1", "desc": "d", "from": null, "src_bbox": "top", "tgt_bbox": null}])"); },
              {"(a_1)'s src_bbox", "or null"});
  nlohmann::ordered_json big = nlohmann::ordered_json::array();
  for (size_t i = 0; i <= diffusion::kMaxFluxElements; ++i) big.push_back(nlohmann::ordered_json::object());
  expectError([&] { diffusion::fluxElements(big); }, {"more than 1000"});
  expectError([] { diffusion::readFluxElements("[{\"id\": "); }, {"layout is not JSON"});
  expectError([] { diffusion::readFluxElements(std::string(100000, '[')); }, {"layout is", "deeper"});
  expectError([&] { read(R"([{"id": "a_1", "bbox": [[[0]], 0, 9, 9], "desc": "d"}])"); }, {"holds array"});
  // Read, then refused by fluxLayout: a box beyond the range.
  expectError([&] { diffusion::fluxLayout("x", read(R"([{"id": "a_1", "bbox": [0, 0, 1001, 9], "desc": "d"}])")); },
              {"1001"});
}
