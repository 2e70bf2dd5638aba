#include "meshctl/output.h"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

namespace mesh::meshctl {

void print_json(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  std::cout << out << "\n";
}

std::string format_number(double value) { return fmt::format("{:.3g}", value); }

void print_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& numeric,
                 const std::string& indent) {
  std::vector<size_t> widths(numeric.size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      if (c > 0) line += "  ";
      const bool last = c + 1 == row.size();
      if (numeric[c]) {
        line += fmt::format("{:>{}}", row[c], widths[c]);
      } else {
        line += last ? row[c] : fmt::format("{:<{}}", row[c], widths[c]);
      }
    }
    std::cout << line << "\n";
  }
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace mesh::meshctl
