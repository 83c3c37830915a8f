// JPEG files through libjpeg-turbo, with the settings Pillow decodes with (its defaults: the
// accurate integer IDCT, JDCT_ISLOW, and fancy upsampling of subsampled chroma), so that both give
// the same pixels. libjpeg reports errors through error_exit, which here leaves by longjmp: the
// functions that hold the setjmp keep only trivially destructible locals, and their callers turn
// the message into a gizml::Error.
#include <cstdio>
// jpeglib.h needs size_t and FILE declared before it.
#include <jerror.h>
#include <jpeglib.h>

#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "image/codecs.h"

namespace gizml::image {
namespace {

// A progressive file may hold any number of scans, each a pass over the whole image: more than
// this is refused (libjpeg-turbo's djpeg -maxscans guards against the same denial of service).
constexpr int kMaxScans = 1000;
// The working memory libjpeg may take: a progressive file's coefficients of kMaxPixels pixels in
// three full-resolution components (2 bytes each) and room beside them.
constexpr long kMaxMemory = long(kMaxPixels) * 3 * 2 + (256L << 20);

struct JpegErrors {
  jpeg_error_mgr manager;  // first: libjpeg sees this struct as its jpeg_error_mgr
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 64];
};

[[noreturn]] void fail(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Level -1 is a warning. Data that ends early (which libjpeg would pad with grey) is an error, as
// in Pillow; the damaged data libjpeg resynchronises after, at the next restart marker, is read as
// Pillow reads it. Huffman-coded data that runs into any other marker (the end of the image, the
// next frame or scan) is a scan cut short as much, though libjpeg and Pillow pad the rest of the
// scan with grey: refused when libjpeg notices, before it decodes that rest (a few hundred bytes
// whose header claims kMaxPixels would otherwise cost the whole decode and resize), unless the
// scan is in its last row of blocks (some encoders leave out a last block's final bits, which
// libjpeg and Pillow read past). Arithmetic-coded data runs into markers by design, without this
// warning.
void onMessage(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) fail(cinfo);
  const auto* decompress = reinterpret_cast<j_decompress_ptr>(cinfo);
  const int marker = decompress->unread_marker;
  const bool restart = marker >= JPEG_RST0 && marker <= JPEG_RST0 + 7;
  const JDIMENSION rowsLeft = decompress->total_iMCU_rows - decompress->input_iMCU_row;  // this one too
  if (cinfo->err->msg_code == JWRN_HIT_MARKER && !restart && rowsLeft > 1) {
    auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
    std::snprintf(errors->message, sizeof errors->message,
                  "the file is truncated or damaged: a scan's data ends at the marker 0xff%02x with %u of its %u "
                  "rows of blocks to go (%u x %u pixels)",
                  marker, rowsLeft, decompress->total_iMCU_rows, decompress->image_width, decompress->image_height);
    std::longjmp(errors->jump, 1);
  }
}

void onProgress(j_common_ptr cinfo) {
  const auto* decompress = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (decompress->input_scan_number > kMaxScans) {
    auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
    std::snprintf(errors->message, sizeof errors->message, "more than %d progressive scans", kMaxScans);
    std::longjmp(errors->jump, 1);
  }
}

// jpeg_create_decompress, whose allocation may fail through error_exit too: false then.
bool create(j_decompress_ptr cinfo, JpegErrors* errors) {
  if (setjmp(errors->jump)) return false;
  jpeg_create_decompress(cinfo);
  return true;
}

// The header and the output colour space: false on an error.
bool readHeader(j_decompress_ptr cinfo, JpegErrors* errors, std::span<const uint8_t> bytes) {
  if (setjmp(errors->jump)) return false;
  jpeg_mem_src(cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));  // no bytes: an error
  jpeg_save_markers(cinfo, JPEG_APP0 + 1, 0xffff);  // APP1: EXIF
  jpeg_read_header(cinfo, TRUE);
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;  // grey becomes RGB by repeating it
  cinfo->dct_method = JDCT_ISLOW;
  cinfo->do_fancy_upsampling = TRUE;
  return true;
}

// The scanlines into out (output_components bytes a pixel): false on an error.
bool readScanlines(j_decompress_ptr cinfo, JpegErrors* errors, uint8_t* out, size_t rowBytes) {
  if (setjmp(errors->jump)) return false;
  jpeg_start_decompress(cinfo);
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = out + size_t(cinfo->output_scanline) * rowBytes;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  return true;
}

// The orientation of the first APP1 block that is EXIF (Pillow reads the first), else 1.
int orientation(const jpeg_decompress_struct& cinfo) {
  static constexpr uint8_t kExif[6] = {'E', 'x', 'i', 'f', 0, 0};
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m != nullptr; m = m->next)
    if (m->marker == JPEG_APP0 + 1 && m->data_length >= sizeof kExif && std::memcmp(m->data, kExif, sizeof kExif) == 0)
      return exifOrientation({m->data + sizeof kExif, m->data_length - sizeof kExif});
  return 1;
}

// Pillow's CMYK to RGB (Convert.c cmyk2rgb) of values stored as Adobe does, inverted, which Pillow
// assumes of every CMYK JPEG (its rawmode "CMYK;I").
uint8_t cmykChannel(uint8_t storedColour, uint8_t storedBlack) {
  const int notBlack = storedBlack;  // 255 - K
  const int product = (255 - storedColour) * notBlack + 128;
  return uint8_t(notBlack - (((product >> 8) + product) >> 8));
}

}  // namespace

Image decodeJpeg(std::span<const uint8_t> bytes) {
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
  cinfo.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = fail;
  errors.manager.emit_message = onMessage;
  cinfo.mem = nullptr;  // what jpeg_destroy_decompress reads when creation failed
  struct Decompressor {
    jpeg_decompress_struct* cinfo;
    ~Decompressor() { jpeg_destroy_decompress(cinfo); }
  } decompressor{&cinfo};
  if (!create(&cinfo, &errors)) throw Error(std::string("JPEG: ") + errors.message);
  jpeg_progress_mgr progress{};
  progress.progress_monitor = onProgress;
  cinfo.progress = &progress;
  cinfo.mem->max_memory_to_use = kMaxMemory;

  if (!readHeader(&cinfo, &errors, bytes)) throw Error(std::string("JPEG: ") + errors.message);
  checkSize("JPEG", cinfo.image_width, cinfo.image_height);
  const bool cmyk = cinfo.out_color_space == JCS_CMYK;
  const size_t channels = cmyk ? 4 : 3;
  const size_t width = cinfo.image_width, height = cinfo.image_height;
  std::vector<uint8_t> decoded(width * height * channels);
  if (!readScanlines(&cinfo, &errors, decoded.data(), width * channels))
    throw Error(std::string("JPEG: ") + errors.message);
  Image image{int64_t(width), int64_t(height), {}};
  if (cmyk) {
    image.pixels.resize(width * height * 3);
    for (size_t i = 0; i < width * height; ++i)
      for (size_t c = 0; c < 3; ++c) image.pixels[i * 3 + c] = cmykChannel(decoded[i * 4 + c], decoded[i * 4 + 3]);
  } else {
    image.pixels = std::move(decoded);
  }
  return orient(std::move(image), orientation(cinfo));
}

}  // namespace gizml::image
