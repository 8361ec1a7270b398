#include "server/config/text_proto.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <fstream>
#include <sstream>

namespace mf::server {
namespace {

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit CollectErrors(std::string source) : source_(std::move(source)) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (!first_.empty()) return;
    // The parser counts from 0; editors count from 1.
    first_ = source_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  const std::string& first() const { return first_; }

 private:
  std::string source_;
  std::string first_;
};

}  // namespace

Status ParseTextProto(const std::string& text, const std::string& source_name, google::protobuf::Message* message) {
  message->Clear();
  google::protobuf::TextFormat::Parser parser;
  CollectErrors errors(source_name);
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, message)) {
    message->Clear();
    return InvalidArgument(errors.first().empty()
                               ? source_name + ": not a valid " + message->GetTypeName() + " text proto"
                               : errors.first());
  }
  return Status::Ok();
}

Status ParseTextProtoFile(const std::string& path, google::protobuf::Message* message) {
  std::ifstream in(path);
  if (!in) {
    message->Clear();
    return NotFound("cannot read " + path);
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseTextProto(text.str(), path, message);
}

}  // namespace mf::server
