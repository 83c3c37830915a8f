// gizml::diffusion::fluxLayout against tests/reference/make_flux_layout_cases.py: BFL's layout
// prompt form with the element table written by Python's json (JSON.stringify's compact form),
// a new image's rows and an edit's; and every malformed element refused by name.
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

std::optional<FluxBox> boxOf(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  return FluxBox{j[0].get<int64_t>(), j[1].get<int64_t>(), j[2].get<int64_t>(), j[3].get<int64_t>()};
}

FluxElement elementOf(const nlohmann::json& j) {
  FluxElement e;
  e.id = j.at("id");
  e.desc = j.at("desc");
  if (j.contains("bbox")) {
    e.bbox = *boxOf(j.at("bbox"));
    return e;
  }
  e.edit = true;
  e.from = j.at("from").is_null() ? "" : j.at("from").get<std::string>();
  e.source = boxOf(j.at("src_bbox"));
  e.target = boxOf(j.at("tgt_bbox"));
  return e;
}

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
    std::vector<FluxElement> elements;
    for (const auto& e : c.at("elements")) elements.push_back(elementOf(e));
    EXPECT_EQ(diffusion::fluxLayout(c.at("caption"), elements), c.at("prompt").get<std::string>());
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
