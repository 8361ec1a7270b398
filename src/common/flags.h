// Command-line flags plus an optional YAML config file, validated with clear messages.
//
//   mf::FlagSet flags("modelfleet-server", "Serves ONNX models over TF Serving's APIs.");
//   int port = 8500;
//   flags.Add("port", &port, "gRPC port");
//   if (auto s = flags.Parse(argc, argv); !s.ok()) { std::cerr << s.message(); return 2; }
//
// Accepted forms: --name=value, --name value, --bool_flag, --nobool_flag, --bool_flag=false.
// Names match with '-' and '_' interchangeable. With EnableConfigFile(), `--config FILE` names a
// YAML mapping of flag names to values; precedence is default < file < command line.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace YAML {
class Node;
}

namespace mf {

class FlagSet {
 public:
  FlagSet(std::string program, std::string summary);
  // Flags hold pointers into themselves (the --config setter): neither copied nor moved.
  FlagSet(const FlagSet&) = delete;
  FlagSet& operator=(const FlagSet&) = delete;

  void Add(std::string name, std::string* target, std::string help);
  void Add(std::string name, int* target, std::string help);
  void Add(std::string name, int64_t* target, std::string help);
  void Add(std::string name, double* target, std::string help);
  void Add(std::string name, bool* target, std::string help);
  // Adds --config FILE (YAML mapping of flag name -> value).
  void EnableConfigFile();

  // Unknown flags and unparsable values are INVALID_ARGUMENT naming the flag and the value.
  Status Parse(int argc, const char* const* argv);
  Status ApplyYamlFile(const std::string& path);
  Status ApplyYaml(const YAML::Node& root, std::string_view source);

  bool help_requested() const { return help_requested_; }
  bool IsSet(std::string_view name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  std::string Usage() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string default_value;
    bool is_bool = false;
    bool set = false;
    std::function<Status(std::string_view)> assign;
  };
  void AddFlag(std::string name, std::string help, std::string default_value, bool is_bool,
               std::function<Status(std::string_view)> assign);
  Flag* Find(std::string_view name);
  Status Assign(Flag& flag, std::string_view value, std::string_view source);

  std::string program_;
  std::string summary_;
  std::map<std::string, Flag> flags_;  // keyed by canonical name ('-' -> '_')
  std::vector<std::string> positional_;
  bool help_requested_ = false;
  bool config_enabled_ = false;
  std::string config_path_;
};

// Strict number parsing for flags and config values: the whole string must be the number.
bool ParseInt64(std::string_view text, int64_t* out);
bool ParseDouble(std::string_view text, double* out);
bool ParseBool(std::string_view text, bool* out);

}  // namespace mf
