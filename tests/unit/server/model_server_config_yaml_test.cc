// The YAML form of --model_config_file: every field, the 1:1 match with the text form, each
// refusal with its line, the choice of form by file name, and the committed example.
#include "server/config/model_server_config_yaml.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server/config/model_server_config.h"
#include "server/config/text_proto.h"
#include "temp_repository.h"

namespace mf::server {
namespace {

StatusOr<std::vector<ModelConfig>> FromYaml(const std::string& text) {
  return ParseModelServerConfigYaml(text, "test.yaml");
}

TEST(ModelServerConfigYamlTest, ParsesEveryField) {
  auto configs = FromYaml(R"(
model_config_list:
- name: digits
  base_path: /models/digits
  model_platform: onnx
  model_version_policy: {specific: {versions: [1, 2]}}
  version_labels: {stable: 1, canary: 2}
  device: cpu
  version_devices: {2: cuda, 3: auto}
- name: cnn
  base_path: /models/cnn
  model_version_policy: {all: {}}
- name: plain
  base_path: /models/plain
- name: two
  base_path: /models/two
  model_version_policy:
    latest:
      num_versions: 2
)");
  ASSERT_TRUE(configs.ok()) << configs.status().ToString();
  ASSERT_EQ(configs->size(), 4u);
  const ModelConfig& digits = (*configs)[0];
  EXPECT_EQ(digits.name, "digits");
  EXPECT_EQ(digits.base_path, "/models/digits");
  EXPECT_EQ(digits.policy, VersionPolicy::Specific({1, 2}));
  EXPECT_EQ(digits.version_labels, (std::map<std::string, int64_t>{{"stable", 1}, {"canary", 2}}));
  EXPECT_EQ(digits.device, DeviceChoice::kCpu);
  EXPECT_EQ(digits.version_devices,
            (std::map<int64_t, DeviceChoice>{{2, DeviceChoice::kCuda}, {3, DeviceChoice::kAuto}}));
  EXPECT_EQ((*configs)[1].policy, VersionPolicy::All());
  EXPECT_EQ((*configs)[2].policy, VersionPolicy::Latest(1)) << "TF Serving's default policy";
  EXPECT_FALSE((*configs)[2].device.has_value()) << "unset: the --device flag decides";
  EXPECT_TRUE((*configs)[2].version_devices.empty());
  EXPECT_EQ((*configs)[3].policy, VersionPolicy::Latest(2));
}

TEST(ModelServerConfigYamlTest, TranslatesOneToOneFromTheTextForm) {
  tensorflow::serving::ModelServerConfig proto;
  ASSERT_TRUE(ParseTextProto(R"(
    model_config_list {
      config {
        name: "digits" base_path: "/models/digits" model_platform: "onnx_onnxv1"
        model_version_policy { latest { num_versions: 3 } }
        version_labels { key: "stable" value: 1 }
      }
      config { name: "cnn" base_path: "/models/cnn" model_version_policy { all {} } }
    })",
                             "test.config", &proto)
                  .ok());
  auto text = ModelConfigsFromProto(proto);
  auto yaml = FromYaml(R"(
model_config_list:
- {name: digits, base_path: /models/digits, model_platform: onnx_onnxv1,
   model_version_policy: {latest: {num_versions: 3}}, version_labels: {stable: 1}}
- {name: cnn, base_path: /models/cnn, model_version_policy: {all: }}
)");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  EXPECT_EQ(*yaml, *text);
}

struct BadCase {
  const char* yaml;
  const char* error;  // a substring of the message, with the position where it matters
};

TEST(ModelServerConfigYamlTest, RefusesEachMistakeNamingItsLine) {
  const BadCase cases[] = {
      {"", "test.yaml: empty; expected a map with model_config_list"},
      {"model_config_list: [", "test.yaml:1:"},
      {"- name: m", "test.yaml:1:1: the model config must be a map"},
      {"models: []", "test.yaml:1:1: unknown key 'models' in the model config (known: model_config_list)"},
      {"model_config_list: []", "model_config_list has no models"},
      {"model_config_list:", "model_config_list has no models"},
      {"model_config_list: {name: m}", "test.yaml:1:20: model_config_list must be a list of models"},
      {"model_config_list:\n- name: m\n  base_path: /m\n  devise: cpu",
       "test.yaml:4:3: unknown key 'devise' in a model_config_list entry (known: name, base_path, model_platform, "
       "model_version_policy, version_labels, device, version_devices)"},
      {"model_config_list:\n- name: m\n  name: n\n  base_path: /m",
       "test.yaml:3:3: key 'name' is given twice in a model_config_list entry"},
      {"model_config_list:\n- name: [m]\n  base_path: /m", "test.yaml:2:9: name must be a string"},
      {"model_config_list:\n- name: m\n  base_path:", "base_path must be a string"},
      {"model_config_list:\n- base_path: /m", "test.yaml:2:3: model config: name must not be empty"},
      {"model_config_list:\n- name: m", "test.yaml:2:3: model config 'm': base_path must not be empty"},
      {"model_config_list:\n- name: a/b\n  base_path: /m", "name 'a/b' contains '/'"},
      {"model_config_list:\n- {name: m, base_path: /a}\n- {name: m, base_path: /b}",
       "test.yaml:3:3: model config: model 'm' is listed twice"},
      {"model_config_list:\n- {name: m, base_path: /m, model_platform: pytorch}",
       "test.yaml:2:3: model config 'm': model_platform 'pytorch' is not supported"},
      {"model_config_list:\n- {name: m, base_path: /m, device: gpu}",
       "test.yaml:2:36: device must be auto, cpu or cuda, got 'gpu'"},
      {"model_config_list:\n- {name: m, base_path: /m, device: {cpu: 1}}", "test.yaml:2:36: device must be a string"},
      {"model_config_list:\n- {name: m, base_path: /m, version_devices: {x: cpu}}",
       "version_devices key 'x' must be a version number"},
      {"model_config_list:\n- {name: m, base_path: /m, version_devices: {2: tpu}}",
       "device of version 2 must be auto, cpu or cuda, got 'tpu'"},
      {"model_config_list:\n- {name: m, base_path: /m, version_devices: {-1: cpu}}",
       "version_devices names negative version -1"},
      {"model_config_list:\n- {name: m, base_path: /m, version_devices: [cpu]}", "version_devices must be a map"},
      {"model_config_list:\n- {name: m, base_path: /m, version_labels: {stable: one}}",
       "label 'stable' must be an integer, got 'one'"},
      {"model_config_list:\n- {name: m, base_path: /m, version_labels: {stable: -1}}",
       "label 'stable' points at negative version -1"},
      {"model_config_list:\n- {name: m, base_path: /m, version_labels: {stable: 1, stable: 2}}",
       "key 'stable' is given twice in version_labels"},
      {"model_config_list:\n- {name: m, base_path: /m, model_version_policy: {}}",
       "model_version_policy needs one of latest, all or specific"},
      {"model_config_list:\n- {name: m, base_path: /m, model_version_policy: {newest: {}}}",
       "unknown key 'newest' in model_version_policy (known: latest, all, specific)"},
      {"model_config_list:\n- {name: m, base_path: /m, model_version_policy: {all: {}, latest: {num_versions: 1}}}",
       "model_version_policy gives both 'all' and 'latest'; choose one"},
      {"model_config_list:\n- {name: m, base_path: /m, model_version_policy: {all: {x: 1}}}",
       "model_version_policy all takes no fields"},
      {"model_config_list:\n- {name: m, base_path: /m, model_version_policy: {latest: {}}}",
       "latest num_versions must be >= 1, got 0"},
      {"model_config_list:\n- {name: m, base_path: /m, model_version_policy: {latest: {num_versions: -2}}}",
       "test.yaml:2:74: model_version_policy latest num_versions must be >= 1, got -2"},
      {"model_config_list:\n- {name: m, base_path: /m, model_version_policy: {latest: {num_versions: 1.5}}}",
       "num_versions must be an integer, got '1.5'"},
      {"model_config_list:\n- {name: m, base_path: /m, model_version_policy: {latest: {num_versions: 2000000}}}",
       "latest num_versions 2000000 is too large"},
      {"model_config_list:\n- {name: m, base_path: /m, model_version_policy: {latest: {num_versions: "
       "99999999999999999999}}}",
       "num_versions must be an integer"},
      {"model_config_list:\n- {name: m, base_path: /m, model_version_policy: {latest: {count: 1}}}",
       "unknown key 'count' in model_version_policy latest (known: num_versions)"},
      {"model_config_list:\n- {name: m, base_path: /m, model_version_policy: {specific: {versions: 1}}}",
       "specific versions must be a list of integers"},
      {"model_config_list:\n- {name: m, base_path: /m, model_version_policy: {specific: {versions: []}}}",
       "model_version_policy specific needs at least one version"},
      {"model_config_list:\n- {name: m, base_path: /m, model_version_policy: {specific: {versions: [a]}}}",
       "a specific version must be an integer, got 'a'"},
      {"model_config_list:\n- {[a]: m}", "a key in a model_config_list entry must be a plain name"},
  };
  for (const BadCase& c : cases) {
    auto configs = FromYaml(c.yaml);
    ASSERT_FALSE(configs.ok()) << "accepted:\n" << c.yaml;
    EXPECT_EQ(configs.status().code(), StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_NE(configs.status().message().find(c.error), std::string::npos)
        << "for:\n"
        << c.yaml << "\nwant: " << c.error << "\ngot:  " << configs.status().message();
  }
}

TEST(ModelServerConfigYamlTest, DeepNestingIsAnErrorNotACrash) {
  for (const char* open : {"[", "{a: "}) {
    std::string text = "model_config_list: ";
    for (int i = 0; i < 100'000; ++i) text += open;
    auto configs = FromYaml(text);
    ASSERT_FALSE(configs.ok());
    EXPECT_EQ(configs.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(configs.status().message().rfind("test.yaml", 0), 0u) << configs.status().message();
  }
}

TEST(ModelServerConfigYamlTest, FileNameChoosesTheForm) {
  EXPECT_TRUE(IsYamlConfigPath("/etc/models.yaml"));
  EXPECT_TRUE(IsYamlConfigPath("models.yml"));
  EXPECT_TRUE(IsYamlConfigPath("MODELS.YAML"));
  EXPECT_FALSE(IsYamlConfigPath("models.config"));
  EXPECT_FALSE(IsYamlConfigPath("models.yaml.config"));
  EXPECT_FALSE(IsYamlConfigPath("yaml"));

  testing::TempRepository dir;
  const std::string yaml = (dir.root() / "models.yml").string();
  std::ofstream(yaml) << "model_config_list:\n- {name: m, base_path: /m, device: cuda}\n";
  auto from_yaml = LoadModelServerConfigFile(yaml);
  ASSERT_TRUE(from_yaml.ok()) << from_yaml.status().ToString();
  EXPECT_EQ(from_yaml->at(0).device, DeviceChoice::kCuda);

  // The same bytes under another name are read as the text form, and refused as such.
  const std::string text = (dir.root() / "models.config").string();
  std::filesystem::copy_file(yaml, text);
  auto from_text = LoadModelServerConfigFile(text);
  ASSERT_FALSE(from_text.ok());
  EXPECT_NE(from_text.status().message().find(text + ":2:1: Expected \"{\""), std::string::npos)
      << from_text.status().message();

  auto bad = LoadModelServerConfigFile((dir.root() / "bad.yaml").string());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  std::ofstream(dir.root() / "bad.yaml") << "model_config_list:\n- {name: m, base_path: /m, device: gpu}\n";
  bad = LoadModelServerConfigFile((dir.root() / "bad.yaml").string());
  EXPECT_NE(bad.status().message().find((dir.root() / "bad.yaml").string() + ":2:"), std::string::npos)
      << bad.status().message();
}

TEST(ModelServerConfigYamlTest, CommittedExampleParses) {
  auto configs = LoadModelServerConfigFile("examples/configs/models.yaml");
  ASSERT_TRUE(configs.ok()) << configs.status().ToString();
  ASSERT_EQ(configs->size(), 2u);
  EXPECT_EQ(configs->at(0).device, DeviceChoice::kCpu);
  EXPECT_EQ(DeviceFor(configs->at(0), 2), DeviceChoice::kAuto);
  EXPECT_EQ(configs->at(1).policy, VersionPolicy::Latest(1));
}

}  // namespace
}  // namespace mf::server
