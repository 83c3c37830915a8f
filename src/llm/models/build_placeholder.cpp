// Stands in for the architectures until they land (branch models defines buildLanguageModel;
// the merge deletes this file): every converted folder is refused by name.
#include <gizml/error.h>

#include "llm/models/language_model.h"
#include "llm/quant/converted_model.h"

namespace gizml::llm {

std::unique_ptr<LanguageModel> buildLanguageModel(const ConvertedModel& weights) {
  throw Error(weights.folder() + ": architecture " + architectureName(weights.config().architecture) +
              " is not built into this gizml");
}

}  // namespace gizml::llm
