#include "routine/trigger.h"

#include <array>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace mesh::routine {
namespace {

constexpr std::array<std::string_view, 7> kDayNames = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};
constexpr std::string_view kValueForms = "write a number, on, off, true, false or a \"quoted string\"";

struct Token {
  enum class Kind { word, number, string, op, open, close, end };
  Kind kind = Kind::end;
  std::string_view text;  // as written
  uint32_t line = 1;
  uint32_t column = 1;
  double number = 0;     // kind number
  std::string unquoted;  // kind string
  CompareOp op = CompareOp::eq;
};

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

std::optional<double> as_number(std::string_view word) {
  bool digit = false;
  for (char c : word) {
    if (c >= '0' && c <= '9') {
      digit = true;
    } else if (c != '.' && c != '-') {
      return std::nullopt;
    }
  }
  if (!digit) return std::nullopt;
  double value = 0;
  const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (ec != std::errc() || ptr != word.data() + word.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  core::Expected<std::vector<Token>, TriggerError> run() {
    std::vector<Token> tokens;
    while (true) {
      skip_space();
      Token token;
      token.line = line_;
      token.column = column();
      if (pos_ == text_.size()) {
        tokens.push_back(token);
        return tokens;
      }
      const char c = text_[pos_];
      const size_t start = pos_;
      if (c == '(' || c == ')') {
        token.kind = c == '(' ? Token::Kind::open : Token::Kind::close;
        ++pos_;
      } else if (c == '=' || c == '!' || c == '<' || c == '>') {
        const bool equals_next = pos_ + 1 < text_.size() && text_[pos_ + 1] == '=';
        if ((c == '=' || c == '!') && !equals_next) {
          return fail(token, c == '=' ? "'=' alone is not an operator; compare with '=='"
                                      : "'!' alone is not an operator; write '!=' or 'not'");
        }
        pos_ += equals_next ? 2 : 1;
        token.kind = Token::Kind::op;
        if (c == '=') token.op = CompareOp::eq;
        if (c == '!') token.op = CompareOp::ne;
        if (c == '<') token.op = equals_next ? CompareOp::le : CompareOp::lt;
        if (c == '>') token.op = equals_next ? CompareOp::ge : CompareOp::gt;
      } else if (c == '"') {
        token.kind = Token::Kind::string;
        ++pos_;
        while (true) {
          if (pos_ == text_.size() || text_[pos_] == '\n') {
            return fail(token, "this string has no closing '\"' on its line");
          }
          const char s = text_[pos_++];
          if (s == '"') break;
          if (s == '\\') {
            if (pos_ == text_.size() || (text_[pos_] != '"' && text_[pos_] != '\\')) {
              Token at = token;
              at.column = column() - 1;
              return fail(at, "in a string, '\\' escapes only '\"' and '\\'");
            }
            token.unquoted += text_[pos_++];
          } else {
            token.unquoted += s;
          }
        }
      } else if (is_word_char(c)) {
        while (pos_ < text_.size() && is_word_char(text_[pos_])) ++pos_;
        token.kind = Token::Kind::word;
        if (auto number = as_number(text_.substr(start, pos_ - start))) {
          token.kind = Token::Kind::number;
          token.number = *number;
        }
      } else {
        return fail(token, fmt::format("unexpected character '{}'", printable_char(c)));
      }
      token.text = text_.substr(start, pos_ - start);
      tokens.push_back(std::move(token));
    }
  }

 private:
  void skip_space() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') {
        ++line_;
        line_start_ = pos_ + 1;
      } else if (c != ' ' && c != '\t' && c != '\r') {
        return;
      }
      ++pos_;
    }
  }
  uint32_t column() const { return static_cast<uint32_t>(pos_ - line_start_ + 1); }
  static core::Unexpected<TriggerError> fail(const Token& at, std::string message) {
    return core::Unexpected(TriggerError{at.line, at.column, std::move(message)});
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t line_start_ = 0;
  uint32_t line_ = 1;
};

bool is_keyword(const Token& token, std::string_view word) {
  return token.kind == Token::Kind::word && token.text == word;
}

std::string describe(const Token& token) {
  if (token.kind == Token::Kind::end) return "the end of the trigger";
  return fmt::format("'{}'", token.text);
}

bool is_ordering(CompareOp op) { return op != CompareOp::eq && op != CompareOp::ne; }

// A recursive-descent parser; the first error stops it: every step returns
// at once when error_ is set.
class Parser {
 public:
  Parser(std::vector<Token> tokens, const DeviceCatalog* catalog) : tokens_(std::move(tokens)), catalog_(catalog) {}

  core::Expected<Trigger, TriggerError> parse() {
    Trigger trigger;
    if (tokens_.size() == 1) {
      fail(tokens_[0], "the trigger is empty; write a condition such as hall_motion.motion == on, or manual");
    } else if (tokens_.size() == 2 && is_keyword(tokens_[0], "manual")) {
      trigger.manual = true;
    } else {
      trigger.condition = any_of();
      if (!error_ && peek().kind != Token::Kind::end) {
        if (peek().kind == Token::Kind::close) {
          fail(peek(), "this ')' closes no '('");
        } else {
          fail(peek(), fmt::format("expected 'and', 'or' or the end of the trigger, found {}", describe(peek())));
        }
      }
    }
    if (error_) return core::Unexpected(std::move(*error_));
    return trigger;
  }

 private:
  const Token& peek() const { return tokens_[next_]; }
  const Token& take() { return tokens_[next_ < tokens_.size() - 1 ? next_++ : next_]; }

  Condition fail(const Token& at, std::string message) { return fail_at(at.line, at.column, std::move(message)); }
  Condition fail_at(uint32_t line, uint32_t column, std::string message) {
    if (!error_) error_ = TriggerError{line, column, std::move(message)};
    return {};
  }

  bool enter(const Token& at) {
    if (++depth_ <= kMaxTriggerDepth) return true;
    fail(at, fmt::format("the trigger nests deeper than {} levels of '(' and 'not'; simplify it", kMaxTriggerDepth));
    return false;
  }

  Condition any_of() { return chain("or", Condition::Kind::any_of, &Parser::all_of); }
  Condition all_of() { return chain("and", Condition::Kind::all_of, &Parser::unary); }

  // OPERAND (KEYWORD OPERAND)*, one node for the whole chain.
  Condition chain(std::string_view keyword, Condition::Kind kind, Condition (Parser::*operand)()) {
    Condition first = (this->*operand)();
    if (error_ || !is_keyword(peek(), keyword)) return first;
    Condition out;
    out.kind = kind;
    out.operands.push_back(std::move(first));
    while (!error_ && is_keyword(peek(), keyword)) {
      take();
      out.operands.push_back((this->*operand)());
    }
    return out;
  }

  Condition unary() {
    if (is_keyword(peek(), "not")) {
      if (!enter(take())) return {};
      Condition out;
      out.kind = Condition::Kind::negation;
      out.operands.push_back(unary());
      --depth_;
      return out;
    }
    if (peek().kind == Token::Kind::open) {
      const Token& open = take();
      if (!enter(open)) return {};
      Condition inner = any_of();
      if (error_) return {};
      if (peek().kind != Token::Kind::close) {
        return fail(peek(), fmt::format("expected ')' to close the '(' at {}:{}, found {}", open.line, open.column,
                                        describe(peek())));
      }
      take();
      --depth_;
      return inner;
    }
    return comparison();
  }

  Condition comparison() {
    const Token& ref = take();
    if (is_keyword(ref, "manual")) {
      return fail(ref, "'manual' must be the whole trigger (a manual routine runs only on demand)");
    }
    if (ref.kind != Token::Kind::word || is_keyword(ref, "and") || is_keyword(ref, "or") || is_keyword(ref, "on") ||
        is_keyword(ref, "off") || is_keyword(ref, "true") || is_keyword(ref, "false")) {
      return fail(ref, fmt::format("expected DEVICE.ATTR, 'not' or '(', found {}", describe(ref)));
    }
    const size_t dot = ref.text.rfind('.');
    if (dot == std::string_view::npos || dot == 0 || dot + 1 == ref.text.size()) {
      return fail(ref, fmt::format("'{}' is not DEVICE.ATTR (e.g. hall_motion.motion)", ref.text));
    }
    Condition out;
    Comparison& c = out.comparison;
    c.device = std::string(ref.text.substr(0, dot));
    c.attribute = std::string(ref.text.substr(dot + 1));
    const uint32_t attribute_column = ref.column + static_cast<uint32_t>(dot) + 1;
    if (auto problem = check_device_id(c.device)) return fail(ref, *problem);
    const AttributeSpec* spec = nullptr;
    if (catalog_ != nullptr) {
      const auto device = catalog_->find(c.device);
      if (device == catalog_->end()) return fail(ref, fmt::format("no device {} in the catalog", c.device));
      spec = find_attribute(device->second.kind, c.attribute);
      if (spec == nullptr) {
        std::string known;
        for (const auto& attribute : schema(device->second.kind)) {
          known += fmt::format("{}{}", known.empty() ? "" : ", ", attribute.name);
        }
        return fail_at(ref.line, attribute_column,
                       fmt::format("device {}: a {} has no attribute '{}' (it has: {})", c.device,
                                   to_string(device->second.kind), c.attribute, known));
      }
    }
    const Token& op = take();
    if (op.kind != Token::Kind::op) {
      return fail(op,
                  fmt::format("expected a comparison (== != < <= > >=) after '{}', found {}", ref.text, describe(op)));
    }
    c.op = op.op;
    const Token& value = take();
    c.value_text = std::string(value.text);
    if (value.kind == Token::Kind::number) {
      c.value = value.number;
    } else if (value.kind == Token::Kind::string) {
      c.value = value.unquoted;
    } else if (is_keyword(value, "on") || is_keyword(value, "true")) {
      c.value = true;
    } else if (is_keyword(value, "off") || is_keyword(value, "false")) {
      c.value = false;
    } else {
      return fail(value,
                  fmt::format("expected a value after '{}'; {} (found {})", op.text, kValueForms, describe(value)));
    }
    if (spec != nullptr) {
      if (is_ordering(c.op) && spec->type != AttributeType::number) {
        return fail(op, fmt::format("'{}' compares numbers, and {}.{} is {}; use == or !=", op.text, c.device,
                                    c.attribute, spec->allowed()));
      }
      if (auto problem = type_problem(*spec, c, value)) return fail(value, *problem);
    } else if (is_ordering(c.op) && std::holds_alternative<bool>(c.value)) {
      return fail(op, fmt::format("'{}' compares numbers and strings, not {}; use == or !=", op.text, value.text));
    }
    return out;
  }

  static std::optional<std::string> type_problem(const AttributeSpec& spec, const Comparison& c, const Token& value) {
    bool fits = false;
    switch (spec.type) {
      case AttributeType::on_off:
        fits = is_keyword(value, "on") || is_keyword(value, "off");
        break;
      case AttributeType::boolean:
        fits = is_keyword(value, "true") || is_keyword(value, "false");
        break;
      case AttributeType::number:
        fits = value.kind == Token::Kind::number;
        break;
    }
    if (fits) return std::nullopt;
    return fmt::format("{}.{} is {}, not {}", c.device, c.attribute, spec.allowed(), value.text);
  }

  std::vector<Token> tokens_;
  size_t next_ = 0;
  size_t depth_ = 0;
  const DeviceCatalog* catalog_;
  std::optional<TriggerError> error_;
};

core::Expected<Trigger, TriggerError> parse(std::string_view text, const DeviceCatalog* catalog) {
  if (text.size() > kMaxTriggerLength) {
    return core::Unexpected(TriggerError{
        1, 1, fmt::format("the trigger is {} bytes long; at most {} are allowed", text.size(), kMaxTriggerLength)});
  }
  auto tokens = Lexer(text).run();
  if (!tokens) return core::Unexpected(tokens.error());
  auto trigger = Parser(std::move(*tokens), catalog).parse();
  // meshctl shows the canonical form, and an operator may paste it back: it
  // must fit the same limit. It can be longer than the text (operators gain
  // spaces, numbers their canonical spelling).
  if (trigger && !trigger->manual) {
    if (const size_t canonical = format_condition(*trigger).size(); canonical > kMaxTriggerLength) {
      return core::Unexpected(TriggerError{
          1, 1,
          fmt::format("written out in canonical form (operators spaced, numbers normalized) the trigger is {} "
                      "bytes long; at most {} are allowed",
                      canonical, kMaxTriggerLength)});
    }
  }
  return trigger;
}

bool holds(const Comparison& c, const StateLookup& state) {
  const Attributes* attributes = state ? state(c.device) : nullptr;
  if (attributes == nullptr) return false;
  const auto it = attributes->find(c.attribute);
  if (it == attributes->end() || it->second.index() != c.value.index()) return false;
  const Value& actual = it->second;
  if (std::holds_alternative<bool>(actual)) {
    if (c.op == CompareOp::eq) return actual == c.value;
    if (c.op == CompareOp::ne) return actual != c.value;
    return false;
  }
  switch (c.op) {
    case CompareOp::eq:
      return actual == c.value;
    case CompareOp::ne:
      return actual != c.value;
    case CompareOp::lt:
      return actual < c.value;
    case CompareOp::le:
      return actual <= c.value;
    case CompareOp::gt:
      return actual > c.value;
    case CompareOp::ge:
      return actual >= c.value;
  }
  return false;
}

bool holds(const Condition& condition, const StateLookup& state) {
  switch (condition.kind) {
    case Condition::Kind::comparison:
      return holds(condition.comparison, state);
    case Condition::Kind::all_of:
      for (const auto& operand : condition.operands) {
        if (!holds(operand, state)) return false;
      }
      return true;
    case Condition::Kind::any_of:
      for (const auto& operand : condition.operands) {
        if (holds(operand, state)) return true;
      }
      return false;
    case Condition::Kind::negation:
      return !condition.operands.empty() && !holds(condition.operands.front(), state);
  }
  return false;
}

void collect_devices(const Condition& condition, std::set<std::string>& out) {
  if (condition.kind == Condition::Kind::comparison) out.insert(condition.comparison.device);
  for (const auto& operand : condition.operands) collect_devices(operand, out);
}

std::string format(const Condition& condition) {
  auto operand_text = [](const Condition& operand, bool grouped) {
    return grouped ? fmt::format("({})", format(operand)) : format(operand);
  };
  auto compound = [](const Condition& c) {
    return c.kind == Condition::Kind::all_of || c.kind == Condition::Kind::any_of;
  };
  switch (condition.kind) {
    case Condition::Kind::comparison: {
      const Comparison& c = condition.comparison;
      return fmt::format("{}.{} {} {}", c.device, c.attribute, to_string(c.op), c.value_text);
    }
    case Condition::Kind::all_of:
    case Condition::Kind::any_of: {
      const bool all = condition.kind == Condition::Kind::all_of;
      std::string out;
      for (const auto& operand : condition.operands) {
        if (!out.empty()) out += all ? " and " : " or ";
        // Parentheses exactly where the parser needs them to rebuild this tree.
        out += operand_text(operand, all ? compound(operand) : operand.kind == Condition::Kind::any_of);
      }
      return out;
    }
    case Condition::Kind::negation:
      if (condition.operands.empty()) return "not ()";
      return "not " + operand_text(condition.operands.front(), compound(condition.operands.front()));
  }
  return {};
}

std::optional<uint16_t> parse_clock(std::string_view text, bool allow_24) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 2 || text.size() - colon != 3) return std::nullopt;
  unsigned hours = 0;
  unsigned minutes = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == colon) continue;
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    unsigned& part = i < colon ? hours : minutes;
    part = part * 10 + static_cast<unsigned>(text[i] - '0');
  }
  if (minutes > 59) return std::nullopt;
  if (hours > 23 && !(allow_24 && hours == 24 && minutes == 0)) return std::nullopt;
  return static_cast<uint16_t>(hours * 60 + minutes);
}

std::optional<Weekday> parse_day(std::string_view text) {
  for (size_t i = 0; i < kDayNames.size(); ++i) {
    if (kDayNames[i] == text) return static_cast<Weekday>(i);
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(CompareOp op) {
  switch (op) {
    case CompareOp::eq:
      return "==";
    case CompareOp::ne:
      return "!=";
    case CompareOp::lt:
      return "<";
    case CompareOp::le:
      return "<=";
    case CompareOp::gt:
      return ">";
    case CompareOp::ge:
      return ">=";
  }
  return "?";
}

std::string_view to_string(Weekday day) { return kDayNames[static_cast<size_t>(day) % kDayNames.size()]; }

bool TimeWindow::contains(uint32_t minute_of_day) const {
  const uint32_t minute = minute_of_day % (24 * 60);
  if (wraps()) return minute >= start || minute < end;
  return minute >= start && minute < end;
}

std::string TriggerError::text() const { return fmt::format("trigger:{}:{}: {}", line, column, message); }

core::Expected<Trigger, TriggerError> parse_trigger(std::string_view text) { return parse(text, nullptr); }

core::Expected<Trigger, TriggerError> parse_trigger(std::string_view text, const DeviceCatalog& catalog) {
  return parse(text, &catalog);
}

core::Expected<TimeWindow, std::string> parse_window(std::string_view text) {
  const auto wrong = [&] {
    return core::Unexpected(fmt::format(
        "window \"{}\" is not HH:MM-HH:MM; write e.g. 22:00-06:00 (it wraps midnight) or 08:30-17:00", text));
  };
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) return wrong();
  const auto start = parse_clock(text.substr(0, dash), false);
  const auto end = parse_clock(text.substr(dash + 1), true);
  if (!start || !end) return wrong();
  if (*start == *end || (*start == 0 && *end == 24 * 60)) {
    return core::Unexpected(
        fmt::format("window \"{}\" covers no time or all of it; leave the window out to mean the whole day", text));
  }
  return TimeWindow{*start, *end};
}

std::string format_window(const TimeWindow& window) {
  return fmt::format("{:02}:{:02}-{:02}:{:02}", window.start / 60, window.start % 60, window.end / 60, window.end % 60);
}

core::Expected<Days, std::string> parse_days(std::string_view text) {
  const size_t range = text.find("..");
  const auto first = parse_day(text.substr(0, range));
  const auto last = range == std::string_view::npos ? first : parse_day(text.substr(range + 2));
  if (!first || !last) {
    return core::Unexpected(fmt::format(
        "\"{}\" is not a day; write mon, tue, wed, thu, fri, sat or sun, or a range such as mon..fri", text));
  }
  Days days{0};
  for (auto day = static_cast<unsigned>(*first);; day = (day + 1) % 7) {
    days.mask = static_cast<uint8_t>(days.mask | (1u << day));
    if (day == static_cast<unsigned>(*last)) break;
  }
  return days;
}

std::vector<std::string> format_days(const Days& days) {
  std::vector<std::string> out;
  for (size_t i = 0; i < kDayNames.size(); ++i) {
    if (days.contains(static_cast<Weekday>(i))) out.emplace_back(to_string(static_cast<Weekday>(i)));
  }
  return out;
}

std::string format_condition(const Trigger& trigger) {
  return trigger.manual ? std::string("manual") : format(trigger.condition);
}

std::set<std::string> devices(const Trigger& trigger) {
  std::set<std::string> out;
  if (!trigger.manual) collect_devices(trigger.condition, out);
  return out;
}

bool evaluate(const Trigger& trigger, const StateLookup& state, uint32_t minute_of_day, Weekday day) {
  if (trigger.manual) return false;
  const uint32_t minute = minute_of_day % (24 * 60);
  Weekday window_day = day;
  if (trigger.window) {
    if (!trigger.window->contains(minute)) return false;
    // The part after midnight of a wrapping window belongs to the night that
    // started the day before.
    if (trigger.window->wraps() && minute < trigger.window->end) {
      window_day = static_cast<Weekday>((static_cast<unsigned>(day) + 6) % 7);
    }
  }
  if (!trigger.days.contains(window_day)) return false;
  return holds(trigger.condition, state);
}

}  // namespace mesh::routine
