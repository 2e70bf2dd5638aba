// Trigger expressions (routine/trigger.h), written by operators in catalog
// files and sent by meshctl routine add: any text is accepted or refused with
// a line and column, never a crash. An accepted trigger must print back to a
// text that parses to the same trigger, and evaluate without trouble. The
// same bytes go to the window and days parsers, which must round-trip too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "routine/trigger.h"

namespace {

const mesh::routine::DeviceCatalog& catalog() {
  static const mesh::routine::DeviceCatalog devices = [] {
    mesh::routine::DeviceCatalog out;
    mesh::routine::DeviceSpec motion;
    motion.id = "hall_motion";
    motion.kind = mesh::routine::DeviceKind::motion_sensor;
    out[motion.id] = motion;
    mesh::routine::DeviceSpec light;
    light.id = "hall_light";
    light.kind = mesh::routine::DeviceKind::bulb;
    out[light.id] = light;
    return out;
  }();
  return devices;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesh::routine;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)parse_trigger(text, catalog());
  if (const auto window = parse_window(text)) {
    const auto again = parse_window(format_window(*window));
    if (!again || !(*again == *window)) std::abort();
  }
  if (const auto days = parse_days(text)) {
    if (days->mask == 0 || days->mask > 0x7f || format_days(*days).empty()) std::abort();
  }
  const auto trigger = parse_trigger(text);
  if (!trigger) {
    if (trigger.error().line == 0 || trigger.error().column == 0 || trigger.error().message.empty()) std::abort();
    return 0;
  }
  const auto again = parse_trigger(format_condition(*trigger));
  if (!again || !(*again == *trigger)) std::abort();
  const Attributes state = {{"motion", true}, {"brightness", 30.0}, {"power", false}};
  (void)evaluate(*trigger, [&](const std::string&) { return &state; }, 0, Weekday::mon);
  (void)devices(*trigger);
  return 0;
}
