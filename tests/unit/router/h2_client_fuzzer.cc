// Fuzzes the router's HTTP/2 client session with arbitrary bytes from the "upstream" (an
// upstream pod may be anything that listens on the port): no crash, no UB, no leak, and every
// stream ends exactly once.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/router/h2_client_session.h"

namespace {

class Counting : public mf::router::StreamHandler {
 public:
  explicit Counting(int* ends) : ends_(ends) {}
  void OnHeaders(int, mf::http2::Headers) override {
    if (ended_) std::abort();
  }
  void OnData(std::string_view) override {
    if (ended_) std::abort();
  }
  void OnEnd(mf::http2::Headers) override { End(); }
  void OnReset(uint32_t, bool, std::string) override { End(); }

 private:
  void End() {
    if (ended_) std::abort();
    ended_ = true;
    ++*ends_;
  }
  int* ends_;
  bool ended_ = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mf::router::H2ClientSession session;
  int ends = 0;
  int submitted = 0;
  for (int i = 0; i < 3; ++i) {
    mf::router::H2Request request;
    request.path = "/pkg.Svc/M";
    request.authority = "fuzz";
    request.body = std::string(100000 * i, 'x');
    if (session.Submit(std::move(request), std::make_shared<Counting>(&ends)) != 0) ++submitted;
  }
  std::string out;
  session.Produce(&out);
  // Feed in pieces whose sizes come from the input itself.
  size_t pos = 0;
  bool failed = false;
  while (pos < size && !failed) {
    size_t n = 1 + data[pos] % 64;
    n = std::min(n, size - pos);
    failed = !session.Receive(data + pos, n).ok();
    pos += n;
    out.clear();
    session.Produce(&out);
  }
  session.Fail("end of input");
  if (ends != submitted) std::abort();
  return 0;
}
