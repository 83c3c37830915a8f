// PNG files through libpng's classic API (its simplified API converts 16-bit samples as linear
// light, which Pillow does not). libpng reports errors by longjmp: the functions that hold a
// setjmp keep only trivially destructible locals, and their callers turn the message into a
// gizml::Error.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "image/codecs.h"

namespace gizml::image {
namespace {

// libpng's own limits, below which our size check (checkSize) then runs: a side's length, the
// ancillary chunks kept and the memory one of them may take when decompressed (iCCP, zTXt).
constexpr uint32_t kChunkCacheMax = 128;
constexpr png_alloc_size_t kChunkMallocMax = 8 << 20;
constexpr int kCompressionLevel = 4;  // ComfyUI's SaveImage
// deflate's largest ratio (a 258-byte match in under 2 bits, and a little): a file of n bytes holds
// at most this many times n bytes of rows, so a header that asks for more is of a truncated file,
// refused before its pixels are allocated.
constexpr uint64_t kMaxDeflateRatio = 1032;

// What libpng's callbacks see: the bytes read or written, and the last error's message.
struct PngStream {
  std::span<const uint8_t> input;
  size_t position = 0;
  std::vector<uint8_t>* output = nullptr;
  char message[256] = "";
  char warning[256] = "";  // the last warning, which often says why an error follows
};

[[noreturn]] void fail(png_structp png, png_const_charp text) {
  auto* stream = static_cast<PngStream*>(png_get_error_ptr(png));
  std::snprintf(stream->message, sizeof stream->message, "%s", text);
  png_longjmp(png, 1);
}

// Warnings are about things libpng recovers from (a known-bad sRGB profile, a damaged ancillary
// chunk it skips), which Pillow reads past too; but an error that follows one names it only there
// ("Invalid IHDR data" after "Image width exceeds user limit in IHDR").
void keepWarning(png_structp png, png_const_charp text) {
  auto* stream = static_cast<PngStream*>(png_get_error_ptr(png));
  std::snprintf(stream->warning, sizeof stream->warning, "%s", text);
}

Error failure(const char* what, const PngStream& stream) {
  std::string message = std::string(what) + ": " + stream.message;
  if (stream.warning[0] != '\0') message += std::string(" (libpng's last warning: ") + stream.warning + ")";
  return Error(message);
}

void readBytes(png_structp png, png_bytep out, size_t count) {
  auto* stream = static_cast<PngStream*>(png_get_io_ptr(png));
  if (stream->input.size() - stream->position < count) png_error(png, "the file is truncated");
  std::memcpy(out, stream->input.data() + stream->position, count);
  stream->position += count;
}

void writeBytes(png_structp png, png_bytep data, size_t count) {
  auto* stream = static_cast<PngStream*>(png_get_io_ptr(png));
  bool grown = true;
  try {
    stream->output->insert(stream->output->end(), data, data + count);
  } catch (const std::bad_alloc&) {
    grown = false;  // png_error leaves by longjmp, which must not cross the handler
  }
  if (!grown) png_error(png, "out of memory for the encoded file");
}

void flushNothing(png_structp) {}

// The header, and the transformations to 8-bit RGB (see image.h): false on an error.
bool readHeader(png_structp png, png_infop info, png_uint_32* width, png_uint_32* height, size_t* storedRowBytes) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  *storedRowBytes = png_get_rowbytes(png, info);  // as stored, before the transformations
  png_set_expand(png);  // palette to RGB, grey under 8 bits to 8, tRNS to an alpha (dropped below)
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  *width = png_get_image_width(png, info);
  *height = png_get_image_height(png, info);
  if (png_get_channels(png, info) != 3 || png_get_bit_depth(png, info) != 8)
    png_error(png, "libpng did not convert the image to 8-bit RGB");
  return true;
}

bool readRows(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  return true;
}

bool writeImage(png_structp png, png_infop info, png_uint_32 width, png_uint_32 height, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, kCompressionLevel);
  png_write_info(png, info);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  return true;
}

std::vector<png_bytep> rowPointers(const uint8_t* pixels, int64_t width, int64_t height) {
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (int64_t y = 0; y < height; ++y) rows[size_t(y)] = const_cast<png_bytep>(pixels + y * width * 3);
  return rows;
}

}  // namespace

Image decodePng(std::span<const uint8_t> bytes) {
  PngStream stream{bytes};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &stream, fail, keepWarning);
  check(png != nullptr, "PNG: libpng could not start a reader (out of memory)");
  png_infop info = png_create_info_struct(png);
  struct Reader {
    png_structp* png;
    png_infop* info;
    ~Reader() { png_destroy_read_struct(png, info, nullptr); }
  } reader{&png, &info};
  check(info != nullptr, "PNG: libpng could not start a reader (out of memory)");
  png_set_read_fn(png, &stream, readBytes);
  png_set_user_limits(png, png_uint_32(kMaxSide), png_uint_32(kMaxSide));
  png_set_chunk_cache_max(png, kChunkCacheMax);
  png_set_chunk_malloc_max(png, kChunkMallocMax);

  png_uint_32 width = 0, height = 0;
  size_t storedRowBytes = 0;
  if (!readHeader(png, info, &width, &height, &storedRowBytes)) throw failure("PNG", stream);
  checkSize("PNG", width, height);
  const uint64_t storedBytes = uint64_t(storedRowBytes + 1) * height;  // each row has its filter byte
  if (storedBytes > kMaxDeflateRatio * bytes.size())
    throw Error("PNG: the file is truncated: its " + std::to_string(width) + " x " + std::to_string(height) +
                " pixels are " + std::to_string(storedBytes) + " bytes, more than " + std::to_string(bytes.size()) +
                " bytes of deflate can hold");
  Image image{width, height, std::vector<uint8_t>(size_t(width) * height * 3)};
  std::vector<png_bytep> rows = rowPointers(image.pixels.data(), width, height);
  if (!readRows(png, rows.data())) throw failure("PNG", stream);
  // An eXIf chunk before the pixels (one after them is not read: png_read_end is not called).
  png_uint_32 exifBytes = 0;
  png_bytep exif = nullptr;
  if (png_get_eXIf_1(png, info, &exifBytes, &exif) == 0) return image;
  return orient(std::move(image), exifOrientation({exif, exifBytes}));
}

std::vector<uint8_t> encodePng(const Image& image) {
  check(image.width >= 1 && image.height >= 1 && image.width <= kMaxSide && image.height <= kMaxSide,
        "image::encodePng: " + std::to_string(image.width) + " x " + std::to_string(image.height) +
            " pixels is not a PNG size gizml writes (each side 1 to " + std::to_string(kMaxSide) + ")");
  check(image.pixels.size() == size_t(image.width * image.height * 3),
        "image::encodePng: " + std::to_string(image.pixels.size()) + " bytes of pixels for " +
            std::to_string(image.width) + " x " + std::to_string(image.height) + " RGB pixels");
  std::vector<uint8_t> out;
  PngStream stream{{}, 0, &out};
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &stream, fail, keepWarning);
  check(png != nullptr, "PNG: libpng could not start a writer (out of memory)");
  png_infop info = png_create_info_struct(png);
  struct Writer {
    png_structp* png;
    png_infop* info;
    ~Writer() { png_destroy_write_struct(png, info); }
  } writer{&png, &info};
  check(info != nullptr, "PNG: libpng could not start a writer (out of memory)");
  png_set_write_fn(png, &stream, writeBytes, flushNothing);
  std::vector<png_bytep> rows = rowPointers(image.pixels.data(), image.width, image.height);
  if (!writeImage(png, info, png_uint_32(image.width), png_uint_32(image.height), rows.data()))
    throw failure("image::encodePng", stream);
  return out;
}

}  // namespace gizml::image
