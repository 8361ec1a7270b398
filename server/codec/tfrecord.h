// TFRecord framing (TensorFlow's record file format, as tf.io.TFRecordWriter writes it). Each
// record is
//   uint64 length (little endian) | uint32 masked CRC-32C of those 8 bytes |
//   length bytes of data        | uint32 masked CRC-32C of the data
// where masked(crc) = rotate_right(crc, 15) + 0xa282ead8. Only uncompressed files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace mf::codec {

// CRC-32C (Castagnoli), as TFRecord uses it.
uint32_t Crc32c(std::string_view data);
uint32_t MaskedCrc32c(std::string_view data);

// The records of a whole file, as views into `file`. DATA_LOSS naming the record's index and
// offset for a checksum that does not match or a file that ends inside a record;
// INVALID_ARGUMENT when there are more than `max_records`.
StatusOr<std::vector<std::string_view>> SplitTfRecords(std::string_view file, size_t max_records);

// One record framed for a file (tests and tools write warm-up files with it).
std::string FrameTfRecord(std::string_view data);

}  // namespace mf::codec
