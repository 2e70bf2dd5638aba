#pragma once

// How meshctl prints answers: aligned tables for people, JSON for scripts.

#include <string>
#include <string_view>
#include <vector>

namespace google::protobuf {
class Message;
}  // namespace google::protobuf

namespace mesh::meshctl {

// One JSON object on one line, with the protobuf field names of
// proto/admin.proto and every primitive field, even when zero.
void print_json(const google::protobuf::Message& message);

// text as a JSON string literal, quotes included.
std::string json_string(std::string_view text);

// Three significant digits.
std::string format_number(double value);

// Columns left-aligned except those marked numeric, two spaces apart.
void print_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& numeric,
                 const std::string& indent = "");

}  // namespace mesh::meshctl
