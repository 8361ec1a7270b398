#include "common/flags.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <climits>
#include <cmath>
#include <optional>
#include <sstream>

namespace mf {
namespace {

std::string Canonical(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (c == '-') c = '_';
  }
  return out;
}

}  // namespace

bool ParseInt64(std::string_view text, int64_t* out) {
  if (text.empty()) return false;
  const char* begin = text.data();
  if (*begin == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

bool ParseDouble(std::string_view text, double* out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size() && std::isfinite(*out);
}

bool ParseBool(std::string_view text, bool* out) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") {
    *out = true;
    return true;
  }
  if (text == "false" || text == "0" || text == "no" || text == "off") {
    *out = false;
    return true;
  }
  return false;
}

FlagSet::FlagSet(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void FlagSet::AddFlag(std::string name, std::string help, std::string default_value, bool is_bool,
                      std::function<Status(std::string_view)> assign) {
  std::string key = Canonical(name);
  flags_[key] = Flag{key, std::move(help), std::move(default_value), is_bool, false, std::move(assign)};
}

void FlagSet::Add(std::string name, std::string* target, std::string help) {
  AddFlag(std::move(name), std::move(help), *target, false, [target](std::string_view v) {
    *target = std::string(v);
    return Status::Ok();
  });
}

void FlagSet::Add(std::string name, int64_t* target, std::string help) {
  AddFlag(std::move(name), std::move(help), std::to_string(*target), false, [target](std::string_view v) {
    return ParseInt64(v, target) ? Status::Ok() : InvalidArgument("expected an integer");
  });
}

void FlagSet::Add(std::string name, int* target, std::string help) {
  AddFlag(std::move(name), std::move(help), std::to_string(*target), false, [target](std::string_view v) {
    int64_t wide = 0;
    if (!ParseInt64(v, &wide) || wide < INT_MIN || wide > INT_MAX) {
      return InvalidArgument("expected a 32-bit integer");
    }
    *target = static_cast<int>(wide);
    return Status::Ok();
  });
}

void FlagSet::Add(std::string name, double* target, std::string help) {
  std::ostringstream def;
  def << *target;
  AddFlag(std::move(name), std::move(help), def.str(), false, [target](std::string_view v) {
    return ParseDouble(v, target) ? Status::Ok() : InvalidArgument("expected a finite number");
  });
}

void FlagSet::Add(std::string name, bool* target, std::string help) {
  AddFlag(std::move(name), std::move(help), *target ? "true" : "false", true, [target](std::string_view v) {
    return ParseBool(v, target) ? Status::Ok() : InvalidArgument("expected true or false");
  });
}

void FlagSet::EnableConfigFile() {
  config_enabled_ = true;
  AddFlag("config", "YAML file of flag values (flag name: value); command-line flags win", "", false,
          [this](std::string_view v) {
            config_path_ = std::string(v);
            return Status::Ok();
          });
}

FlagSet::Flag* FlagSet::Find(std::string_view name) {
  auto it = flags_.find(Canonical(name));
  return it == flags_.end() ? nullptr : &it->second;
}

bool FlagSet::IsSet(std::string_view name) const {
  auto it = flags_.find(Canonical(name));
  return it != flags_.end() && it->second.set;
}

Status FlagSet::Assign(Flag& flag, std::string_view value, std::string_view source) {
  Status s = flag.assign(value);
  if (!s.ok()) {
    return InvalidArgument(std::string(source) + ": invalid value '" + std::string(value) + "' for --" + flag.name +
                           ": " + s.message());
  }
  flag.set = true;
  return Status::Ok();
}

Status FlagSet::Parse(int argc, const char* const* argv) {
  // Command-line values are collected first so that a config file can be applied beneath them.
  std::vector<std::pair<Flag*, std::string>> assignments;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) positional_.emplace_back(argv[i]);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional_.emplace_back(arg);
      continue;
    }
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    if (arg == "help" || arg == "h") {
      help_requested_ = true;
      continue;
    }
    std::string_view name = arg;
    std::optional<std::string> value;
    if (auto eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = std::string(arg.substr(eq + 1));
    }
    Flag* flag = Find(name);
    if (!flag && !value && name.starts_with("no")) {
      Flag* negated = Find(name.substr(2));
      if (negated && negated->is_bool) {
        assignments.emplace_back(negated, "false");
        continue;
      }
    }
    if (!flag) {
      return InvalidArgument("unknown flag --" + std::string(name) + " (see " + program_ + " --help)");
    }
    if (!value) {
      if (flag->is_bool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return InvalidArgument("flag --" + flag->name + " needs a value");
      }
    }
    if (flag->name == "config") {
      MF_RETURN_IF_ERROR(Assign(*flag, *value, "command line"));
      continue;
    }
    assignments.emplace_back(flag, std::move(*value));
  }
  if (config_enabled_ && !config_path_.empty()) {
    MF_RETURN_IF_ERROR(ApplyYamlFile(config_path_));
  }
  for (auto& [flag, value] : assignments) {
    MF_RETURN_IF_ERROR(Assign(*flag, value, "command line"));
  }
  return Status::Ok();
}

Status FlagSet::ApplyYamlFile(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return NotFound("cannot read config file " + path);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("config file " + path + " is not valid YAML: " + e.what());
  }
  return ApplyYaml(root, path);
}

Status FlagSet::ApplyYaml(const YAML::Node& root, std::string_view source) {
  if (root.IsNull()) return Status::Ok();
  if (!root.IsMap()) {
    return InvalidArgument(std::string(source) + ": expected a mapping of flag names to values");
  }
  for (const auto& entry : root) {
    std::string name = entry.first.as<std::string>("");
    Flag* flag = Find(name);
    if (!flag || flag->name == "config") {
      return InvalidArgument(std::string(source) + ": unknown setting '" + name + "' (see " + program_ + " --help)");
    }
    if (!entry.second.IsScalar()) {
      return InvalidArgument(std::string(source) + ": setting '" + name + "' must be a single value");
    }
    MF_RETURN_IF_ERROR(Assign(*flag, entry.second.Scalar(), source));
  }
  return Status::Ok();
}

std::string FlagSet::Usage() const {
  std::ostringstream out;
  out << "Usage: " << program_ << " [flags]\n" << summary_ << "\n\nFlags:\n";
  for (const auto& [key, flag] : flags_) {
    out << "  --" << flag.name << (flag.is_bool ? "" : "=VALUE") << "  " << flag.help;
    if (!flag.default_value.empty()) out << " (default: " << flag.default_value << ")";
    out << "\n";
  }
  return out.str();
}

}  // namespace mf
