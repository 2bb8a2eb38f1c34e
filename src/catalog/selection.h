// Which catalog entries a run covers: the suite, presets and weekday schedules.
//
// OOB presets (on SGLang-OOB entries): all-oob; all-deepseek (prefix starts "deepseek-");
// all-deepseek-non-mtp / all-deepseek-mtp (additionally "mtp" absent from / present in the prefix);
// all-qwen (prefix starts "qwen"). Mesh presets are tags listed in an entry's `mesh_presets`:
// "ds-all" selects tag "all", "ds-fp4-X" tag "fp4-X", "ds-fp8-X" tag "fp8-X", any other name the tag
// of that name. Any preset may also be an entry's exact prefix.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"

namespace fission::catalog {

enum class Weekday { kMonday, kTuesday, kWednesday, kThursday, kFriday, kSaturday, kSunday };

// "mon" / "monday" (case-insensitive), ... ; "today" is the current UTC weekday.
Weekday ParseWeekday(const std::string& text);
const char* WeekdayName(Weekday day);

struct Selection {
  std::optional<Suite> suite;
  std::vector<std::string> presets;  // union; empty means every entry of the suite
  // The schedule fills suite and presets; an empty preset list with `scheduled` set selects nothing.
  bool scheduled = false;
};

// The schedule of a weekday: Mon/Wed OOB all-deepseek-non-mtp; Tue/Thu OOB all-deepseek-mtp plus
// all-qwen; Fri Mesh ds-all; Sat all-oob; Sun nothing.
Selection ScheduleFor(Weekday day);

const std::vector<std::string>& OobPresets();

// The Mesh tag a preset name selects ("ds-all" -> "all", "ds-fp8-x" -> "fp8-x", other -> itself).
std::string MeshTag(const std::string& preset);

// Whether `preset` selects `entry` (exact prefix included).
bool PresetMatches(const std::string& preset, const ModelEntry& entry);

// Whether `preset` has the form of a built-in preset (the OOB ones, "ds-all", "ds-fp4-...",
// "ds-fp8-...") whatever the catalog holds.
bool IsPresetName(const std::string& preset);

// The entries `selection` covers, in catalog order. A preset that is neither a preset name, nor a
// Mesh tag of any entry, nor a prefix is an Error listing what is known (a typo); a preset name
// that selects nothing is not an error (SelectionWarnings reports it).
std::vector<const ModelEntry*> Select(const Catalog& catalog, const Selection& selection);

// Every preset name meaningful for `catalog`: the OOB presets, then "ds-"-style names of the Mesh tags
// present in the catalog.
std::vector<std::string> KnownPresets(const Catalog& catalog);

// Splits "a,b,c" into names, dropping empty ones.
std::vector<std::string> SplitList(const std::string& text);

}  // namespace fission::catalog
