#include "routine/visibility.h"

namespace mesh::routine {

std::string_view to_string(Visibility visibility) {
  switch (visibility) {
    case Visibility::wv:
      return "wv";
    case Visibility::gsv:
      return "gsv";
    case Visibility::sgsv:
      return "sgsv";
    case Visibility::psv:
      return "psv";
    case Visibility::ev:
      return "ev";
  }
  return "psv";
}

bool is_global(Visibility visibility) { return visibility == Visibility::gsv || visibility == Visibility::sgsv; }

std::optional<Visibility> parse_visibility(std::string_view text) {
  if (text == "wv") return Visibility::wv;
  if (text == "gsv") return Visibility::gsv;
  if (text == "sgsv") return Visibility::sgsv;
  if (text == "psv") return Visibility::psv;
  if (text == "ev") return Visibility::ev;
  return std::nullopt;
}

}  // namespace mesh::routine
