// libFuzzer entry point for the server's request-reading path: the bytes go through
// wire::RequestReader (Beast's parser under our limits) and wire::ToRequest (gzip/deflate
// inflation) exactly as a connection feeds them, split into reads of a fuzzer-chosen size and
// with pipelined requests. Checks the invariants the server relies on.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "http/wire.h"

namespace {

void Check(bool invariant) {
  if (!invariant) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using mf::http::wire::RequestReader;
  if (size == 0) return 0;
  const size_t step = static_cast<size_t>(data[0]) + 1;  // bytes per simulated read
  data++;
  size--;
  const mf::http::wire::Limits limits{.max_header_bytes = 2048, .max_body_bytes = 8192, .decode_bodies = true};
  RequestReader reader(limits);
  reader.Reset();
  boost::beast::flat_buffer buffer;
  int requests = 0;
  for (size_t offset = 0; offset < size && requests < 64;) {
    size_t n = std::min(step, size - offset);
    auto dst = buffer.prepare(n);
    std::memcpy(dst.data(), data + offset, n);
    buffer.commit(n);
    offset += n;
    for (bool more = true; more;) {
      switch (reader.Feed(buffer)) {
        case RequestReader::Progress::kNeedMore:
          more = false;
          break;
        case RequestReader::Progress::kHeaderDone:
          (void)reader.WantsContinue();
          break;
        case RequestReader::Progress::kRejected: {
          int status = reader.rejection().status;
          Check(status == 400 || status == 413 || status == 415 || status == 417 || status == 431);
          Check(!reader.rejection().message.empty());
          return 0;
        }
        case RequestReader::Progress::kMessageDone: {
          mf::http::Request request;
          auto rejected = mf::http::wire::ToRequest(reader.parser().release(), limits, &request);
          if (rejected) {
            Check(rejected->status >= 400 && rejected->status < 500);
            return 0;
          }
          Check(request.body.size() <= limits.max_body_bytes);
          Check(!request.target.empty());
          (void)request.path();
          (void)request.query();
          (void)request.headers.Get("x-request-id");
          reader.Reset();
          ++requests;
          break;
        }
      }
    }
  }
  return 0;
}
