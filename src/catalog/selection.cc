#include "catalog/selection.h"

#include <algorithm>
#include <cctype>
#include <ctime>

namespace fission::catalog {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool StartsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

bool HasTag(const ModelEntry& e, const std::string& tag) {
  return std::find(e.mesh_presets.begin(), e.mesh_presets.end(), tag) != e.mesh_presets.end();
}

bool IsOobPreset(const std::string& p) {
  const auto& all = OobPresets();
  return std::find(all.begin(), all.end(), p) != all.end();
}

}  // namespace

Weekday ParseWeekday(const std::string& text) {
  static const char* kNames[] = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"};
  std::string t = Lower(text);
  if (t == "today") {
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    return static_cast<Weekday>((utc.tm_wday + 6) % 7);  // tm_wday: 0 = Sunday
  }
  for (int i = 0; i < 7; ++i) {
    const std::string full = kNames[i];
    if (t == full || (t.size() >= 3 && full.rfind(t, 0) == 0)) return static_cast<Weekday>(i);
  }
  Fail("--schedule must be a weekday (mon, tue, wed, thu, fri, sat, sun) or 'today', got '", text, "'");
}

const char* WeekdayName(Weekday day) {
  static const char* kNames[] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};
  return kNames[static_cast<int>(day)];
}

Selection ScheduleFor(Weekday day) {
  Selection s;
  s.scheduled = true;
  switch (day) {
    case Weekday::kMonday:
    case Weekday::kWednesday:
      s.suite = Suite::kOob;
      s.presets = {"all-deepseek-non-mtp"};
      break;
    case Weekday::kTuesday:
    case Weekday::kThursday:
      s.suite = Suite::kOob;
      s.presets = {"all-deepseek-mtp", "all-qwen"};
      break;
    case Weekday::kFriday:
      s.suite = Suite::kMesh;
      s.presets = {"ds-all"};
      break;
    case Weekday::kSaturday:
      s.suite = Suite::kOob;
      s.presets = {"all-oob"};
      break;
    case Weekday::kSunday:
      break;
  }
  return s;
}

const std::vector<std::string>& OobPresets() {
  static const std::vector<std::string> kPresets = {"all-oob", "all-deepseek", "all-deepseek-non-mtp",
                                                    "all-deepseek-mtp", "all-qwen"};
  return kPresets;
}

std::string MeshTag(const std::string& preset) {
  if (preset == "ds-all") return "all";
  if (StartsWith(preset, "ds-fp4-") || StartsWith(preset, "ds-fp8-")) return preset.substr(3);
  return preset;
}

bool PresetMatches(const std::string& preset, const ModelEntry& e) {
  if (e.prefix == preset) return true;
  if (e.suite == Suite::kMesh) return HasTag(e, MeshTag(preset));
  const bool deepseek = StartsWith(e.prefix, "deepseek-");
  const bool mtp = e.prefix.find("mtp") != std::string::npos;
  if (preset == "all-oob") return true;
  if (preset == "all-deepseek") return deepseek;
  if (preset == "all-deepseek-non-mtp") return deepseek && !mtp;
  if (preset == "all-deepseek-mtp") return deepseek && mtp;
  if (preset == "all-qwen") return StartsWith(e.prefix, "qwen");
  return false;
}

bool IsPresetName(const std::string& p) {
  return IsOobPreset(p) || p == "ds-all" || StartsWith(p, "ds-fp4-") || StartsWith(p, "ds-fp8-");
}

std::vector<const ModelEntry*> Select(const Catalog& catalog, const Selection& selection) {
  for (const std::string& p : selection.presets) {
    if (IsPresetName(p)) continue;  // well-formed; when it selects nothing, SelectionWarnings says so
    const bool known = std::any_of(catalog.models.begin(), catalog.models.end(), [&](const ModelEntry& e) {
      return e.prefix == p || HasTag(e, MeshTag(p));
    });
    if (!known) {
      std::string names;
      for (const std::string& k : KnownPresets(catalog)) names += (names.empty() ? "" : ", ") + k;
      Fail(catalog.source, ": unknown preset '", p, "' (known: ", names, ", or an entry's prefix)");
    }
  }
  std::vector<const ModelEntry*> out;
  if (selection.scheduled && selection.presets.empty()) return out;
  for (const ModelEntry& e : catalog.models) {
    if (selection.suite && e.suite != *selection.suite) continue;
    if (!selection.presets.empty() &&
        std::none_of(selection.presets.begin(), selection.presets.end(),
                     [&](const std::string& p) { return PresetMatches(p, e); })) {
      continue;
    }
    out.push_back(&e);
  }
  return out;
}

std::vector<std::string> KnownPresets(const Catalog& catalog) {
  std::vector<std::string> out = OobPresets();
  auto add = [&](const std::string& name) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  for (const ModelEntry& e : catalog.models) {
    if (e.suite != Suite::kMesh) continue;
    for (const std::string& tag : e.mesh_presets) {
      if (tag == "all") {
        add("ds-all");
      } else if (StartsWith(tag, "fp4-") || StartsWith(tag, "fp8-")) {
        add("ds-" + tag);
      } else {
        add(tag);
      }
    }
  }
  return out;
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
    start = end + 1;
  }
  return out;
}

}  // namespace fission::catalog
