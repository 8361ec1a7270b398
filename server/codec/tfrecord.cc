#include "server/codec/tfrecord.h"

#include <array>

namespace mf::codec {
namespace {

constexpr uint32_t kMaskDelta = 0xa282ead8u;
constexpr size_t kHeaderBytes = 8 + 4;  // length, its CRC
constexpr size_t kFooterBytes = 4;      // the data's CRC

constexpr std::array<uint32_t, 256> MakeCrc32cTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) != 0 ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;  // reflected poly
    table[i] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = MakeCrc32cTable();

uint64_t LittleEndian(std::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = bytes.size(); i-- > 0;) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

void AppendLittleEndian(uint64_t value, size_t bytes, std::string* out) {
  for (size_t i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

uint32_t Crc32c(std::string_view data) {
  uint32_t crc = 0xffffffffu;
  for (char c : data) crc = kCrc32cTable[(crc ^ static_cast<unsigned char>(c)) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

uint32_t MaskedCrc32c(std::string_view data) {
  const uint32_t crc = Crc32c(data);
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

StatusOr<std::vector<std::string_view>> SplitTfRecords(std::string_view file, size_t max_records) {
  std::vector<std::string_view> records;
  size_t at = 0;
  while (at < file.size()) {
    const std::string where = "TFRecord " + std::to_string(records.size()) + " at byte " + std::to_string(at);
    if (records.size() == max_records) {
      return InvalidArgument("more than " + std::to_string(max_records) + " records (" + where + ")");
    }
    const std::string_view rest = file.substr(at);
    if (rest.size() < kHeaderBytes) return DataLoss(where + ": the file ends inside the record's header");
    const std::string_view length_bytes = rest.substr(0, 8);
    if (LittleEndian(rest.substr(8, 4)) != MaskedCrc32c(length_bytes)) {
      return DataLoss(where + ": the length's checksum does not match (not a TFRecord file, or corrupt)");
    }
    const uint64_t length = LittleEndian(length_bytes);
    if (length > rest.size() - kHeaderBytes || rest.size() - kHeaderBytes - length < kFooterBytes) {
      return DataLoss(where + ": the file ends inside the record (" + std::to_string(length) + " bytes of data)");
    }
    const std::string_view data = rest.substr(kHeaderBytes, length);
    if (LittleEndian(rest.substr(kHeaderBytes + length, kFooterBytes)) != MaskedCrc32c(data)) {
      return DataLoss(where + ": the data's checksum does not match");
    }
    records.push_back(data);
    at += kHeaderBytes + length + kFooterBytes;
  }
  return records;
}

std::string FrameTfRecord(std::string_view data) {
  std::string out;
  out.reserve(kHeaderBytes + data.size() + kFooterBytes);
  AppendLittleEndian(data.size(), 8, &out);
  AppendLittleEndian(MaskedCrc32c(out), 4, &out);
  out.append(data);
  AppendLittleEndian(MaskedCrc32c(data), 4, &out);
  return out;
}

}  // namespace mf::codec
