// checkPicture (language_model.h): what the engine checks as a request arrives and the model as
// a feed does, in one place.
#include <gizml/error.h>

#include "llm/language_model.h"

namespace gizml::llm {

void checkPicture(const Picture& p, const ModelConfig& config, const std::string& what) {
  const auto side = [](int64_t v) { return v > 0 && v <= (int64_t{1} << 20); };
  check(side(p.t) && side(p.h) && side(p.w) && p.t * p.h * p.w <= (int64_t{1} << 24),
        what + "a grid of " + std::to_string(p.t) + " x " + std::to_string(p.h) + " x " + std::to_string(p.w) + " rows");
  const int64_t rows = p.t * p.h * p.w;
  check(p.rows.dtype() == DType::F32 && p.rows.shape() == tensor::Shape{rows, config.hiddenSize},
        what + "rows " + tensor::shapeText(p.rows.shape()) + " " + dtypeName(p.rows.dtype()) + ", expected F32 [" +
            std::to_string(rows) + ", " + std::to_string(config.hiddenSize) + "]");
  check(static_cast<int64_t>(p.deepstack.size()) <= config.numLayers,
        what + std::to_string(p.deepstack.size()) + " deepstack rows for " + std::to_string(config.numLayers) + " layers");
  for (const tensor::Tensor& d : p.deepstack)
    check(d.dtype() == DType::F32 && d.shape() == p.rows.shape(),
          what + "deepstack rows " + tensor::shapeText(d.shape()) + ", expected its rows' F32 " +
              tensor::shapeText(p.rows.shape()));
}

}  // namespace gizml::llm
