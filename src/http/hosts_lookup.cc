#include "http/hosts_lookup.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace mf::http {
namespace {

std::string CanonicalName(std::string_view name) {
  while (!name.empty() && name.back() == '.') name.remove_suffix(1);
  std::string out(name);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::map<std::string, std::string> ParseHostsFile(std::string_view text) {
  std::map<std::string, std::string> hosts;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    std::string address;
    size_t at = 0;
    while (at < line.size()) {
      while (at < line.size() && std::isspace(static_cast<unsigned char>(line[at]))) ++at;
      size_t start = at;
      while (at < line.size() && !std::isspace(static_cast<unsigned char>(line[at]))) ++at;
      if (start == at) break;
      std::string_view field = line.substr(start, at - start);
      if (address.empty()) {
        address = std::string(field);
      } else if (std::string name = CanonicalName(field); !name.empty()) {
        hosts.emplace(std::move(name), address);
      }
    }
  }
  return hosts;
}

std::string HostsFileFromEnvironment() {
  const char* path = std::getenv("MODELFLEET_HOSTS_FILE");
  return path ? path : "";
}

std::optional<std::string> HostsFile::Lookup(std::string_view host) {
  if (path_.empty()) return std::nullopt;
  struct stat st {};
  std::lock_guard lock(mu_);
  if (::stat(path_.c_str(), &st) != 0) {
    // Gone (the namespace has no hosts file yet, or it was removed): nothing to resolve.
    loaded_.reset();
    hosts_.clear();
    return std::nullopt;
  }
  Stamp stamp{st.st_ino, st.st_size, st.st_mtim};
  if (!loaded_ || !(*loaded_ == stamp)) {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    hosts_ = in ? ParseHostsFile(text.str()) : std::map<std::string, std::string>{};
    loaded_ = stamp;
  }
  auto it = hosts_.find(CanonicalName(host));
  if (it == hosts_.end()) return std::nullopt;
  return it->second;
}

}  // namespace mf::http
