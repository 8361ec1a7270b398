// HPACK (RFC 7541): header block compression for one HTTP/2 connection. A Decoder and an Encoder
// each keep their own dynamic table for the connection's lifetime (one per direction); blocks must
// go through them in the order they travel on the wire. The decoder accepts everything RFC 7541
// allows (Huffman included) and rejects everything else with InvalidArgument, which the session
// turns into a COMPRESSION_ERROR. The encoder never Huffman-codes (CPU over bytes) and indexes the
// fields that repeat, so a steady stream of gRPC responses costs one byte per repeated field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace mf::http2::hpack {

// Receives a decoded block's fields in order; the views are valid only during the call.
class FieldSink {
 public:
  virtual ~FieldSink() = default;
  virtual void OnField(std::string_view name, std::string_view value) = 0;
};

// The dynamic table (RFC 7541 2.3.2, 4): newest entry first, evicting the oldest to stay within
// max_bytes. Entries live in a ring of slots whose strings keep their capacity, so a warm table
// adds entries without allocating. Shared by Decoder and Encoder; not part of the API.
class DynamicTable {
 public:
  explicit DynamicTable(size_t max_bytes) : max_bytes_(max_bytes) {}

  // RFC 7541 4.1: name + value + 32 per entry.
  static constexpr size_t EntrySize(size_t name_size, size_t value_size) { return name_size + value_size + 32; }

  size_t bytes() const { return bytes_; }
  size_t max_bytes() const { return max_bytes_; }
  size_t count() const { return count_; }
  // Entry i, 0 being the newest; i < count().
  std::string_view name(size_t i) const;
  std::string_view value(size_t i) const;

  // Evicts down to the new maximum (RFC 7541 4.3).
  void SetMaxBytes(size_t max_bytes);
  // Adds an entry as the newest, evicting as needed; an entry larger than the maximum empties the
  // table and is not added (RFC 7541 4.4). name/value may point into this table.
  void Add(std::string_view name, std::string_view value);

 private:
  struct Slot {
    std::string bytes;  // name then value
    size_t name_size = 0;
  };
  const Slot& slot(size_t i) const { return ring_[(newest_ - i) & (ring_.size() - 1)]; }
  void EvictOldest();
  void Grow();

  std::vector<Slot> ring_;  // size 0 or a power of two
  size_t newest_ = 0;       // ring index of entry 0
  size_t count_ = 0;
  size_t bytes_ = 0;
  size_t max_bytes_;
  std::string scratch_;  // the entry being added, swapped into its slot
};

// The decoding side of one connection: the dynamic table lives across header blocks.
class Decoder {
 public:
  // max_table_bytes: the SETTINGS_HEADER_TABLE_SIZE this endpoint advertised (4096 by default);
  // a dynamic table size update above it is an error.
  explicit Decoder(size_t max_table_bytes = 4096);

  // Decodes one complete header block (HEADERS + CONTINUATION fragments joined). An error is a
  // COMPRESSION_ERROR (return InvalidArgument with a clear message): the connection must end.
  Status Decode(std::string_view block, FieldSink& sink);

  size_t table_bytes() const;  // RFC 7541 4.1 size of the dynamic table now

 private:
  // Reads a string literal (RFC 7541 5.2) at *pos; the view points into the block or into *buffer.
  Status ReadString(std::string_view block, size_t* pos, std::string* buffer, std::string_view* out);
  Status LookUp(uint64_t index, std::string_view* name, std::string_view* value) const;

  size_t max_table_bytes_;
  DynamicTable table_;
  std::string name_buffer_;  // Huffman-decoded names and values, reused across fields
  std::string value_buffer_;
};

// The encoding side: fields that repeat (":status 200", "content-type application/grpc",
// "grpc-status 0") go out as one-byte indexes after their first use.
class Encoder {
 public:
  // The peer's SETTINGS_HEADER_TABLE_SIZE; the encoder uses min(bytes, 4096) and announces a
  // change with a dynamic table size update at the start of the next block.
  void SetPeerMaxTableSize(uint32_t bytes);

  // Starts a header block in `out` (emits a pending table size update).
  void BeginBlock(std::string* out);

  // Appends one field to the block being written in `out`.
  void Add(std::string_view name, std::string_view value, std::string* out);

 private:
  static constexpr size_t kMaxTableBytes = 4096;

  DynamicTable table_{kMaxTableBytes};
  bool size_update_pending_ = false;
  size_t smallest_pending_size_ = kMaxTableBytes;  // RFC 7541 4.2: the smallest since the last block
  size_t pending_size_ = kMaxTableBytes;
};

}  // namespace mf::http2::hpack
