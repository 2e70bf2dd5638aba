#include "routine/precondition_rule.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace mesh::routine {
namespace {

constexpr std::string_view kValueForms = "write a number, on, off, true, false or a \"quoted string\"";
constexpr std::string_view kConditionForms =
    "write DEVICE.ATTR OP VALUE (OP one of == != < <= > >=), DEVICE.ATTR in LO..HI or DEVICE.ATTR in {V, V, ...}";
constexpr std::array<std::string_view, 3> kRuleKeys = {"id", "when", "requires"};

struct Token {
  enum class Kind { word, string, op, open_set, close_set, comma, end };
  Kind kind = Kind::end;
  std::string_view text;
  uint32_t column = 1;
  std::string unquoted;  // kind string
  CompareOp op = CompareOp::eq;
};

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

std::string printable(char c) {
  return (c >= 0x21 && c < 0x7f) ? std::string(1, c) : fmt::format("\\x{:02x}", c & 0xff);
}

// -?DIGITS(.DIGITS)?: stricter than from_chars, so "18..24" is not "18." and
// ".24", and a device id such as 1st_floor is not a number.
std::optional<double> as_number(std::string_view word) {
  size_t i = word.empty() || word[0] != '-' ? 0 : 1;
  const size_t int_start = i;
  while (i < word.size() && word[i] >= '0' && word[i] <= '9') ++i;
  if (i == int_start) return std::nullopt;
  if (i < word.size() && word[i] == '.') {
    const size_t fraction_start = ++i;
    while (i < word.size() && word[i] >= '0' && word[i] <= '9') ++i;
    if (i == fraction_start) return std::nullopt;
  }
  if (i != word.size()) return std::nullopt;
  double value = 0;
  const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (ec != std::errc() || ptr != word.data() + word.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

core::Unexpected<ConditionError> fail(uint32_t column, std::string message) {
  return core::Unexpected(ConditionError{column, std::move(message)});
}

core::Expected<std::vector<Token>, ConditionError> lex(std::string_view text) {
  std::vector<Token> tokens;
  size_t pos = 0;
  while (true) {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
    Token token;
    token.column = static_cast<uint32_t>(pos + 1);
    if (pos == text.size()) {
      tokens.push_back(token);
      return tokens;
    }
    const char c = text[pos];
    const size_t start = pos;
    if (c == '{' || c == '}' || c == ',') {
      token.kind = c == '{' ? Token::Kind::open_set : c == '}' ? Token::Kind::close_set : Token::Kind::comma;
      ++pos;
    } else if (c == '=' || c == '!' || c == '<' || c == '>') {
      const bool equals_next = pos + 1 < text.size() && text[pos + 1] == '=';
      if ((c == '=' || c == '!') && !equals_next) {
        return fail(token.column, c == '=' ? "'=' alone is not an operator; compare with '=='"
                                           : "'!' alone is not an operator; write '!='");
      }
      pos += equals_next ? 2 : 1;
      token.kind = Token::Kind::op;
      if (c == '=') token.op = CompareOp::eq;
      if (c == '!') token.op = CompareOp::ne;
      if (c == '<') token.op = equals_next ? CompareOp::le : CompareOp::lt;
      if (c == '>') token.op = equals_next ? CompareOp::ge : CompareOp::gt;
    } else if (c == '"') {
      token.kind = Token::Kind::string;
      ++pos;
      while (true) {
        if (pos == text.size()) return fail(token.column, "this string has no closing '\"'");
        const char s = text[pos++];
        if (s == '"') break;
        if (s == '\\') {
          if (pos == text.size() || (text[pos] != '"' && text[pos] != '\\')) {
            return fail(static_cast<uint32_t>(pos), R"(in a string, '\' escapes only '"' and '\')");
          }
          token.unquoted += text[pos++];
        } else {
          token.unquoted += s;
        }
      }
    } else if (is_word_char(c)) {
      while (pos < text.size() && is_word_char(text[pos])) ++pos;
      token.kind = Token::Kind::word;
    } else {
      return fail(token.column, fmt::format("unexpected character '{}'", printable(c)));
    }
    token.text = text.substr(start, pos - start);
    tokens.push_back(std::move(token));
  }
}

std::string describe(const Token& token) {
  if (token.kind == Token::Kind::end) return "the end of the condition";
  return fmt::format("'{}'", token.text);
}

bool is_keyword(const Token& token, std::string_view word) {
  return token.kind == Token::Kind::word && token.text == word;
}

struct Literal {
  Value value;
  ValueKind kind = ValueKind::number;
};

std::optional<Literal> literal(const Token& token) {
  if (token.kind == Token::Kind::string) return Literal{Value{token.unquoted}, ValueKind::text};
  if (token.kind != Token::Kind::word) return std::nullopt;
  if (token.text == "on" || token.text == "off") return Literal{Value{token.text == "on"}, ValueKind::on_off};
  if (token.text == "true" || token.text == "false") {
    return Literal{Value{token.text == "true"}, ValueKind::boolean};
  }
  if (auto number = as_number(token.text)) return Literal{Value{*number}, ValueKind::number};
  return std::nullopt;
}

std::string known_attributes(DeviceKind kind) {
  std::string known;
  for (const auto& attribute : schema(kind)) known += fmt::format("{}{}", known.empty() ? "" : ", ", attribute.name);
  return known;
}

ValueKind kind_of(const AttributeSpec& spec) {
  switch (spec.type) {
    case AttributeType::on_off:
      return ValueKind::on_off;
    case AttributeType::boolean:
      return ValueKind::boolean;
    case AttributeType::number:
      return ValueKind::number;
  }
  return ValueKind::number;
}

// Every value the attribute may take.
ValueDomain attribute_range(const AttributeSpec& spec) {
  if (spec.type != AttributeType::number) return any_value(kind_of(spec));
  return between(Bound{spec.min, true}, Bound{spec.max, true}, spec.integer);
}

class ConditionParser {
 public:
  ConditionParser(std::vector<Token> tokens, const DeviceCatalog* devices)
      : tokens_(std::move(tokens)), devices_(devices) {}

  core::Expected<AttributeCondition, ConditionError> parse() {
    const Token& ref = take();
    if (ref.kind == Token::Kind::end) {
      return fail(ref.column, fmt::format("the condition is empty; {}", kConditionForms));
    }
    if (ref.kind != Token::Kind::word || literal(ref)) {
      return fail(ref.column, fmt::format("expected DEVICE.ATTR, found {}", describe(ref)));
    }
    const size_t dot = ref.text.rfind('.');
    if (dot == std::string_view::npos || dot == 0 || dot + 1 == ref.text.size()) {
      return fail(ref.column, fmt::format("'{}' is not DEVICE.ATTR (e.g. outlet_1.power)", ref.text));
    }
    AttributeCondition out;
    out.variable.device = std::string(ref.text.substr(0, dot));
    out.variable.attribute = std::string(ref.text.substr(dot + 1));
    const uint32_t attribute_column = ref.column + static_cast<uint32_t>(dot) + 1;
    if (auto problem = check_device_id(out.variable.device)) return fail(ref.column, *problem);
    if (devices_ != nullptr) {
      const auto device = devices_->find(out.variable.device);
      if (device == devices_->end())
        return fail(ref.column, fmt::format("no device {} in the catalog", out.variable.device));
      spec_ = find_attribute(device->second.kind, out.variable.attribute);
      if (spec_ == nullptr) {
        return fail(attribute_column, fmt::format("device {}: a {} has no attribute '{}' (it has: {})",
                                                  out.variable.device, to_string(device->second.kind),
                                                  out.variable.attribute, known_attributes(device->second.kind)));
      }
      out.settable = spec_->writable;
    }
    name_ = out.variable.text();
    const Token& op = take();
    std::optional<ValueDomain> domain;
    if (op.kind == Token::Kind::op) {
      domain = comparison(op);
    } else if (is_keyword(op, "in")) {
      domain = peek().kind == Token::Kind::open_set ? set() : range();
    } else {
      return fail(op.column,
                  fmt::format("expected == != < <= > >= or 'in' after '{}', found {}", ref.text, describe(op)));
    }
    if (error_) return core::Unexpected(std::move(*error_));
    if (peek().kind != Token::Kind::end) {
      return fail(peek().column, fmt::format("expected the end of the condition, found {}; a condition names one "
                                             "attribute (write one condition per requirement)",
                                             describe(peek())));
    }
    if (spec_ != nullptr) {
      domain = intersect(*domain, attribute_range(*spec_));
      if (is_empty(*domain)) {
        return fail(op.column, fmt::format("no value of {} satisfies this: it is {}", name_, spec_->allowed()));
      }
    }
    out.domain = std::move(*domain);
    return out;
  }

 private:
  const Token& peek() const { return tokens_[next_]; }
  const Token& take() { return tokens_[next_ < tokens_.size() - 1 ? next_++ : next_]; }

  ValueDomain set_error(uint32_t column, std::string message) {
    if (!error_) error_ = ConditionError{column, std::move(message)};
    return {};
  }

  // The value at the next token, checked against the attribute: its kind
  // and, when `allowed_value`, the attribute's range.
  std::optional<Literal> value(std::string_view after, bool allowed_value) {
    const Token& token = take();
    auto parsed = literal(token);
    if (!parsed) {
      set_error(token.column,
                fmt::format("expected a value after '{}'; {} (found {})", after, kValueForms, describe(token)));
      return std::nullopt;
    }
    if (spec_ != nullptr) {
      const ValueKind wanted = kind_of(*spec_);
      if (parsed->kind != wanted) {
        set_error(token.column, fmt::format("{} is {}, not {}", name_, spec_->allowed(), token.text));
        return std::nullopt;
      }
      if (allowed_value && wanted == ValueKind::number && !contains(attribute_range(*spec_), parsed->value)) {
        set_error(token.column, fmt::format("{} is {}: {} is not allowed", name_, spec_->allowed(), token.text));
        return std::nullopt;
      }
    }
    return parsed;
  }

  ValueDomain comparison(const Token& op) {
    const bool ordering = op.op != CompareOp::eq && op.op != CompareOp::ne;
    const auto operand = value(op.text, !ordering);
    if (!operand) return {};
    if (ordering && operand->kind != ValueKind::number) {
      return set_error(op.column,
                       fmt::format("'{}' compares numbers, and {} is {}; use == or !=", op.text, name_,
                                   spec_ != nullptr ? spec_->allowed() : std::string(to_string(operand->kind))));
    }
    const ValueDomain all = any_value(operand->kind);
    const double x = ordering ? std::get<double>(operand->value) : 0;
    switch (op.op) {
      case CompareOp::eq:
        return one_of(operand->kind, {operand->value});
      case CompareOp::ne:
        return without(all, operand->value);
      case CompareOp::lt:
        return between(std::nullopt, Bound{x, false});
      case CompareOp::le:
        return between(std::nullopt, Bound{x, true});
      case CompareOp::gt:
        return between(Bound{x, false}, std::nullopt);
      case CompareOp::ge:
        return between(Bound{x, true}, std::nullopt);
    }
    return {};
  }

  ValueDomain range() {
    const Token& token = take();
    const std::string_view text = token.kind == Token::Kind::word ? token.text : std::string_view();
    const size_t dots = text.find("..");
    const auto low = dots == std::string_view::npos ? std::nullopt : as_number(text.substr(0, dots));
    const auto high = dots == std::string_view::npos ? std::nullopt : as_number(text.substr(dots + 2));
    if (!low || !high) {
      return set_error(token.column, fmt::format("expected a range LO..HI (numbers, no spaces, e.g. 18..24) or a set "
                                                 "{{V, ...}} after 'in', found {}",
                                                 describe(token)));
    }
    if (spec_ != nullptr && spec_->type != AttributeType::number) {
      return set_error(token.column,
                       fmt::format("a range holds numbers, and {} is {}; use == or a set", name_, spec_->allowed()));
    }
    if (*low > *high) {
      return set_error(token.column, fmt::format("the range {} is empty; write the lower end first", text));
    }
    return between(Bound{*low, true}, Bound{*high, true});
  }

  ValueDomain set() {
    const Token& open = take();
    std::vector<Value> values;
    std::optional<ValueKind> kind;
    while (!error_) {
      if (peek().kind == Token::Kind::close_set && values.empty()) {
        return set_error(peek().column, "an empty set is never true; list at least one value");
      }
      const uint32_t column = peek().column;
      const auto member = value(values.empty() ? "{" : ",", true);
      if (!member) return {};
      if (kind && *kind != member->kind) {
        return set_error(column, fmt::format("a set holds values of one kind: {} is not {}",
                                             format_value(member->kind, member->value), to_string(*kind)));
      }
      kind = member->kind;
      if (std::find(values.begin(), values.end(), member->value) != values.end()) {
        return set_error(column, fmt::format("{} is listed twice", format_value(member->kind, member->value)));
      }
      if (values.size() == kMaxConditionSetMembers) {
        return set_error(column, fmt::format("a set holds at most {} values", kMaxConditionSetMembers));
      }
      values.push_back(member->value);
      const Token& after = take();
      if (after.kind == Token::Kind::close_set) break;
      if (after.kind != Token::Kind::comma) {
        return set_error(after.column, fmt::format("expected ',' or '}}' to close the '{{' at column {}, found {}",
                                                   open.column, describe(after)));
      }
    }
    if (error_) return {};
    return one_of(*kind, std::move(values));
  }

  std::vector<Token> tokens_;
  size_t next_ = 0;
  const DeviceCatalog* devices_;
  const AttributeSpec* spec_ = nullptr;
  std::string name_;
  std::optional<ConditionError> error_;
};

core::Expected<AttributeCondition, ConditionError> parse(std::string_view text, const DeviceCatalog* devices) {
  if (text.size() > kMaxConditionLength) {
    return fail(
        1, fmt::format("the condition is {} bytes long; at most {} are allowed", text.size(), kMaxConditionLength));
  }
  auto tokens = lex(text);
  if (!tokens) return core::Unexpected(tokens.error());
  return ConditionParser(std::move(*tokens), devices).parse();
}

// The line of the first byte above 0x7f, if any. toml++ 3.3, checking
// whether a code point is whitespace, reaches a branch marked unreachable
// for many non-ASCII ones (U+028B, U+FE7F, U+FEF7: undefined behaviour, found
// by precondition_rule_fuzz against header-only toml++), in keys, in values
// and after a line-ending backslash inside a multi-line string, even on a
// line that looks like a comment; telling those apart would take toml++'s
// own parser. Ids and conditions are ASCII anyway, so the whole file must be.
std::optional<uint32_t> first_non_ascii_line(std::string_view text) {
  uint32_t line = 1;
  for (char c : text) {
    if (static_cast<unsigned char>(c) > 0x7f) return line;
    if (c == '\n') ++line;
  }
  return std::nullopt;
}

// A problem of a rule's conditions, as the two readers of rules (a rules
// file, a catalog's rule) report it.
struct RuleProblem {
  std::string problem;
  std::string_view fix;
};

std::optional<RuleProblem> when_problem(const AttributeCondition& when) {
  if (when.settable) return std::nullopt;
  return RuleProblem{
      fmt::format("{} is a reading: no command makes it true, so the rule would never apply", when.variable.text()),
      "write `when` on an attribute a command sets; a reading may appear in requires"};
}

std::optional<RuleProblem> requires_size_problem(size_t size) {
  if (size == 0)
    return RuleProblem{"the list is empty, so the rule requires nothing",
                       "list at least one condition, or remove the rule"};
  if (size > kMaxRulePreconditions) {
    return RuleProblem{fmt::format("{} conditions; at most {} are allowed", size, kMaxRulePreconditions),
                       "split the rule: give some of the conditions a rule of their own on an intermediate condition"};
  }
  return std::nullopt;
}

// `requirement` against the requirements before it and the rule's `when`.
std::optional<RuleProblem> requirement_problem(const PreconditionRule& rule, const AttributeCondition& requirement) {
  const auto same = std::find_if(rule.preconditions.begin(), rule.preconditions.end(),
                                 [&](const auto& c) { return c.variable == requirement.variable; });
  if (same != rule.preconditions.end()) {
    return RuleProblem{fmt::format("{} is already constrained by requires[{}]", requirement.variable.text(),
                                   same - rule.preconditions.begin() + 1),
                       "write one condition per attribute, e.g. a range: in 18..24"};
  }
  if (requirement.variable == rule.when.variable) {
    return RuleProblem{fmt::format("{} is the attribute `when` constrains; it cannot be its own precondition",
                                   requirement.variable.text()),
                       "require conditions on other attributes"};
  }
  return std::nullopt;
}

// One rule of a file: as written, and as parsed.
struct ReadRule {
  PreconditionRuleSpec spec;
  PreconditionRule rule;
};

// Reads the [[precondition]] tables of one file, collecting every problem.
class RuleFileParser {
 public:
  RuleFileParser(std::string source, const DeviceCatalog& devices, RuleFileKind kind)
      : source_(std::move(source)), devices_(devices), kind_(kind) {}

  core::Expected<std::vector<ReadRule>, std::string> parse(std::string_view text) {
    if (text.size() > kMaxPreconditionFileBytes) {
      return core::Unexpected(fmt::format("{}: the file is {} bytes long; at most {} are allowed", source_, text.size(),
                                          kMaxPreconditionFileBytes));
    }
    if (const auto line = first_non_ascii_line(text)) {
      return core::Unexpected(fmt::format(
          "{}:{}: a character outside ASCII. Fix: write the file in ASCII, comments included.", source_, *line));
    }
    toml::table root;
    try {
      root = toml::parse(text, source_);
    } catch (const toml::parse_error& e) {
      const auto& begin = e.source().begin;
      return core::Unexpected(fmt::format(
          "{}:{}:{}: TOML syntax error: {}. Fix: correct the syntax there (strings need double quotes, each rule "
          "is a [[precondition]] table).",
          source_, line_of(begin.line), begin.column, e.description()));
    }
    std::vector<ReadRule> rules;
    for (const auto& [key, node] : root) {
      if (key.str() != "precondition" && kind_ == RuleFileKind::rules) {
        fail(line_of(node), key.str(), "unknown table", "a rules file holds [[precondition]] tables only");
      }
    }
    if (const toml::node* list_node = root.get("precondition")) {
      const toml::array* list = list_node->as_array();
      if (list == nullptr) {
        fail(line_of(*list_node), "precondition", "expected [[precondition]] tables",
             "write each rule as a [[precondition]] table");
      } else if (list->size() > kMaxPreconditionRules) {
        fail(line_of(*list_node), "precondition",
             fmt::format("{} rules; at most {} are allowed", list->size(), kMaxPreconditionRules),
             "split the rules of unrelated devices into meshes of their own, or merge rules");
      } else {
        for (const toml::node& entry : *list) {
          if (const toml::table* table = entry.as_table()) {
            if (auto rule = read_rule(*table)) rules.push_back(std::move(*rule));
          } else {
            fail(line_of(entry), "precondition", "expected a table", "write each rule as a [[precondition]] table");
          }
        }
      }
    }
    if (!errors_.empty()) {
      std::string message;
      for (const auto& error : errors_) message += (message.empty() ? "" : "\n") + error;
      return core::Unexpected(std::move(message));
    }
    return rules;
  }

 private:
  static uint32_t line_of(uint32_t line) { return line == 0 ? 1 : line; }
  static uint32_t line_of(const toml::node& node) { return line_of(node.source().begin.line); }

  void fail(uint32_t line, std::string_view key, std::string_view problem, std::string_view fix) {
    errors_.push_back(fmt::format("{}:{}: {}: {}. Fix: {}.", source_, line, key, problem, fix));
  }

  std::optional<AttributeCondition> condition(const toml::node& node, const std::string& key) {
    if (!node.is_string()) {
      fail(line_of(node), key, "expected a string", "write the condition in double quotes");
      return std::nullopt;
    }
    auto parsed = parse_condition(node.as_string()->get(), devices_);
    if (!parsed) {
      const bool unknown_device = parsed.error().message.rfind("no device ", 0) == 0;
      fail(line_of(node), key, parsed.error().text(),
           unknown_device ? "use a device of the catalog (meshctl devices lists them)" : kConditionForms);
      return std::nullopt;
    }
    return std::move(*parsed);
  }

  std::optional<ReadRule> read_rule(const toml::table& table) {
    const uint32_t line = line_of(table);
    PreconditionRule rule;
    PreconditionRuleSpec spec;
    std::string where = "precondition";
    bool ok = true;
    const toml::node* id = table.get("id");
    if (id == nullptr) {
      fail(line, "precondition.id", "missing", "add id = \"...\" to this [[precondition]]");
      ok = false;
    } else if (!id->is_string()) {
      fail(line_of(*id), "precondition.id", "expected a string", "write it in double quotes");
      ok = false;
    } else if (auto problem = check_precondition_rule_id(id->as_string()->get())) {
      fail(line_of(*id), "precondition.id", *problem, "use lower-case letters, digits, '_', '.' and '-'");
      ok = false;
    } else {
      rule.id = id->as_string()->get();
      spec.id = rule.id;
      where = "precondition " + rule.id;
    }
    for (const auto& [key, node] : table) {
      if (std::find(kRuleKeys.begin(), kRuleKeys.end(), key.str()) == kRuleKeys.end()) {
        fail(line_of(node), fmt::format("{}.{}", where, key.str()), "unknown key",
             "remove it; a [[precondition]] accepts id, when, requires");
        ok = false;
      }
    }
    if (const toml::node* when = table.get("when")) {
      if (auto parsed = condition(*when, where + ".when")) {
        if (auto problem = when_problem(*parsed)) {
          fail(line_of(*when), where + ".when", problem->problem, problem->fix);
          ok = false;
        } else {
          spec.when = when->as_string()->get();
          rule.when = std::move(*parsed);
        }
      } else {
        ok = false;
      }
    } else {
      fail(line, where + ".when", "missing", "add when = \"DEVICE.ATTR == VALUE\", the condition the rule guards");
      ok = false;
    }
    const toml::node* requires_node = table.get("requires");
    const toml::array* list = requires_node != nullptr ? requires_node->as_array() : nullptr;
    if (requires_node == nullptr) {
      fail(line, where + ".requires", "missing", "add requires = [\"DEVICE.ATTR == VALUE\", ...]");
      ok = false;
    } else if (list == nullptr) {
      fail(line_of(*requires_node), where + ".requires", "expected a list of conditions",
           "write requires = [\"outlet_1.power == off\"]");
      ok = false;
    } else if (auto problem = requires_size_problem(list->size())) {
      fail(line_of(*requires_node), where + ".requires", problem->problem, problem->fix);
      ok = false;
    } else {
      for (size_t i = 0; i < list->size(); ++i) {
        const std::string key = fmt::format("{}.requires[{}]", where, i + 1);
        auto parsed = condition(*list->get(i), key);
        if (!parsed) {
          ok = false;
          continue;
        }
        if (auto clash = requirement_problem(rule, *parsed)) {
          fail(line_of(*list->get(i)), key, clash->problem, clash->fix);
          ok = false;
        }
        spec.required.push_back(list->get(i)->as_string()->get());
        rule.preconditions.push_back(std::move(*parsed));
      }
    }
    if (!ok) return std::nullopt;
    if (const auto seen = first_line_.find(rule.id); seen != first_line_.end()) {
      fail(line, where, fmt::format("defined twice (first at line {})", seen->second),
           "keep one definition of each rule id, or give the second rule another id");
      return std::nullopt;
    }
    first_line_[rule.id] = line;
    return ReadRule{std::move(spec), std::move(rule)};
  }

  std::string source_;
  const DeviceCatalog& devices_;
  RuleFileKind kind_;
  std::map<std::string, uint32_t> first_line_;
  std::vector<std::string> errors_;
};

}  // namespace

std::string AttributeCondition::text() const { return variable.text() + " " + format_domain(domain); }

std::string ConditionError::text() const { return fmt::format("column {}: {}", column, message); }

core::Expected<AttributeCondition, ConditionError> parse_condition(std::string_view text) {
  return parse(text, nullptr);
}

core::Expected<AttributeCondition, ConditionError> parse_condition(std::string_view text,
                                                                   const DeviceCatalog& devices) {
  return parse(text, &devices);
}

core::Expected<AttributeCondition, std::string> command_condition(const DeviceSpec& device,
                                                                  const std::string& attribute, const Value& value) {
  if (auto problem = check_command(device, {{attribute, value}})) return core::Unexpected(std::move(*problem));
  const AttributeSpec* spec = find_attribute(device.kind, attribute);
  AttributeCondition out;
  out.variable = {device.id, attribute};
  out.domain = one_of(kind_of(*spec), {value});
  out.settable = true;
  return out;
}

std::optional<std::string> check_precondition_rule_id(std::string_view id) {
  if (id.empty()) return "a rule id must not be empty";
  if (id.size() > kMaxPreconditionRuleIdLength) {
    return fmt::format("rule id '{}...' is longer than {} characters", id.substr(0, 16), kMaxPreconditionRuleIdLength);
  }
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) return fmt::format("rule id '{}' has '{}'", id, printable(c));
  }
  return std::nullopt;
}

core::Expected<PreconditionRule, std::string> resolve_rule(const PreconditionRuleSpec& spec,
                                                           const DeviceCatalog& devices) {
  const std::string where = "precondition " + spec.id;
  auto failure = [&](std::string_view key, std::string_view problem) {
    return core::Unexpected(fmt::format("{}.{}: {}", where, key, problem));
  };
  if (auto problem = check_precondition_rule_id(spec.id))
    return core::Unexpected(fmt::format("{}: {}", where, *problem));
  PreconditionRule rule;
  rule.id = spec.id;
  auto when = parse_condition(spec.when, devices);
  if (!when) return failure("when", when.error().text());
  if (auto problem = when_problem(*when)) return failure("when", problem->problem);
  rule.when = std::move(*when);
  if (auto problem = requires_size_problem(spec.required.size())) return failure("requires", problem->problem);
  for (size_t i = 0; i < spec.required.size(); ++i) {
    const std::string key = fmt::format("requires[{}]", i + 1);
    auto requirement = parse_condition(spec.required[i], devices);
    if (!requirement) return failure(key, requirement.error().text());
    if (auto problem = requirement_problem(rule, *requirement)) return failure(key, problem->problem);
    rule.preconditions.push_back(std::move(*requirement));
  }
  return rule;
}

core::Expected<std::vector<PreconditionRule>, std::string> parse_precondition_rules(std::string_view text,
                                                                                    const std::string& source,
                                                                                    const DeviceCatalog& devices) {
  auto read = RuleFileParser(source, devices, RuleFileKind::rules).parse(text);
  if (!read) return core::Unexpected(read.error());
  std::vector<PreconditionRule> rules;
  for (auto& one : *read) rules.push_back(std::move(one.rule));
  return rules;
}

core::Expected<std::vector<PreconditionRuleSpec>, std::string> parse_precondition_rule_specs(
    std::string_view text, const std::string& source, const DeviceCatalog& devices, RuleFileKind kind) {
  auto read = RuleFileParser(source, devices, kind).parse(text);
  if (!read) return core::Unexpected(read.error());
  std::vector<PreconditionRuleSpec> specs;
  for (auto& one : *read) specs.push_back(std::move(one.spec));
  return specs;
}

}  // namespace mesh::routine
