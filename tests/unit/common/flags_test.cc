#include "common/flags.h"

#include <gtest/gtest.h>

#include <fstream>

namespace mf {
namespace {

struct Options {
  int port = 8500;
  std::string name = "model";
  bool batching = false;
  double fraction = 1.0;
  int64_t big = 0;
};

void AddFlags(FlagSet& flags, Options* o) {
  flags.Add("port", &o->port, "port");
  flags.Add("model_name", &o->name, "name");
  flags.Add("enable_batching", &o->batching, "batching");
  flags.Add("gpu_memory_fraction", &o->fraction, "fraction");
  flags.Add("big", &o->big, "big");
  flags.EnableConfigFile();
}

Status ParseArgs(FlagSet& flags, std::vector<const char*> args) {
  args.insert(args.begin(), "prog");
  return flags.Parse(static_cast<int>(args.size()), args.data());
}

TEST(FlagsTest, AllForms) {
  Options o;
  FlagSet flags("prog", "test program");
  AddFlags(flags, &o);
  ASSERT_TRUE(ParseArgs(flags, {"--port=9000", "--model-name", "digits", "--enable_batching",
                                "--gpu_memory_fraction=0.5", "--big=9000000000", "extra"})
                  .ok());
  EXPECT_EQ(o.port, 9000);
  EXPECT_EQ(o.name, "digits");
  EXPECT_TRUE(o.batching);
  EXPECT_DOUBLE_EQ(o.fraction, 0.5);
  EXPECT_EQ(o.big, 9000000000);
  EXPECT_EQ(flags.positional(), std::vector<std::string>{"extra"});
  EXPECT_TRUE(flags.IsSet("model_name"));
}

TEST(FlagsTest, NegatedBool) {
  Options o;
  o.batching = true;
  FlagSet flags("prog", "test program");
  AddFlags(flags, &o);
  ASSERT_TRUE(ParseArgs(flags, {"--noenable_batching"}).ok());
  EXPECT_FALSE(o.batching);
}

TEST(FlagsTest, ClearErrors) {
  Options o;
  FlagSet flags("prog", "test program");
  AddFlags(flags, &o);
  Status s = ParseArgs(flags, {"--port=eighty"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--port"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("eighty"), std::string::npos);
  EXPECT_EQ(o.port, 8500) << "a rejected value must not change the flag";

  FlagSet flags2("prog", "test program");
  AddFlags(flags2, &o);
  s = ParseArgs(flags2, {"--prot=1"});
  EXPECT_NE(s.message().find("unknown flag --prot"), std::string::npos) << s.message();

  FlagSet flags3("prog", "test program");
  AddFlags(flags3, &o);
  EXPECT_FALSE(ParseArgs(flags3, {"--port=99999999999"}).ok());
  FlagSet flags4("prog", "test program");
  AddFlags(flags4, &o);
  EXPECT_FALSE(ParseArgs(flags4, {"--gpu_memory_fraction=nan"}).ok());
  FlagSet flags5("prog", "test program");
  AddFlags(flags5, &o);
  EXPECT_FALSE(ParseArgs(flags5, {"--port"}).ok());
}

TEST(FlagsTest, ConfigFileBeneathCommandLine) {
  std::string path = ::testing::TempDir() + "/flags_test.yaml";
  std::ofstream(path) << "port: 7000\nmodel_name: from_file\nenable-batching: true\n";
  Options o;
  FlagSet flags("prog", "test program");
  AddFlags(flags, &o);
  ASSERT_TRUE(ParseArgs(flags, {"--port=7001", "--config", path.c_str()}).ok());
  EXPECT_EQ(o.port, 7001);
  EXPECT_EQ(o.name, "from_file");
  EXPECT_TRUE(o.batching);
}

TEST(FlagsTest, ConfigFileErrorsNameTheFileAndKey) {
  std::string path = ::testing::TempDir() + "/flags_bad.yaml";
  std::ofstream(path) << "port: [1, 2]\n";
  Options o;
  FlagSet flags("prog", "test program");
  AddFlags(flags, &o);
  Status s = ParseArgs(flags, {"--config", path.c_str()});
  EXPECT_NE(s.message().find("flags_bad.yaml"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("port"), std::string::npos);

  std::ofstream(path) << "bogus: 1\n";
  FlagSet flags2("prog", "test program");
  AddFlags(flags2, &o);
  s = ParseArgs(flags2, {"--config", path.c_str()});
  EXPECT_NE(s.message().find("unknown setting 'bogus'"), std::string::npos) << s.message();

  std::ofstream(path) << "port: [unclosed\n";
  FlagSet flags3("prog", "test program");
  AddFlags(flags3, &o);
  s = ParseArgs(flags3, {"--config", path.c_str()});
  EXPECT_NE(s.message().find("not valid YAML"), std::string::npos) << s.message();

  FlagSet flags4("prog", "test program");
  AddFlags(flags4, &o);
  s = ParseArgs(flags4, {"--config", "/nonexistent/x.yaml"});
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace mf
