#include "llm/formats/byte_source.h"

#include "core/mapped_file.h"

namespace gizml::llm {

ByteSource ByteSource::map(const std::string& path) {
  auto file = std::make_shared<core::MappedFile>(path);
  ByteSource source;
  source.data_ = file->data();
  source.size_ = file->size();
  source.name_ = path;
  source.mapped_ = file.get();
  source.owner_ = std::move(file);
  return source;
}

ByteSource ByteSource::own(std::vector<uint8_t> bytes, std::string name) {
  auto buffer = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  ByteSource source;
  source.data_ = buffer->data();
  source.size_ = buffer->size();
  source.name_ = std::move(name);
  source.owner_ = std::move(buffer);
  return source;
}

void ByteSource::releasePages(const uint8_t* p, size_t n) const {
  if (mapped_) mapped_->releasePages(p, n);
}

}  // namespace gizml::llm
